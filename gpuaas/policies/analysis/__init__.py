"""Offline analysis of reclaim policies: the GPU-hours / wake-ups frontiers, the clairvoyant limit and the
hindsight bound of a context family included."""

from gpuaas.policies.analysis.clairvoyant import *  # noqa: F403
from gpuaas.policies.analysis.clairvoyant import __all__ as _clairvoyant_all
from gpuaas.policies.analysis.frontier import *  # noqa: F403
from gpuaas.policies.analysis.frontier import __all__ as _frontier_all
from gpuaas.policies.analysis.hindsight import *  # noqa: F403
from gpuaas.policies.analysis.hindsight import __all__ as _hindsight_all

__all__ = [*_clairvoyant_all, *_frontier_all, *_hindsight_all]
