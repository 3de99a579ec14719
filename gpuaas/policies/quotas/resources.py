"""What a quota plan would meet in the cluster as it is now: other resources' quota, and what queues hold.

``binding_resources``: whether a plan's GPU gains would be stopped by the same flavor's cpu or
memory quota. Why: only the GPU ``nominalQuota`` moves. A queue that gains GPUs of a flavor whose
cpu or memory quota its workloads already fill gains nothing it can use: Kueue admits a Workload
only when every resource it asks for fits. Until those quotas move in proportion, such a plan is refused and the
sentence says which queue, flavor and resource.

The rule, per queue and flavor that gains GPUs and has GPUs in use: the workloads' own ratio
(``usage`` of the resource over GPUs in use, from the ClusterQueue's status) times the new GPU
quota must fit the resource's nominal quota.

``borrowing_flags``: a quota lowered below what its queue holds now. Allowed (Kueue evicts
nothing), but the queue then borrows the difference from its cohort, where others may reclaim it
by preemption: the operator is told. Both pure: the snapshot's quota frame or the demand, and the plan in.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from gpuaas.policies.quotas.demand import CohortDemand
from gpuaas.policies.quotas.plan import QuotaChange, QuotaPlan

__all__ = ["binding_resources", "borrowing_flags"]


def binding_resources(quotas: pd.DataFrame, changes: Sequence[QuotaChange],
                      gpu_resources: Sequence[str]) -> list[str]:
    """One sentence per (queue, flavor, resource) whose quota would bind after the plan's GPU gain."""
    if quotas.empty or not changes:
        return []
    out = []
    for change in changes:
        if change.after <= change.before:
            continue
        cell = quotas[(quotas["cluster_queue"] == change.queue) & (quotas["flavor"] == change.flavor)]
        gpu_used = float(cell[cell["resource"].isin(list(gpu_resources))]["usage"].sum())
        if gpu_used <= 0:
            continue
        for row in cell[~cell["resource"].isin(list(gpu_resources))].itertuples(index=False):
            per_gpu = float(row.usage or 0.0) / gpu_used
            needed = per_gpu * change.after
            if needed > float(row.nominal) + 1e-9:
                out.append(f"{change.queue} {change.flavor}: {change.before} -> {change.after} GPUs would need about "
                           f"{needed:g} {row.resource} at its workloads' {per_gpu:g} per GPU, above the "
                           f"{float(row.nominal):g} of its quota; the plan is refused until {row.resource} moves too")
    return out


def borrowing_flags(demand: CohortDemand, plan: QuotaPlan) -> list[str]:
    """One sentence per (queue, flavor) whose new quota is below the GPUs it holds now."""
    out = []
    for c in plan.changes:
        held = demand.lowest_flavor_use.get((c.queue, c.flavor), 0.0)
        if c.after < c.before and held > c.after:
            out.append(f"{c.queue} {c.flavor}: new quota {c.after} is below the {held:g} GPUs it holds now; "
                       f"Kueue evicts nothing, the queue now borrows {held - c.after:g} from the cohort "
                       "(others may reclaim them by preemption)")
    return out
