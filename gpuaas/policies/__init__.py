"""Policies: pure functions from what the sources read to what gpuaas decides, one subpackage a concept.

``reclaim`` (idle workloads, the decisions, the adaptive window and the causal replay), ``analysis``
(the reclaim frontiers), ``deadlines``, ``quotas``, ``cost`` and ``incident``. Each subpackage's public
names are in its ``__init__``; no policy reads a source or writes anything.
"""
