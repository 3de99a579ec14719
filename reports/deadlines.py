"""The deadline plan for scripts (JSON), people (rows) and the Pushgateway (metrics). Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpuaas.actions.deadline_holds import NudgeResult
from gpuaas.models import Outcome
from gpuaas.permissions import ROLES, bind_command
from gpuaas.phrases import counted, duration
from gpuaas.policies.deadlines import DeadlineJob, DeadlinePlan, Inexact, Nudge, PoolPlan, ScheduledJob
from gpuaas.policies.deadlines.stranded import MissingQueuePool, NoPlace
from gpuaas.pushgateway import MetricFamily
from reports._format import brief

__all__ = ["deadline_metrics", "deadlines_headline", "failures_sentence", "kueue_alone", "kueue_alone_sentence",
           "nudge_dicts", "object_names", "on_gpus", "plan_dict", "plan_title", "pool_rows", "plan_rows", "pool_dicts", "verdict_sentence"]


def _num(value: float | None) -> float | int | None:
    """Whole numbers print as ``60``, not ``60.0``; the rest keep 3 decimals."""
    if value is None:
        return None
    rounded = round(value, 3)
    return int(rounded) if rounded == int(rounded) else rounded


_UNKNOWN = "unknown"
"""A time the plan does not know (the end of a running job with no run time, the start of work waiting for its
GPUs): said as such, never as a time."""


def _unknown_times(status: str, start: float | None, end: float | None) -> str:
    """``running, end unknown`` / ``best effort, start unknown``: the status says what the table's times cannot."""
    return f"{status}, start {_UNKNOWN}" if start is None else f"{status}, end {_UNKNOWN}" if end is None else status


def _status(job: ScheduledJob, plan: DeadlinePlan) -> str:
    status = _missed(job.name, plan) or ("best effort" if job.deadline is None else "at risk now"
                                         if job.name in plan.at_risk else "running" if job.running else "holds")
    status = _unknown_times(status, job.start, job.end)
    return f"{status}, past its estimate" if job.past_estimate else status


def _missed(name: str, plan: DeadlinePlan) -> str | None:
    """``missed by 30``: how late it ends at the earliest; ``None`` when its deadline is not missed."""
    if name not in plan.missed:
        return None
    late = plan.missed_by.get(name)
    return "missed" if late is None else f"missed by {_num(late)}"


def on_gpus(capacity: int, extra: int) -> str:
    """The GPUs a schedule runs on: ``6 GPUs (4 + 2 extra)`` where it needs extra ones, else ``4 GPUs``."""
    return f"{capacity + extra} GPUs ({capacity} + {extra} extra)" if extra else f"{capacity} GPUs"


def plan_title(capacity: Mapping[str, int], plan: DeadlinePlan) -> str:
    """The file plan's table title, which says the GPUs its schedule runs on: ``capacity`` plus the extra GPUs
    (``DeadlinePlan.schedule`` fits both), since a schedule that needs extra GPUs starts more work at once
    than there are GPUs today. One resource: ``Deadline plan on 6 GPUs (4 + 2 extra), minutes from now``;
    several: each named (``on a100: 6 GPUs (4 + 2 extra); h100: 8 GPUs``)."""
    parts = [(r, on_gpus(cap, plan.extra_gpus.get(r, 0))) for r, cap in capacity.items()]
    where = parts[0][1] if len(parts) == 1 else "; ".join(f"{r}: {gpus}" for r, gpus in parts)
    return f"Deadline plan on {where}, minutes from now"


