"""Tenants whose ``cluster_queues`` name a ClusterQueue the cluster lacks: what keeps a writing run from applying.

Why a run refuses rather than warns: the flows find a ClusterQueue's tenant by the names in
``tenants[].cluster_queues``. A misspelt name (``visoin-cq`` for ``vision-cq``) matches nothing, so the
real queue belongs to no tenant: the rebalance moves its quota past the tenant's change freeze and
``guaranteed_gpus`` (and plans it at weight 1), the deadlines flow holds and demotes the Workloads queued
there past the tenant's freeze, and the reclaim stops those outside the tenant's namespaces past it. Nothing else says so; ``gpuaas config preflight`` warns, but
nobody reads it at 02:00. So while the policy names such a queue an applying run writes none of what
the tenant's rules would hold back, and its headline says which tenant, which queue and what to fix.

Only where the snapshot read the ClusterQueues (the ``kube`` source answered): a queue missing from a
list that could not be read is no evidence of a typo, and that snapshot is degraded and never applied
anyway. Pure.
"""

from __future__ import annotations

from collections.abc import Collection

from gpuaas.models import Snapshot
from gpuaas.phrases import listed
from gpuaas.policy import Policy

__all__ = ["DEADLINES_MEANING", "REBALANCE_MEANING", "RECLAIM_MEANING", "cluster_queue_names", "misnamed_queues"]

REBALANCE_MEANING = "its change freeze and guarantee would hold no queue"
DEADLINES_MEANING = "its change freeze would hold back no Workload queued there"
RECLAIM_MEANING = "its change freeze would not hold back a workload queued there, which belongs to no tenant"


def cluster_queue_names(snapshot: Snapshot) -> set[str] | None:
    """The ClusterQueues the snapshot read (those without quota too); None where the Kubernetes API did not answer."""
    kube = snapshot.sources.get("kube")
    if kube is None or not kube.ok:
        return None
    names: set[str] = set()
    for frame, column in ((snapshot.queues, "name"), (snapshot.quotas, "cluster_queue")):
        if not frame.empty and column in frame.columns:
            names |= {str(n) for n in frame[column].dropna()}
    return names


def misnamed_queues(snapshot: Snapshot, policy: Policy, meaning: str, *, file: str = "policy.yaml",
                    tenants: Collection[str] | None = None) -> tuple[str, ...]:
    """One sentence per tenant (only those in ``tenants`` when given) that names a ClusterQueue the snapshot lacks,
    while a ClusterQueue there belongs to no tenant (the one a typo may have meant; where every queue there is
    named by a tenant, a missing name hides none and stops nothing):
    ``tenant vision names ClusterQueue visoin-cq, which the cluster lacks: <meaning>; fix
    tenants[vision].cluster_queues in policy.yaml``. Empty where every one is there, or where the ClusterQueues
    could not be read (``cluster_queue_names``)."""
    known = cluster_queue_names(snapshot)
    if known is None:
        return ()
    if known <= {q for tenant in policy.tenants for q in tenant.cluster_queues}:
        return ()  # every queue there is a tenant's: a stale name (a deleted queue, a policy shared by clusters) hides none
    out = []
    for tenant in policy.tenants:
        if tenants is not None and tenant.name not in tenants:
            continue
        missing = [q for q in tenant.cluster_queues if q not in known]
        if missing:
            noun = "ClusterQueue" if len(missing) == 1 else "ClusterQueues"
            out.append(f"tenant {tenant.name} names {noun} {listed(missing)}, which the cluster lacks: {meaning}; "
                       f"fix tenants[{tenant.name}].cluster_queues in {file}")
    return tuple(out)
