"""Rebalance report builders: rows per queue and flavor, the markdown summary, the Pushgateway metrics.

Pure: a ``gpuaas.operations.rebalance.CohortOutcome`` per cohort (its demand, plan or planning
error, and what applying did) goes in. The flow publishes these as artifacts, the CLI prints the
same rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gpuaas.models import Outcome
from gpuaas.phrases import figure
from gpuaas.policy import FreezeOn
from gpuaas.pushgateway import MetricFamily
from reports._format import counted, frozen_lead, misnamed_lead, said_frozen

if TYPE_CHECKING:  # annotations only: rendering needs no cluster client
    from gpuaas.operations.rebalance import CohortOutcome

__all__ = ["NAMED_BEFORE", "change_rows", "first_line", "outcome_dicts", "plan_rows", "reason_lines", "rebalance_markdown",
           "rebalance_metrics"]


NAMED_BEFORE = "(named before)"
"""``first_line``'s ``degraded`` where the line is led by what failed already (``with_failures``): said once."""

def change_rows(outcomes: Sequence[CohortOutcome]) -> list[dict[str, Any]]:
    rows = []
    for o in outcomes:
        if o.plan is None:
            continue
        demand = {(q.name, f): d for q in o.demand.queues for f, d in q.demand.items()}
        for c in o.plan.changes:
            d = demand.get((c.queue, c.flavor), 0.0)
            rows.append({"cohort": o.cohort, "queue": c.queue, "flavor": c.flavor, "before": c.before,
                         "after": c.after, "change": f"{c.delta:+d}" if c.delta else "", "demand": round(d, 2),
                         "shortfall before": round(max(0.0, d - c.before), 2),
                         "shortfall after": round(max(0.0, d - c.after), 2), "reason": c.reason})
    return rows


def plan_rows(outcomes: Sequence[CohortOutcome]) -> list[dict[str, Any]]:
    """The people form: the plan table artifact, short cells only, so that it fits a 1600-pixel screen.

    The Prefect UI never wraps a table cell, so a sentence in one widens the table past the screen; each
    queue's reason is in the summary's list under its cohort's table (``reason_lines``). No cell is a bare
    "-": the UI renders that as a bullet.
    """
    return [{"cohort": r["cohort"], "queue": r["queue"], "flavor": r["flavor"],
             "quota": f"{r['before']} -> {r['after']}", "change": r["change"], "demand": f"{r['demand']:g}",
             "shortfall": f"{r['shortfall before']:g} -> {r['shortfall after']:g}"} for r in change_rows(outcomes)]


def reason_lines(outcome: CohortOutcome) -> list[str]:
    """One markdown bullet per queue and flavor of the cohort's plan: why it changed or did not (the words wrap)."""
    lines = []
    for r in change_rows([outcome]):
        head, _, why = str(r["reason"]).partition(": ")
        lines.append(f"- **{head}**: {why}" if why else f"- {head}")
    return lines


def outcome_dicts(outcomes: Sequence[CohortOutcome]) -> list[dict[str, Any]]:
    out = []
    for o in outcomes:
        out.append({
            "cohort": o.cohort, "plan_id": o.plan_id, "result": o.result, "message": o.message, "error": o.error,
            "history_hours": round(o.demand.history_seconds / 3600, 2), "little_history": o.demand.little_history,
            "notes": o.demand.notes, "flags": o.flags,
            "moved_gpus": o.plan.moved_gpus if o.plan else 0,
            "weighted_shortfall_before": o.plan.weighted_shortfall_before if o.plan else None,
            "weighted_shortfall": o.plan.weighted_shortfall if o.plan else None,
            "solve_seconds": round(o.plan.solve_seconds, 4) if o.plan else None,
            "changes": [r for r in change_rows([o])],
        })
    return out


def first_line(outcomes: Sequence[CohortOutcome], mode: str, degraded: str | None,
               frozen: FreezeOn | None = None, *, unread: bool = False, misnamed: Sequence[str] = (),
               refused: bool = False) -> str:
    """What the run did in one sentence: GPUs of quota moved (or that would move), in how many cohorts, and why not;
    then, where every queue of a cohort wants at least its share, that only more GPUs can meet the demand there.
    Led by ``misnamed_lead`` (``refused``: it kept this apply run from writing): a tenant's ClusterQueue the
    cluster lacks stops every apply, so a dry-run's line then offers no ``--apply`` either."""
    lead = misnamed_lead(misnamed, "Nothing applied" if refused else None)
    if unread and not outcomes:  # the Kubernetes API failed: no quota was read, not none there
        return lead + said_frozen("Nothing rebalanced: no ClusterQueue could be read.", frozen)
    full = [f"{o.cohort} ({', '.join(o.plan.overloaded)})" for o in outcomes if o.plan is not None and o.plan.overloaded]
    line = lead + said_frozen(_moves(outcomes, mode, degraded, frozen, offer_apply=not misnamed), frozen)
    if not full:
        return line
    return (f"{line} In {', '.join(full)} every queue wants at least its share: "
            "no quota move can meet it there, more GPUs can (the deadline plan's gpuaas_extra_gpus_needed says how "
            "many).")