def plan_dict(plan: DeadlinePlan, capacity: Mapping[str, int] | None = None) -> dict[str, Any]:
    """``gpuaas plan deadlines --format json``: the documented keys, then ``missed_by`` (how late each missed job
    ends at the earliest), ``inexact``, ``at_risk`` and ``messages``. A schedule's ``end`` is ``null`` for a
    running job with no run time, and ``start`` and ``end`` for work that waits for its GPUs: unknown, not 0.
    With the problem's ``capacity`` (a file's plan), also ``capacity`` and ``schedule_gpus``, the GPUs per
    resource the schedule runs on: ``capacity`` plus ``extra_gpus``."""
    where = {} if capacity is None else {
        "capacity": dict(capacity),
        "schedule_gpus": {r: cap + plan.extra_gpus.get(r, 0) for r, cap in capacity.items()}}
    return {
        "feasible": plan.feasible,
        "extra_gpus": dict(plan.extra_gpus),
        **where,
        "schedule": [
            {"name": s.name, "start": _num(s.start), "end": _num(s.end), "resource": s.resource, "gpus": s.gpus,
             "deadline": _num(s.deadline), "running": s.running, "past_estimate": s.past_estimate}
            for s in plan.schedule
        ],
        "missed": list(plan.missed),
        "missed_by": {name: _num(late) for name, late in plan.missed_by.items()},
        "exact": plan.exact,
        "inexact": [r.value for r in plan.inexact],
        "at_risk": list(plan.at_risk),
        "messages": list(plan.messages),
    }


def plan_rows(plan: DeadlinePlan, jobs: Sequence[DeadlineJob]) -> list[list[Any]]:
    """One row per job of ``jobs``: name, resource, GPUs, start, end, deadline, status.

    The scheduled ones in start order, then those that can never start in time (no start, no end):
    a job left out of the table would read as one the plan forgot.
    """
    rows = [[s.name, s.resource, s.gpus, _UNKNOWN if s.start is None else _num(s.start),
             _UNKNOWN if s.end is None else _num(s.end), "-" if s.deadline is None else _num(s.deadline),
             _status(s, plan)] for s in plan.schedule]
    scheduled = {s.name for s in plan.schedule}
    rows += [[j.name, j.resource, j.gpus, "-", "-", "-" if j.deadline is None else _num(j.deadline),
              _missed(j.name, plan) or "not planned"] for j in jobs if j.name not in scheduled]
    return rows


def pool_dicts(pools: Sequence[PoolPlan]) -> list[dict[str, Any]]:
    """``gpuaas plan deadlines --from-cluster --format json``: the same answer per pool, seconds from now.
    ``missing_cluster_queue``: the ClusterQueue a pool's work is queued to and which does not exist (its jobs all
    missed), else null."""
    return [{"cohort": p.problem.cohort, "flavor": p.problem.flavor, "capacity_gpus": p.problem.capacity,
             "missing_cluster_queue": _missing_queue(p),
             **plan_dict(p.plan), "missed": list(p.missed), "unscheduled": _unscheduled(p),
             "notes": list(p.problem.notes), "plan_on_time": None if p.versus_kueue is None else p.versus_kueue[0],
             "kueue_order_on_time": None if p.versus_kueue is None else p.versus_kueue[1]} for p in pools]


def _missing_queue(pool: PoolPlan) -> str | None:
    return pool.problem.cluster_queue if isinstance(pool.problem, MissingQueuePool) else None


def kueue_alone_sentence(pool: dict[str, Any]) -> str | None:
    """Under a pool's table: what Kueue's own order would meet; None for a pool without deadlines, or of a
    ClusterQueue that does not exist (Kueue admits none of it)."""
    if not pool_deadlines(pool) or pool.get("missing_cluster_queue"):
        return None
    if pool.get("kueue_order_on_time") is None:
        return "Kueue's own order could not be played: a pending Workload's place in the queue is unknown."
    return f"Kueue's own order, on the same GPUs and estimates, would meet {kueue_alone(pool)} deadlines."


def kueue_alone(pool: dict[str, Any]) -> str:
    """``3 of 5`` (the deadlines Kueue's own order would meet on the same GPUs and estimates, of the pool's), or
    why it was not played: what the plan adds over Kueue untouched."""
    deadlines = pool_deadlines(pool)
    if not deadlines:
        return "no deadline in the pool"
    if pool.get("kueue_order_on_time") is None:
        return "not played (a pending Workload's place in the queue is unknown)"
    return f"{pool['kueue_order_on_time']} of {deadlines}"


