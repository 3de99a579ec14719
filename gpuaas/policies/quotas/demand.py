"""Demand per ClusterQueue and flavor: what the quota planner is asked to serve, with its evidence.

Pure: the snapshot (current quotas, the backlog and how long it waited), the history frame
(``gpuaas.sources.queue_history``: percentiles of Kueue's per-queue gauges over the window),
the deadline GPUs per queue, the audit log's recent net changes and the policy go in;
``QueueDemand`` rows and the limits come out. Per cell (queue, flavor), in ``cell_demand``:

    held     = max(p-th percentile of admitted GPUs, of quota-reserved GPUs)  (borrowed GPUs included)
    pending  = max(median pending GPUs over the window,
                   pending GPUs now, if the oldest has waited >= pending_wait_minutes)
    demand   = min(reachable, max(held + pending, GPUs the deadline planner needs for this queue))

Why the caps: demand is what the queue asks for, and a queue can ask for anything. A pending
Workload bigger than anything its queue could ever be admitted (``reachable``: all of its
cohort's quota of the flavor, plus what the cohort tree lends it: a Cohort object's own quota,
other cohorts under the same root, as far as borrowingLimit and lendingLimit let it) will never run
whatever the plan; it is named in the notes and left out of the pending GPUs, now and in the
median. The demand of a cell never exceeds that reach either. Without these, one 10,000-GPU
Workload that never runs moves quota to a team that uses 4.

The deadline need is the deadline planner's minimum for the queue's own deadline jobs
(``deadline_gpus_per_queue``), not the peak of one schedule: four 4-GPU jobs that 4 GPUs meet in
turn need 4, even where a schedule on a 16-GPU pool runs them at once.

Pending work has no flavor until Kueue admits it; it is counted on the queue's first GPU flavor
(the one Kueue tries first). A cell without history falls back to what the snapshot shows now.
Guarantees come from the tenant owning the queue: ``guaranteed_gpus_per_flavor`` where given,
else ``guaranteed_gpus`` spread over the tenant's cells in proportion to their quota, across
every cohort the tenant's queues are in (a tenant in two cohorts is owed its guarantee once).
A cohort with a GPU quota or limit that is not a whole number of GPUs is not planned (``_whole``), nor one
whose Cohort parents loop (Kueue admits nothing under the loop: ``CohortTree.loop_words``). A ClusterQueue
Kueue admits nothing into (``spec.stopPolicy``, or ``Active=False``: its ``inactive`` column) neither gives
nor receives, and its pending work is no demand: Kueue leaves it out of its scheduling snapshot, so quota
moved to it would serve nothing, and quota taken from it its owners would miss once they resume it. A queue
never gives more than its ``lendingLimit`` lets it lend (``lendable_gpus``).
With less than ``min_history_days`` of history the plan says so and moves at most one step
(``max_step_gpus``) in all; a queue with less than that of its own (created since) lends nothing below
its share.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import pandas as pd

from gpuaas.kueue_gaps import stranded_workloads, unselected_queues
from gpuaas.models import CohortTree, FlavorResource, Snapshot, inactive_queues
from gpuaas.phrases import counted
from gpuaas.policies.deadlines import DeadlineJob, PoolPlan, PoolProblem, plan_deadlines
from gpuaas.policies.quotas._queue_bounds import lendable_gpus
from gpuaas.policies.quotas._reasons import MOVES_WINDOW_WORDS
from gpuaas.policies.quotas._whole import not_whole
from gpuaas.policies.quotas.plan import QueueDemand, QuotaLimits
from gpuaas.policy import Policy, RebalancePolicy

__all__ = ["CohortDemand", "cell_demand", "cohort_demands", "deadline_gpus_of_problems", "deadline_gpus_per_queue",
           "history_needed", "lendable_gpus", "limits_of", "pending_demand", "reachable_gpus", "short_history"]

Cell = tuple[str, str]


@dataclass(frozen=True)
class CohortDemand:
    """One cohort's planner input, and what the operator should know about it."""

    cohort: str
    queues: list[QueueDemand]
    limits: QuotaLimits
    history_seconds: float
    little_history: bool
    notes: list[str] = field(default_factory=list)
    lowest_flavor_use: dict[Cell, float] = field(default_factory=dict)
    """(queue, flavor) -> GPUs quota-reserved now: a new quota below it creates borrowing."""
    not_whole: list[str] = field(default_factory=list)
    """Why the cohort is not planned, in words (it holds no queue then): each GPU quota that is not a whole number
    of GPUs (rounding it would write a total the cohort does not have), or the loop of its Cohort parents."""