def _moves(outcomes: Sequence[CohortOutcome], mode: str, degraded: str | None, frozen: FreezeOn | None, *,
           offer_apply: bool = True) -> str:
    if not outcomes:
        return "Nothing to rebalance: no cohort with GPU quota."
    moving = [o for o in outcomes if o.plan is not None and o.plan.moved_gpus]
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.result] = counts.get(o.result, 0) + 1
    results = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    cohorts = f"{_some_of(len(moving), len(outcomes))} ({results})"
    if not moving:
        kept = ("the plan of the 1 cohort keeps its" if len(outcomes) == 1
                else f"the plans of all {len(outcomes)} cohorts keep their")
        return f"No quota moves: {kept} quotas ({results})."
    gpus = sum(o.plan.moved_gpus for o in moving if o.plan is not None)
    if degraded:
        why = "" if degraded == NAMED_BEFORE else f" ({degraded})"
        return f"Degraded snapshot{why}: {counted(gpus, 'GPU')} of quota planned in {cohorts}, none applied."
    if mode == "apply":
        moved = sum(o.plan.moved_gpus for o in moving if o.plan is not None and o.result == Outcome.applied)
        applied = [str(o.plan_id) for o in moving if o.result == Outcome.applied and o.plan_id]
        return (f"{figure(moved)} of {counted(gpus, 'planned GPU')} of quota moved in {cohorts}"
                + (f"; to reverse: gpuaas undo {' '.join(applied)}." if applied else "."))
    return (f"{frozen_lead(frozen)}{counted(gpus, 'GPU')} of quota would move in {cohorts}; nothing was changed"
            + ("; to apply: gpuaas rebalance --apply." if offer_apply and not frozen else "."))


def _some_of(part: int, total: int) -> str:
    """``1 of 3 cohorts``; ``1 cohort`` where it is the only one (not "1 of 1 cohorts")."""
    return counted(total, "cohort") if part == total == 1 else f"{part} of {total} cohorts"


def rebalance_markdown(outcomes: Sequence[CohortOutcome], mode: str, deadline_extra: dict[str, dict[str, int]],
                       degraded: str | None, frozen: FreezeOn | None = None, *, misnamed: Sequence[str] = (),
                       refused: bool = False) -> str:
    """``deadline_extra``: cohort -> flavor -> extra GPUs the deadline plan asks for; ``frozen``: the change freeze
    that held the run back to dry-run; ``misnamed`` and ``refused``: as ``first_line`` takes them."""
    lines = [first_line(outcomes, mode, degraded, frozen, misnamed=misnamed, refused=refused), "",
             f"# gpuaas rebalance ({mode})", ""]
    if degraded:
        lines += [f"**Warning:** degraded snapshot ({degraded}): plans are shown, none is applied", ""]
    if misnamed:
        said = "nothing was applied" if refused else "an apply run would write nothing"
        lines += [f"**Warning:** {line} ({said})" for line in misnamed]
        lines.append("")
    if not outcomes:
        lines.append("No cohort with GPU quota to rebalance.")
    for o in outcomes:
        lines.append(f"## cohort {o.cohort}: {o.result}" + (f" (plan #{o.plan_id})" if o.plan_id else ""))
        if o.error:
            lines.append(f"- no plan: {o.error}")
        if o.plan:
            lines.append(f"- **{counted(o.plan.moved_gpus, 'GPU')}** moved; weighted shortfall "
                         f"**{o.plan.weighted_shortfall_before:g} -> {o.plan.weighted_shortfall:g}** "
                         f"(solved in {o.plan.solve_seconds:.2f} s)")
        lines.append(f"- history: {o.demand.history_seconds / 3600:.1f} h")
        lines += [f"- {note}" for note in o.demand.notes] + [f"- **Warning:** {flag}" for flag in o.flags]
        extra = deadline_extra.get(o.cohort, {})
        if extra:
            lines.append("- deadline plan: " + ", ".join(f"{f} needs {counted(n, 'extra GPU')}" for f, n in sorted(extra.items()))
                         + " to meet every deadline (quota moves cannot create GPUs)")
        else:
            lines.append("- deadline plan: every planned deadline holds on current GPUs")
        if o.message:
            lines.append(f"- {o.message}")
        lines.append("")
        rows = plan_rows([o])
        if rows:  # short cells (a table cell never wraps), the reasons as a list under the table
            lines += ["| queue | flavor | quota | change | demand | shortfall |", "|---|---|---|---|---|---|"]
            lines += [f"| {r['queue']} | {r['flavor']} | {r['quota']} | {r['change']} | {r['demand']} | {r['shortfall']} |"
                      for r in rows]
            lines += ["", "Why:", "", *reason_lines(o)]
        lines.append("")
    return "\n".join(lines) + "\n"


def rebalance_metrics(outcomes: Sequence[CohortOutcome]) -> list[MetricFamily]:
    cohort = ("cohort",)
    cell = ("cohort", "cluster_queue", "flavor")
    moved = MetricFamily("gpuaas_rebalance_moved_gpus", "GPUs of nominal quota the plan moves", cohort)
    short = MetricFamily("gpuaas_rebalance_weighted_shortfall", "Weighted GPU shortfall after the plan", cohort)
    before = MetricFamily("gpuaas_rebalance_weighted_shortfall_before", "Weighted GPU shortfall before it", cohort)
    applied = MetricFamily("gpuaas_rebalance_applied", "1 when the plan was applied this run", cohort)
    quota = MetricFamily("gpuaas_rebalance_planned_quota_gpus", "Nominal GPU quota after the plan", cell)
    demand = MetricFamily("gpuaas_rebalance_demand_gpus", "GPU demand the plan served", cell)
    for o in outcomes:
        applied.add(1.0 if o.result == Outcome.applied else 0.0, o.cohort)
        if o.plan is None:
            continue
        moved.add(o.plan.moved_gpus, o.cohort)
        short.add(o.plan.weighted_shortfall, o.cohort)
        before.add(o.plan.weighted_shortfall_before, o.cohort)
        for c in o.plan.changes:
            quota.add(c.after, o.cohort, c.queue, c.flavor)
        for q in o.demand.queues:
            for f, d in q.demand.items():
                demand.add(d, o.cohort, q.name, f)
    return [moved, short, before, applied, quota, demand]