def pool_deadlines(pool: dict[str, Any]) -> int:
    """The jobs of a pool (``pool_dicts``) that have a deadline, scheduled or not: what a verdict counts."""
    return sum(j["deadline"] is not None for j in (*pool["schedule"], *pool["unscheduled"]))


def _unscheduled(pool: PoolPlan) -> list[dict[str, Any]]:
    """The pool's missed jobs that have no place in its schedule, so that its table can still show each:
    one that can never start in time (how late it ends at the earliest), or that Kueue can never admit
    (``no_place``: larger than the pool, its ClusterQueue does not exist or does not admit from its namespace;
    null for the others)."""
    scheduled = {s.name for s in pool.plan.schedule}
    never = {j.name for j in pool.problem.too_big}
    pool_why = NoPlace.no_cluster_queue if isinstance(pool.problem, MissingQueuePool) else NoPlace.larger_than_pool

    def why(name: str) -> NoPlace:
        return NoPlace.namespace_not_selected if name in pool.problem.unselected else pool_why

    jobs = {j.name: j for j in (*pool.problem.jobs, *pool.problem.too_big)}
    return [{"name": name, "gpus": jobs[name].gpus, "deadline": _num(jobs[name].deadline),
             "missed_by": _num(pool.plan.missed_by.get(name)),
             "larger_than_pool": name in never and why(name) is NoPlace.larger_than_pool,
             "no_place": why(name).value if name in never else None}
            for name in pool.missed if name not in scheduled and name in jobs]


def _clock(seconds: float | None) -> str:
    """Seconds from now as the cluster's table shows them: ``+50m``, ``-5m`` (past), ``-`` when there is none.
    Whole minutes, as ``duration`` counts them: a job that started 20 s ago starts ``+0m``, never ``-0m``."""
    if seconds is None:
        return "-"
    return ("-" if seconds <= -60 else "+") + duration(abs(seconds))


def _pool_missed(name: str, pool: dict[str, Any]) -> str:
    """``missed by 45m`` (how late it ends at the earliest), or why it has no place in the pool at all: ``missed:
    larger than the pool``, ``missed: ClusterQueue ghost-cq does not exist``."""
    why = next((u.get("no_place") or ("larger than the pool" if u["larger_than_pool"] else None)
                for u in pool["unscheduled"] if u["name"] == name), None)
    if why == NoPlace.no_cluster_queue and pool.get("missing_cluster_queue"):
        return f"missed: ClusterQueue {pool['missing_cluster_queue']} does not exist"
    if why is not None:
        return f"missed: {why}"
    late = pool["missed_by"].get(name)
    return "missed" if late is None else f"missed by {_clock(late).lstrip('+')}"


def _pool_status(job: dict[str, Any], pool: dict[str, Any]) -> str:
    name = str(job["name"])
    status = (_pool_missed(name, pool) if name in pool["missed"] else "at risk now" if name in pool["at_risk"]
              else "running" if job["running"] else "holds" if job["deadline"] is not None else "best effort")
    status = _unknown_times(status, job["start"], job["end"])
    return f"{status}, past its estimate" if job.get("past_estimate") else status


def pool_rows(pool: dict[str, Any], names: dict[str, str]) -> list[list[Any]]:
    """A pool of ``pool_dicts`` as ``plan deadlines --from-cluster`` tables it: object, Workload, GPUs, start,
    end, deadline, status; the scheduled jobs in start order, then each missed job with no place in the
    schedule (no start, no end), so that every job with a deadline in the pool has its row."""
    rows = [[names.get(s["name"], s["name"]), s["name"], s["gpus"], _UNKNOWN if s["start"] is None else _clock(s["start"]),
             _UNKNOWN if s["end"] is None else _clock(s["end"]), _clock(s["deadline"]), _pool_status(s, pool)]
            for s in pool["schedule"]]
    return rows + [[names.get(u["name"], u["name"]), u["name"], u["gpus"], "-", "-", _clock(u["deadline"]),
                    _pool_missed(u["name"], pool)] for u in pool["unscheduled"]]