HISTORY_GAP_S = 3600.0
"""The samples a history may miss and still count as covering its span: an hour (a Prometheus restart, a scrape
gap), or a twentieth of a window shorter than a day."""


def history_needed(policy: RebalancePolicy, window_days: float | None = None) -> float:
    """Seconds of history that count as enough to lend on: ``min_history_days``, or the whole window the run
    reads when that is shorter (``usage_lookback_days``, or ``--history-days``: no history can be longer), less
    ``HISTORY_GAP_S``. Never below 0: ``min_history_days`` 0 turns the short-history rules off."""
    window_s = (policy.usage_lookback_days if window_days is None else window_days) * 86400
    return max(0.0, min(policy.min_history_days * 86400, window_s) - min(HISTORY_GAP_S, 0.05 * window_s))


def limits_of(policy: RebalancePolicy, window_days: float | None = None) -> QuotaLimits:
    """The planner's limits under ``policy``, for a run reading ``window_days`` of history (the policy's when None)."""
    return QuotaLimits(max_step_gpus=policy.max_step_gpus, max_step_percent=policy.max_step_percent,
                       max_total_moved_gpus=policy.max_total_moved_gpus, hysteresis_gpus=policy.hysteresis_gpus,
                       min_step_gpus=policy.min_step_gpus, lend_reserve=policy.lend_reserve,
                       no_reclaim_keep_factor=policy.no_reclaim_keep_factor,
                       no_reclaim_keep_gpus=policy.no_reclaim_keep_gpus,
                       reclaiming_lends=policy.reclaiming_lends,
                       reclaiming_keep_factor=policy.reclaiming_keep_factor,
                       reclaiming_keep_gpus=policy.reclaiming_keep_gpus,
                       min_lend_history_s=history_needed(policy, window_days))


def pending_demand(median: float, now: float, oldest_wait_s: float, policy: RebalancePolicy) -> float:
    """Pending GPUs that count as demand: the window's median, or all of now's once they waited long enough."""
    return max(median, now if oldest_wait_s >= policy.pending_wait_minutes * 60 else 0.0)


def cell_demand(held: float, pending: float, deadline_need: float, reachable: float) -> float:
    """One cell's demand (the formula of the module docstring); the replay calls this too."""
    return round(min(reachable, max(held + pending, deadline_need)), 3)


def reachable_gpus(rows: pd.DataFrame, tree: CohortTree | None = None) -> dict[Cell, float]:
    """(queue, flavor) -> the most GPUs of that flavor the queue could ever be admitted, under any plan.

    ``rows`` are one cohort's GPU quota cells. Why not today's reach: the rebalance itself moves
    nominal quota among the cohort's ClusterQueues, and with it the borrowing reach. So the reach is
    Kueue's (``CohortTree.reach``) with all of the cohort's ClusterQueues' quota of the flavor moved to
    the queue: the whole cohort's quota, plus what the cohort tree lends it (a Cohort object's own
    quota, other cohorts of the tree), less what a borrowingLimit or lendingLimit keeps from it.
    Without ``tree``, or where the tree's parents loop, the cohort's ClusterQueues' quota.
    """
    totals: dict[FlavorResource, float] = {}
    for r in rows.itertuples(index=False):
        fr = (str(r.flavor), str(r.resource))
        totals[fr] = totals.get(fr, 0.0) + float(r.nominal)
    reach: dict[Cell, float] = {}
    members = [str(s) for s in rows["cluster_queue"].unique()]
    free: dict[tuple[str, FlavorResource], bool] = {}
    for r in rows.itertuples(index=False):
        queue, fr = str(r.cluster_queue), (str(r.flavor), str(r.resource))
        gpus = totals[fr]
        root = tree.pool(queue) if tree is not None else None
        if tree is not None and root is not None and not tree.cycle(queue):
            if (root, fr) not in free:
                free[(root, fr)] = not tree.limits(root, fr)
            if free[(root, fr)]:  # no limits: every queue of the tree reaches all of it, whoever holds it
                gpus = tree.total(root, fr)
            else:
                moved = {(s, fr): 0.0 for s in members if s != queue and tree.quota((False, s), fr) is not None}
                gpus = max(gpus, tree.with_nominal({**moved, (queue, fr): totals[fr]}).reach(queue, fr))
        cell = (queue, fr[0])
        reach[cell] = reach.get(cell, 0.0) + gpus
    return reach


