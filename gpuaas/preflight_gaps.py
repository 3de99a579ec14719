"""The preflight's check of what gpuaas reads in Kueue but cannot act on (``gpuaas.kueue_gaps``).

Why before the first run: a ClusterQueue of MIG slices or AMD GPUs reads as 0 GPUs in every figure gpuaas
gives, and work queued to a LocalQueue whose ClusterQueue does not exist is in no backlog and no deadline
plan. Nothing unsafe follows (none of it is ever reclaimed or moved), but the team that owns it must hear
that gpuaas does not see it, not find out from a plan that leaves it out. A warning, in the words the
collect's notes use.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from gpuaas.kueue_gaps import gap_notes
from gpuaas.policy import Policy
from gpuaas.preflight_checks import Check, Verdict
from gpuaas.snapshot import kueue_snapshot
from gpuaas.sources.kube import DEFAULT_GPU_RESOURCES, KubeState

__all__ = ["GAPS_CHECK", "gap_check", "kube_gaps"]

GAPS_CHECK = "accelerators and queues"


def kube_gaps(kube: KubeState | None, now: datetime, policy: Policy | None = None) -> tuple[str, ...] | None:
    """The collect's notes on what was read (None where the Kubernetes API did not answer): the Kueue views of a
    snapshot, its deadline columns included, so that a Workload's deadline counts as it would there."""
    if kube is None:
        return None
    snap = kueue_snapshot(now, kube, policy)
    return tuple(gap_notes(snap.data_quality, snap.workloads))


def gap_check(notes: Sequence[str] | None) -> Check:
    """A warning naming each accelerator gpuaas does not manage and each LocalQueue of a missing ClusterQueue;
    skipped without the Kubernetes API."""
    if notes is None:
        return Check(GAPS_CHECK, Verdict.skipped, "needs the Kubernetes API, above")
    if notes:
        return Check(GAPS_CHECK, Verdict.warning, "; ".join(notes))
    managed = ", ".join(DEFAULT_GPU_RESOURCES)
    return Check(GAPS_CHECK, Verdict.ok, f"no quota of or request for an accelerator but {managed}, the one gpuaas "
                                         "manages; every LocalQueue's ClusterQueue exists")