def nudge_dicts(results: Iterable[NudgeResult]) -> list[dict[str, Any]]:
    """The ``deadlines`` flow's ``released``, ``nudges`` and ``undo``: one row per nudge, its ``audit_id`` what undo takes."""
    return [{**_nudge_dict(r.nudge, r.result, r.reason), "audit_id": r.audit_id} for r in results]


def would_dicts(nudges: Iterable[Nudge]) -> list[dict[str, Any]]:
    """A plan's ``would``: what a run in apply mode would write, one row per nudge, no audit row behind it."""
    return [_nudge_dict(n, n.outcome, n.reason) for n in nudges]


def _nudge_dict(n: Nudge, result: str, reason: str) -> dict[str, Any]:
    return {"action": n.action, "workload": n.ref, "result": result, "reason": reason,
            "release_at": n.release_at.isoformat() if n.release_at else None}


def deadline_metrics(pools: Sequence[PoolPlan]) -> list[MetricFamily]:
    """The scale-up signal: extra GPUs that make every holdable deadline hold, per cohort and flavor.

    ``gpuaas_deadline_capacity_gpus`` is the capacity the plan used, so that a node-pool scaler can
    ask for capacity + extra without knowing the quotas (``deployments/keda/scaledobject-deadlines.yaml``).
    """
    labels = ("cohort", "flavor")
    extra = MetricFamily("gpuaas_extra_gpus_needed", "Fewest extra GPUs that make every holdable deadline hold",
                         labels)
    risk = MetricFamily("gpuaas_deadlines_at_risk", "Deadlines that do not hold on current GPUs (incl. missed)",
                        labels)
    cap = MetricFamily("gpuaas_deadline_capacity_gpus", "GPUs the deadline plan had (nominal quota of the pool)",
                       labels)
    for p in pools:
        key = (p.problem.cohort, p.problem.flavor)
        extra.add(p.plan.extra_gpus.get(p.problem.flavor, 0), *key)
        risk.add(p.at_risk_count, *key)
        cap.add(p.problem.capacity, *key)
    return [extra, risk, cap]


def verdict_sentence(extra: dict[str, int], at_risk: int, missed: int, inexact: Iterable[Inexact | str],
                     deadlines: int | None = None) -> str:
    """The plan's answer as a sentence: ``All 6 deadlines hold on current GPUs (exact plan).``

    ``inexact``: why the plan is not proven (none: it is), ``Inexact`` or its value as in ``plan_dict``;
    each reason is named, since each calls for a different remedy. ``deadlines``: how many jobs have one,
    where the caller knows, so that "all hold" says of how many.
    """
    why = {Inexact(r) for r in inexact}
    how = f"heuristic plan: {'; '.join(r.words for r in Inexact if r in why)}" if why else "exact plan"
    needed = ", ".join(f"{n} {r}" for r, n in extra.items() if n)
    if not needed and not at_risk and not missed:
        if deadlines == 0:
            return f"No job has a deadline: nothing can be late ({how})."
        held = {None: "Every deadline holds", 1: "The one deadline holds"}.get(deadlines,
                                                                              f"All {deadlines} deadlines hold")
        return f"{held} on current GPUs ({how})."
    parts = [f"{n} deadline{'' if n == 1 else 's'} {what}" for n, what in ((at_risk, "at risk"), (missed, "missed")) if n]
    risk = " and ".join(parts) + ". " if parts else ""
    fix = (f"Extra GPUs needed: {needed}; then every holdable deadline holds" if needed
           else "No extra GPUs would save the rest")
    return f"{risk[0].upper() + risk[1:] if risk else ''}{fix} ({how})."