def _unadmitted(snapshot: Snapshot) -> tuple[set[tuple[str, str]], dict[str, float]]:
    """The LocalQueues a ClusterQueue never admits from (its ``namespaceSelector``), and queue -> the GPUs pending
    in them: the snapshot's backlog leaves them out, Kueue's pending metrics (the history) do not."""
    local = unselected_queues(snapshot.data_quality)
    wls = snapshot.workloads
    gpus: dict[str, float] = {}
    if local and not wls.empty and {"namespace", "queue", "state", "gpus"} <= set(wls.columns):
        for (namespace, queue), (cluster_queue, _) in local.items():
            waiting = stranded_workloads(wls, namespace, queue)
            if "active" in waiting.columns:
                waiting = waiting[waiting["active"].astype(bool)]
            gpus[cluster_queue] = gpus.get(cluster_queue, 0.0) + float(waiting["gpus"].sum())
    return set(local), gpus


def _never_admissible(snapshot: Snapshot, reach: Mapping[Cell, float],
                      unadmitted: set[tuple[str, str]]) -> dict[str, list[tuple[str, float]]]:
    """queue -> [(namespace/name, GPUs)] of pending Workloads bigger than any flavor the queue can reach (those
    of a LocalQueue it never admits from are left to ``_unadmitted``)."""
    wls = snapshot.workloads
    if wls.empty or not {"state", "gpus", "cluster_queue"} <= set(wls.columns):
        return {}
    best: dict[str, float] = {}
    for (queue, _), gpus in reach.items():
        best[queue] = max(best.get(queue, 0.0), gpus)
    out: dict[str, list[tuple[str, float]]] = {}
    for r in wls.itertuples(index=False):
        queue = str(r.cluster_queue)
        if r.state != "pending" or queue not in best or not float(r.gpus or 0.0) > best[queue] + 1e-9:
            continue
        if "active" in wls.columns and not bool(r.active):
            continue
        if (str(getattr(r, "namespace", "")), str(getattr(r, "queue", ""))) in unadmitted:
            continue
        out.setdefault(queue, []).append((f"{r.namespace}/{r.name}", float(r.gpus)))
    return out


def _hours(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min"


def _stats(history: pd.DataFrame) -> tuple[dict[tuple[str, str, str], float], dict[str, float]]:
    cells: dict[tuple[str, str, str], float] = {}
    pending: dict[str, float] = {}
    for row in history.itertuples(index=False):
        if not isinstance(row.value, float | int) or math.isnan(float(row.value)):
            continue
        if row.stat == "pending_median":
            pending[str(row.cluster_queue)] = float(row.value)
        else:
            cells[(str(row.cluster_queue), str(row.flavor), str(row.stat))] = float(row.value)
    return cells, pending


def _guarantees(policy: Policy, nominal: Mapping[Cell, float]) -> dict[Cell, int]:
    out: dict[Cell, int] = {}
    for tenant in policy.tenants:
        mine = sorted(c for c in nominal if c[0] in tenant.cluster_queues)
        if not mine:
            continue
        groups: dict[str | None, list[Cell]] = {}
        for c in mine:
            groups.setdefault(c[1] if c[1] in tenant.guaranteed_gpus_per_flavor else None, []).append(c)
        for flavor, members in groups.items():
            total = tenant.guaranteed_gpus_per_flavor[flavor] if flavor is not None else tenant.guaranteed_gpus
            out.update(_spread(total, members, nominal))
    return out


def _spread(total: int, members: Sequence[Cell], nominal: Mapping[Cell, float]) -> dict[Cell, int]:
    """``total`` over ``members`` in proportion to their quota (largest remainders), all to one if alone."""
    if total <= 0:
        return {}
    weights = [max(nominal[c], 0) for c in members]
    whole = sum(weights) or len(members)
    shares = [total * (w if sum(weights) else 1) / whole for w in weights]
    floors = [math.floor(s) for s in shares]
    order = sorted(range(len(members)), key=lambda i: shares[i] - floors[i], reverse=True)
    for i in order[: total - sum(floors)]:
        floors[i] += 1
    return {c: f for c, f in zip(members, floors) if f}


def _unknown_flavor_notes(policy: Policy, queues: set[str], flavors: set[str]) -> list[str]:
    """A ``guaranteed_gpus_per_flavor`` key no GPU quota in the cluster has is a typo the plan
    would otherwise ignore in silence (the tenant keeps only ``guaranteed_gpus``)."""
    notes = []
    for tenant in policy.tenants:
        if not queues & set(tenant.cluster_queues):
            continue
        for flavor in sorted(set(tenant.guaranteed_gpus_per_flavor) - flavors):
            notes.append(f"tenant {tenant.name!r}: guaranteed_gpus_per_flavor names flavor {flavor!r}, which no "
                         f"ClusterQueue has a GPU quota in (known: {', '.join(sorted(flavors))}); ignored")
    return notes


def _borrowing_capped(rows: pd.DataFrame) -> bool:
    """Whether some ClusterQueue of the cohort sets a borrowingLimit or lendingLimit: then nominal quota,
    not only borrowing, decides what a queue can reach, and reclaiming queues lend below their share."""
    columns = [c for c in ("borrowing_limit", "lending_limit") if c in rows.columns]
    return bool(columns) and bool(rows[columns].notna().to_numpy().any())


def cohort_demands(snapshot: Snapshot, history: pd.DataFrame, policy: Policy, *,
                   deadline_gpus: Mapping[Cell, int] | None = None,
                   recent_change: Mapping[Cell, int] | None = None,
                   moved_24h: Mapping[Cell, tuple[int, int]] | None = None,
                   gpu_resources: Sequence[str] = ("nvidia.com/gpu",),
                   cohorts: Sequence[str] = (), window_days: float | None = None) -> list[CohortDemand]:
    """One ``CohortDemand`` per cohort (only ``cohorts`` when given), sorted by name.

    ``moved_24h``: (queue, flavor) -> (GPUs gained, lost) by plans applied in the last 22 hours
    (``gpuaas.policy.MOVES_WINDOW``), which the night's steps and total cap have spent; ``window_days``: the
    window ``history`` was read over (the policy's ``usage_lookback_days`` when None)."""
    rb = policy.rebalance
    deadline_gpus = deadline_gpus or {}
    recent_change = recent_change or {}
    moved_24h = moved_24h or {}
    stats, pending_hist = _stats(history)
    quotas = snapshot.quotas
    if quotas.empty:
        return []
    gpu = quotas[quotas["resource"].isin(list(gpu_resources)) & quotas["cohort"].notna() & (quotas["cohort"] != "")]
    backlog = {str(r.name): r for r in snapshot.queues.itertuples(index=False)} if not snapshot.queues.empty else {}
    wanted = set(cohorts or rb.cohorts)
    everywhere = {(str(r.cluster_queue), str(r.flavor)): float(r.nominal) for r in gpu.itertuples(index=False)}
    guaranteed = _guarantees(policy, everywhere)
    tree = CohortTree.of(snapshot)
    unadmitted, unselected = _unadmitted(snapshot)
    out = []
    for cohort, rows in sorted(gpu.groupby("cohort"), key=lambda kv: str(kv[0])):
        if wanted and cohort not in wanted:
            continue
        if unplanned := not_whole(rows):  # no queue: nothing of it is planned, nor rounded to be
            seen_s = max(stats.get((str(q), str(f), "history_seconds"), 0.0)
                         for q, f in rows[["cluster_queue", "flavor"]].values)
            out.append(CohortDemand(str(cohort), [], limits_of(rb, window_days), seen_s, False, not_whole=unplanned))
            continue
        loop = next((said for q in rows["cluster_queue"].unique() if (said := tree.loop_words(str(q)))), None)
        if loop is not None:  # Kueue admits nothing under the loop: a plan there moves quota nobody can use
            out.append(CohortDemand(str(cohort), [], limits_of(rb, window_days), 0.0, False,
                                    not_whole=[f"{loop}: not planned"]))
            continue
        stopped = inactive_queues(rows)
        rows = rows[~rows["cluster_queue"].astype(str).isin(list(stopped))]
        lendable = lendable_gpus(rows)
        nominal: dict[Cell, int] = {}
        reserved: dict[Cell, float] = {}
        order: dict[str, list[str]] = {}
        reclaims: dict[str, bool] = {}
        for r in rows.itertuples(index=False):
            cell = (str(r.cluster_queue), str(r.flavor))
            nominal[cell] = nominal.get(cell, 0) + int(float(r.nominal))  # whole: ``not_whole`` said none is not
            reserved[cell] = reserved.get(cell, 0.0) + float(r.reserved or 0.0)
            reclaim = getattr(r, "reclaim_within_cohort", "Any")  # a frame without the column: as reclaiming
            reclaims[cell[0]] = isinstance(reclaim, str) and reclaim != "Never"
            flavors_of = order.setdefault(cell[0], [])
            if cell[1] not in flavors_of:
                flavors_of.append(cell[1])
        reach = reachable_gpus(rows, tree)
        never = _never_admissible(snapshot, reach, unadmitted)
        seen = [stats.get((q, f, "history_seconds"), 0.0) for q, f in nominal]
        history_s = max(seen, default=0.0)
        queues = []
        for queue, flavors in order.items():
            tenant = policy.tenant_for(None, queue)
            demand: dict[str, float] = {}
            evidence: dict[str, str] = {}
            b = backlog.get(queue)
            pending_now = float(getattr(b, "pending_gpus", 0.0) or 0.0) if b is not None else 0.0
            waited = float(getattr(b, "oldest_pending_seconds", 0.0) or 0.0) if b is not None else 0.0
            if math.isnan(waited):
                waited = 0.0
            ignored = sum(g for _, g in never.get(queue, []))
            elsewhere = unselected.get(queue, 0.0)  # in Kueue's pending history, not in the backlog
            pending = pending_demand(max(0.0, pending_hist.get(queue, 0.0) - ignored - elsewhere),
                                     max(0.0, pending_now - ignored), waited, rb)
            most_pending = max(pending, stats.get((queue, "", "pending_max"), 0.0) - ignored - elsewhere)
            busiest: dict[str, float] = {}
            for i, flavor in enumerate(flavors):
                cell = (queue, flavor)
                use = stats.get((queue, flavor, "usage_p"))
                res = stats.get((queue, flavor, "reservation_p"))
                seen_held = [v for v in (use, res) if v is not None]
                held = max(seen_held) if seen_held else reserved[cell]  # no history: what it holds now
                mine = pending if i == 0 else 0.0
                need = float(deadline_gpus.get(cell, 0))
                demand[flavor] = cell_demand(held, mine, need, reach.get(cell, float("inf")))
                busiest[flavor] = cell_demand(held, most_pending if i == 0 else 0.0, need, reach.get(cell, float("inf")))
                pct = f"p{rb.usage_percentile:g}"
                words = [f"{pct} use {use:g} of {nominal[cell]}" if use is not None
                         else f"use now {reserved[cell]:g} of {nominal[cell]} (no history)"]
                borrowed = stats.get((queue, flavor, "borrowed_p"), 0.0)
                if res is not None and res != use:
                    words.append(f"{pct} reserved {res:g}")
                if borrowed > 0:
                    words.append(f"{pct} borrowed {borrowed:g}")
                if i == 0 and pending_now - ignored > 0:
                    words.append(f"{pending_now - ignored:g} GPUs pending, oldest waited {_hours(waited)}")
                if i == 0 and ignored:
                    words.append(f"{ignored:g} pending GPUs never admissible, ignored")
                if i == 0 and elsewhere:
                    words.append(f"{elsewhere:g} pending GPUs from namespaces its namespaceSelector does not select, "
                                 "ignored")
                if demand[flavor] < max(held + mine, need) - 1e-9:
                    words.append(f"capped at the {reach[cell]:g} GPUs it can reach")
                if need:
                    words.append(f"deadlines need {need:g}")
                evidence[flavor] = ", ".join(words)
            queues.append(QueueDemand(
                name=queue, nominal={f: nominal[(queue, f)] for f in flavors}, demand=demand,
                guaranteed={f: guaranteed[(queue, f)] for f in flavors if (queue, f) in guaranteed},
                weight=tenant.weight if tenant else 1.0,
                recent_change={f: recent_change[(queue, f)] for f in flavors if recent_change.get((queue, f))},
                evidence=evidence, reclaims=reclaims[queue], busiest=busiest,
                moved_24h={f: moved_24h[(queue, f)] for f in flavors if (queue, f) in moved_24h},
                history_seconds={f: stats.get((queue, f, "history_seconds"), 0.0) for f in flavors},
                lendable={f: lendable[(queue, f)] for f in flavors if (queue, f) in lendable},
            ))
        limits = limits_of(rb, window_days)
        spent = sum(moved_24h.get(cell, (0, 0))[0] for cell in nominal)
        if spent:
            limits = replace(limits, moved_24h_gpus=spent)
        if _borrowing_capped(rows):
            limits = replace(limits, reclaiming_lends=True, reclaiming_keep_factor=0.0, reclaiming_keep_gpus=0)
        notes: list[str] = [f"{queue} is {why}: not planned" for queue, why in sorted(stopped.items())]
        notes += _unknown_flavor_notes(policy, {q for q, _ in nominal}, set(gpu["flavor"].astype(str)))
        for queue, items in sorted(never.items()):
            names = ", ".join(f"{name} ({gpus:g} GPUs)" for name, gpus in items)
            notes.append(f"{queue}: pending Workloads larger than anything the queue can ever be admitted "
                         f"({max(g for (q, _), g in reach.items() if q == queue):g} GPUs): {names}; not counted as demand")
        if spent:
            notes.append(f"{spent} GPUs of quota already moved in this cohort in the last {MOVES_WINDOW_WORDS}: at "
                         f"most {limits.total_left} more for now (max_total_moved_gpus={limits.max_total_moved_gpus}), "
                         "and each queue's step less what it already moved")
        if not history_s and limits.min_lend_history_s > 0:  # with min_history_days 0 it lends all the same
            notes.append(f"no quota history for any queue of cohort {cohort} (Kueue's kueue_cluster_queue_nominal_quota "
                         "has no samples in the window: Kueue exports it with metrics.enableClusterQueueResources: "
                         "true): planned from what the queues hold now, and nothing is lent below a share")
        limits, little = short_history(limits, history_s, rb, notes)
        out.append(CohortDemand(str(cohort), queues, limits, history_s, little, notes, dict(reserved)))
    return out


def short_history(limits: QuotaLimits, history_s: float, rb: RebalancePolicy,
                  notes: list[str]) -> tuple[QuotaLimits, bool]:
    """The limits for a cohort with ``history_s`` of history, and whether that is too little to lend on
    (``limits.min_lend_history_s``, ``history_needed``): then at most one step (``max_step_gpus``) moves in all,
    and ``notes`` gets a sentence saying so."""
    if history_s >= limits.min_lend_history_s:
        return limits, False
    if limits.max_step_gpus < limits.max_total_moved_gpus:
        limits = replace(limits, max_total_moved_gpus=limits.max_step_gpus, total_cap=(
            f"the short history's cap of {limits.max_step_gpus} GPUs (max_step_gpus, with less than "
            f"min_history_days={rb.min_history_days:g} of history)"))
    notes.append(f"only {_hours(history_s)} of history (less than min_history_days={rb.min_history_days:g}): "
                 f"planned from what there is, at most {counted(limits.max_total_moved_gpus, 'GPU')} moved in all")
    return limits, True


def deadline_gpus_per_queue(pools: Sequence[PoolPlan], snapshot: Snapshot) -> dict[Cell, int]:
    """(queue, flavor) -> the fewest GPUs on which the queue's own deadline jobs all meet their deadlines.

    The deadline planner's minimum (``plan_deadlines`` from the largest job's GPUs: those plus its extra GPUs) for the
    queue's deadline jobs of the pool, running ones included; jobs no capacity can save count
    for nothing. Not the peak of one schedule, which may run in parallel what could run in turn.
    """
    return deadline_gpus_of_problems([pool.problem for pool in pools], snapshot)


def deadline_gpus_of_problems(problems: Sequence[PoolProblem], snapshot: Snapshot) -> dict[Cell, int]:
    """``deadline_gpus_per_queue`` from the pools' problems alone: it reads no pool's plan, so a replay that
    plans no pool gets the flow's answer from ``deadline_problems``."""
    wls = snapshot.workloads
    if wls.empty or not problems:
        return {}
    queue_of = {f"{r.namespace}/{r.name}": str(r.cluster_queue) for r in wls.itertuples(index=False)}
    out: dict[Cell, int] = {}
    for problem in problems:
        mine: dict[str, list[DeadlineJob]] = {}
        for job in problem.jobs:
            queue = queue_of.get(job.name)
            if queue is not None and job.deadline is not None:
                mine.setdefault(queue, []).append(job)
        for queue, jobs in mine.items():
            resource = jobs[0].resource
            # No fewer than the largest job, nor than what the running ones hold now: the planner's capacity to start from.
            base = max(max(j.gpus for j in jobs), sum(j.gpus for j in jobs if j.running_for is not None))
            need = base + plan_deadlines({resource: base}, jobs, minute=60.0).extra_gpus.get(resource, 0)
            cell = (queue, problem.flavor)
            out[cell] = max(out.get(cell, 0), need)
    return out