def object_names(workloads: Any) -> dict[str, str]:
    """``namespace/workload`` -> the object people name (``RayCluster team-a/train``), from a snapshot's workloads."""
    names: dict[str, str] = {}
    for wl in workloads.itertuples(index=False):
        owner = wl.owner_name if isinstance(wl.owner_name, str) and wl.owner_name else None
        names[f"{wl.namespace}/{wl.name}"] = f"{wl.owner_kind} {wl.namespace}/{owner}" if owner else \
            f"Workload {wl.namespace}/{wl.name}"
    return names


def deadlines_headline(pools: Sequence[dict[str, Any]], *, unread: bool = False) -> str:
    """The run in one sentence over every pool: what holds, what is at risk, the extra GPUs; ``unread`` when the
    Kubernetes API failed, so that no pool means none could be read, not none there."""
    stranded = sum(len(p["unscheduled"]) for p in pools if p.get("missing_cluster_queue"))
    planned = [p for p in pools if not p.get("missing_cluster_queue")]
    if not pools:
        return ("Nothing planned: no ClusterQueue could be read." if unread
                else "Nothing to plan: no ClusterQueue with GPU quota.")
    at_risk = sum(len(p["at_risk"]) for p in pools)
    missed = sum(len(p["missed"]) for p in pools)
    extra: dict[str, int] = {}
    for p in pools:
        for flavor, n in p["extra_gpus"].items():
            extra[flavor] = extra.get(flavor, 0) + int(n)
    lost = (f"; {counted(stranded, 'Workload')} with a deadline queued to a ClusterQueue that does not exist"
            if stranded else "")
    return (f"{len(planned)} pool{'' if len(planned) == 1 else 's'} planned{lost}. "
            + verdict_sentence(extra, at_risk, missed, [r for p in pools for r in p["inexact"]],
                               deadlines=sum(pool_deadlines(p) for p in pools)))


def nudges_sentence(nudges: Sequence[dict[str, Any]], released: Sequence[dict[str, Any]], mode: str) -> str:
    """`` 3 holds and 1 demotion written; 2 released.`` (`` would be written`` in dry-run): what the deadlines flow
    did to steer Kueue, after what the plan says; empty when it did nothing."""
    done = {"apply": ("applied",), "dry-run": ("planned",)}.get(mode, ("applied",))
    holds = sum(1 for n in nudges if n["action"] == "hold" and n["result"] in done)
    demoted = sum(1 for n in nudges if n["action"] == "demote" and n["result"] in done)
    freed = sum(1 for n in released if n["result"] == "released")
    parts = []
    if holds or demoted:
        what = " and ".join(p for p in (f"{holds} hold{'' if holds == 1 else 's'}" if holds else "",
                                        f"{demoted} demotion{'' if demoted == 1 else 's'}" if demoted else "") if p)
        parts.append(f"{what} {'written' if mode == 'apply' else 'would be written (dry-run)'}")
    if freed:
        parts.append(f"{freed} released")
    return f" {'; '.join(parts)}." if parts else ""


def failures_sentence(nudges: Sequence[dict[str, Any]], released: Sequence[dict[str, Any]]) -> str:
    """`` 2 failed: patching Workload team-a/w: 403: …, bind gpuaas-deadlines (kubectl apply -f …).``: the holds,
    demotions and releases the cluster refused, the first one's reason and the role to bind where it refused a
    permission, then those whose answer was lost and not read back (``unknown``); empty when none. What ends the
    run Failed, so that the red run's message says why."""
    done = [*released, *nudges]
    failed = [n for n in done if n["result"] == Outcome.failed]
    unknown = sum(n["result"] == Outcome.unknown for n in done)
    parts = []
    if failed:
        hint = f", {bind_command(ROLES['deadlines'])}" if any("403" in n["reason"] for n in failed) else ""
        parts.append(f"{len(failed)} failed: {brief(failed[0]['reason'])}{hint}")
    if unknown:
        parts.append(f"{unknown} unknown (the write's answer was lost and the read-back failed: the next run reads "
                     f"{'the Workload' if unknown == 1 else 'the Workloads'} again)")
    return f" {'; '.join(parts)}." if parts else ""
