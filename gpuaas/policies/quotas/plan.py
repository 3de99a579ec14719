"""The quota planner: new nominal GPU quota per ClusterQueue and flavor, solved as a MILP.

Pure: queues (their nominal quota, demand, guarantees, weights and recent net change) and the
limits go in, a plan comes out. Nothing here reads the cluster or the clock.

Why a MILP and not a greedy transfer: the constraints interact (a per-flavor total that must be
conserved, guarantees, steps, one cap on all moves, a minimum move size, no reversal), and the
objective is lexicographic, so a greedy rule is either wrong at the edges or as long as the model.
HiGHS (``scipy.optimize.milp``) proves the optimum in well under a second for hundreds of queues.

The model, per cell (queue ``i``, flavor ``f``) with ``b`` the current nominal quota:

* ``n`` integer new quota, ``n - b = inc - dec`` with ``inc, dec >= 0``;
* the cohort's total per flavor is conserved: ``sum_i n = sum_i b``;
* steps: ``inc, dec <= step`` with ``step = min(max_step_gpus, max(min_step_gpus,
  floor(max(b, guaranteed) * max_step_percent / 100)))``, less what the queue already gained (or
  lost) by plans applied in the last 22 hours (``gpuaas.policy.MOVES_WINDOW``): the step is a
  night's, however many runs there are. The absolute minimum is what lets a queue at 0 or 1 GPU
  gain at all: a step that is only a share of the quota stays 0 there, and a team shrunk during a
  quiet week would be held down for good. Back to its weighted share the
  step is no limit (``share_steps``): lent quota returns in one plan;
* guarantees: a queue at or above its guarantee never goes below it; a queue below it is raised
  as far as tonight's limits allow (the gap is minimised first, see ``_quota_milp``), the rest the
  following nights, and the rest of the cohort is planned meanwhile;
* a queue that cannot reclaim what it lends (``QueueDemand.reclaims``) keeps, where the cohort is
  full (``full_flavors``), ``no_reclaim_keep_factor`` times its busiest demand, up to its share
  (``keeps_share``), and everywhere ``no_reclaim_keep_gpus`` of its share;
* a queue that can reclaim lends nothing below its share unless ``reclaiming_lends``; when it lends, it
  keeps the same way ``reclaiming_keep_factor`` times its busiest and ``reclaiming_keep_gpus``: what it lends
  it gets back only at the next plan, as quota moved away is quota it cannot preempt back;
* a queue never gives more than ``QueueDemand.lendable`` (what its ClusterQueue's ``lendingLimit`` lets it
  lend): the rest, ``nominalQuota - lendingLimit``, its owners keep from every other queue;
* a queue with less of its own history than ``min_lend_history_s`` lends nothing below its share: a
  quiet day is no evidence of a quiet week, and a queue created today has not started its work yet;
* all moves together: ``sum inc <= max_total_moved_gpus`` less what the cohort's plans moved in the
  last 22 hours;
* hysteresis: a change is zero or at least ``hysteresis_gpus``;
* no reversal: a queue whose net change of the last ``no_reversal_days`` is positive loses that
  flavor only down to its demand (or its share, if lower), one whose change is negative gains it
  only up to its demand. Moving back toward the demand is recovery, not flapping; past it would be.

The objective, lexicographic: the smallest guarantee gap; then the smallest shortfall cost, a
convex piecewise-linear cost of each queue's shortfall ratio times its weight (``segment_cost``),
in two tiers: demand within the queue's weighted share of the cohort first, the rest after. So
scarce GPUs are shared by weight when every queue is short, and a queue that asks for the whole
cohort cannot take a queue's share while that queue uses it; then the fewest GPUs moved, which
is what stops flapping (when demand is met as well as it can be, staying put wins).

The matrix form and the solver calls are in ``_quota_milp``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuaas.errors import PolicyError
from gpuaas.policies.quotas._milp import owed_multiplier, segment_cost, solve_lexicographic
from gpuaas.policies.quotas._reasons import Cell, Kept, held_back_notes, overloaded, overloaded_flavors, reasons_for
from gpuaas.policies.quotas._validate import validate_quota_input

__all__ = [
    "QueueDemand",
    "QuotaChange",
    "QuotaLimits",
    "QuotaPlan",
    "QuotaPlanInfeasible",
    "full_flavors",
    "keeps_share",
    "held_back_notes",
    "plan_quotas",
    "overloaded",
    "plan_to_dict",
    "share_steps",
    "shares",
    "step_of",
    "validate_quota_input",
]



@dataclass(frozen=True)
class QuotaLimits:
    """How far one plan may move quota (the policy's ``rebalance`` limits)."""

    max_step_gpus: int
    max_step_percent: float
    max_total_moved_gpus: int
    hysteresis_gpus: int
    min_step_gpus: int = 0
    """The step any queue may take whatever its size (capped by ``max_step_gpus``): lets a queue at 0 gain."""
    lend_reserve: float = 0.0
    """Share of a queue's unused share it keeps (not lent): demand below the share counts as
    ``demand + lend_reserve * (share - demand)``. A lender's next burst waits for a night; this is its cushion."""
    no_reclaim_keep_factor: float = 12.0
    """In a full cohort, a queue that cannot reclaim keeps this many times its busiest demand, up to its share."""
    no_reclaim_keep_gpus: int = 0
    """A queue that cannot reclaim keeps this many GPUs of its share (all of a smaller one), full cohort or not:
    a burst after a silence longer than the window starts at once instead of after the next plan."""
    reclaiming_lends: bool = True
    """Whether a queue that can reclaim lends below its share."""
    reclaiming_keep_factor: float = 0.0
    """In a full cohort, a queue that can reclaim and lends keeps this many times its busiest demand, up to its share."""
    reclaiming_keep_gpus: int = 0
    """A queue that can reclaim and lends keeps this many GPUs of its share (all of a smaller one), full cohort or not."""
    min_lend_history_s: float = 0.0
    """A queue whose own history (``QueueDemand.history_seconds``) is shorter than this lends nothing below its
    share: its quiet hours may be the hours before its work starts."""
    moved_24h_gpus: int = 0
    """GPUs the cohort's queues gained by plans applied in the last 22 hours (``gpuaas.policy.MOVES_WINDOW``):
    ``max_total_moved_gpus`` is a night's cap, so this plan moves at most the rest."""
    total_cap: str = ""
    """What set ``max_total_moved_gpus`` when it is not the policy's own value (a short history's cap), as a
    reason names it; empty for the policy's own."""

    @property
    def total_left(self) -> int:
        """What this plan may still move in all."""
        return max(0, self.max_total_moved_gpus - self.moved_24h_gpus)


@dataclass(frozen=True)
class QueueDemand:
    """One ClusterQueue of the cohort: what it has, what it needs, what it is owed.

    ``recent_change`` is the queue's net change of nominal quota over the no-reversal window;
    ``evidence`` is the demand's explanation in words per flavor ("12 GPUs waited 3 h, p90 use
    14"), copied into the reasons.
    """

    name: str
    nominal: Mapping[str, int]
    demand: Mapping[str, float]
    guaranteed: Mapping[str, int] = field(default_factory=dict)
    weight: float = 1.0
    recent_change: Mapping[str, int] = field(default_factory=dict)
    evidence: Mapping[str, str] = field(default_factory=dict)
    reclaims: bool = True
    """Whether the queue can take back what it lends: its ClusterQueue is in a cohort and preempts
    borrowers (``reclaimWithinCohort`` other than ``Never``). One that cannot waits, once its demand
    returns, for the next plan and then for the borrower's running jobs to end (lowering a quota
    preempts nothing), so in a full cohort it keeps a margin over its busiest demand (``keeps_share``)."""
    busiest: Mapping[str, float] = field(default_factory=dict)
    """Per flavor, the demand at the window's busiest: GPUs held (at the usage percentile) plus the
    most GPUs pending at once. Says whether the cohort was full within the window (``full_flavors``)."""
    moved_24h: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    """Per flavor, the GPUs of quota (gained, lost) by plans applied in the last 22 hours
    (``gpuaas.policy.MOVES_WINDOW``): a step is a night's, so a second run the same day moves the queue only
    by the rest (an undo gives none of it back), and the next night's run has a whole step again."""
    history_seconds: Mapping[str, float] = field(default_factory=dict)
    """Per flavor, how much of the window the queue's own samples cover (a queue created today has hours); a
    flavor left out counts as a whole window. Below ``QuotaLimits.min_lend_history_s`` it lends nothing."""
    lendable: Mapping[str, int] = field(default_factory=dict)
    """Per flavor, the most GPUs of quota a plan may take from the queue (a flavor left out: no such bound): what its
    ClusterQueue's ``lendingLimit`` lets it lend. ``nominalQuota - lendingLimit`` is what its owners keep from every
    other queue; a plan that took it would hand others what Kueue never lends them (``lendable_gpus``)."""


@dataclass(frozen=True)
class QuotaChange:
    """One queue and flavor, before and after (equal when unchanged), with the reason in words."""

    queue: str
    flavor: str
    before: int
    after: int
    reason: str

    @property
    def delta(self) -> int:
        return self.after - self.before


@dataclass(frozen=True)
class QuotaPlan:
    """Every queue and flavor of the input in ``changes`` (unchanged ones too), in input order."""

    changes: list[QuotaChange]
    moved_gpus: int
    shortfall: dict[str, dict[str, float]]
    weighted_shortfall: float
    solve_seconds: float
    weighted_shortfall_before: float = 0.0
    shortfall_cost: float = 0.0
    """The objective (``segment_cost`` summed): never above ``shortfall_cost_before``."""
    shortfall_cost_before: float = 0.0
    unmet_guarantees: list[str] = field(default_factory=list)
    """Queues still below their guarantee after the plan, in words (reached over the next runs)."""
    notes: list[str] = field(default_factory=list)
    """What the operator should know: a flavor where every queue wants more than its share."""
    overloaded: list[str] = field(default_factory=list)
    """Flavors where every queue wants at least its share: no quota move can help, only more GPUs."""


class QuotaPlanInfeasible(PolicyError):
    """The solver found no assignment (staying put always is one, so this means a solver fault)."""


def step_of(before: int, guaranteed: int, limits: QuotaLimits) -> int:
    """The most one queue's quota of one flavor may move in one plan (see the module docstring)."""
    relative = math.floor(max(before, guaranteed) * limits.max_step_percent / 100 + 1e-9)
    return min(limits.max_step_gpus, max(limits.min_step_gpus, relative))


def shares(queues: Sequence[QueueDemand]) -> dict[tuple[str, str], float]:
    """(queue, flavor) -> the flavor's GPUs in the cohort times the queue's weight over the weights of its holders."""
    out: dict[tuple[str, str], float] = {}
    for flavor in {f for q in queues for f in q.nominal}:
        holders = [q for q in queues if flavor in q.nominal]
        total, weights = sum(q.nominal[flavor] for q in holders), sum(q.weight for q in holders)
        for q in holders:
            out[(q.name, flavor)] = total * q.weight / weights
    return out


def full_flavors(queues: Sequence[QueueDemand]) -> set[str]:
    """Flavors whose queues, each at its busiest of the window (or tonight's demand, if larger), want all the cohort's GPUs.

    Why the busiest and not tonight's demand: a queue quiet for a week is what tonight's demand
    lends; whether its quota is wanted back before the borrower's jobs end depends on the load the
    cohort carries, and the window's peaks are the evidence of that load.
    """
    out = set()
    for flavor in {f for q in queues for f in q.nominal}:
        holders = [q for q in queues if flavor in q.nominal]
        wanted = sum(max(float(q.demand.get(flavor, 0.0)), float(q.busiest.get(flavor, 0.0))) for q in holders)
        if wanted >= sum(q.nominal[flavor] for q in holders) - 1e-9:
            out.add(flavor)
    return out


def keeps_share(before: int, share: float, down: int, busiest: float, factor: float) -> int:
    """The most a queue may lose in a full cohort: down to ``factor`` times its busiest demand of the
    window, or its share if lower; never below.

    Why: there, quota it lends and then wants back comes back only after the next plan (and, for a
    queue that cannot reclaim, after the borrower's jobs: with no preemption its own jobs wait for
    them). What it keeps covers its busiest with a margin (a quiet week says little about the next
    burst); what lies beyond, a team using a few GPUs of a large share, is lent. Quota above its
    share still goes back.
    """
    keep = min(math.floor(share + 1e-9), math.ceil(factor * busiest - 1e-9))
    return min(down, max(0, before - keep))


def _cells(queues: Sequence[QueueDemand], limits: QuotaLimits) -> list[Cell]:
    cells: list[Cell] = []
    share = shares(queues)
    full = full_flavors(queues)
    for q in queues:
        for flavor, before in q.nominal.items():
            guaranteed = q.guaranteed.get(flavor, 0)
            gained, lost = q.moved_24h.get(flavor, (0, 0))
            step = step_of(max(0, before - gained + lost), guaranteed, limits)  # of the quota before the day's plans
            recent = q.recent_change.get(flavor, 0)
            demand = float(q.demand.get(flavor, 0.0))
            if demand < share[(q.name, flavor)]:
                demand += limits.lend_reserve * (share[(q.name, flavor)] - demand)
            up, down = share_steps(before, demand, share[(q.name, flavor)], recent, step, gained, lost)
            down, kept = _lending_rules(q, flavor, before, down, demand, share[(q.name, flavor)], flavor in full, limits)
            cells.append(Cell(
                queue=q.name, flavor=flavor, before=before, demand=demand,
                guaranteed=guaranteed, weight=float(q.weight), recent=recent, step=step,
                step_up=up, step_down=down, gained_24h=gained, lost_24h=lost,
                evidence=q.evidence.get(flavor, ""), share=share[(q.name, flavor)], kept=kept,
            ))
    return cells


_KEEPS = (Kept.KEEP_FACTOR, Kept.KEEP_GPUS)
_RECLAIMING_KEEPS = (Kept.KEEP_FACTOR_RECLAIMS, Kept.KEEP_GPUS_RECLAIMS)


def _lending_rules(q: QueueDemand, flavor: str, before: int, down: int, demand: float, share: float, full: bool,
                   limits: QuotaLimits) -> tuple[int, Kept]:
    """``down`` (the most the queue may lose) after the lending rules, and the rule that lowered it last."""
    owed = math.floor(share + 1e-9)
    caps = []
    lends = not q.reclaims or limits.reclaiming_lends
    if lends:
        factor, floor, rules = ((limits.reclaiming_keep_factor, limits.reclaiming_keep_gpus, _RECLAIMING_KEEPS)
                                if q.reclaims else (limits.no_reclaim_keep_factor, limits.no_reclaim_keep_gpus, _KEEPS))
        if full:
            busiest = max(demand, float(q.busiest.get(flavor, 0.0)))
            caps.append((keeps_share(before, share, down, busiest, factor), rules[0]))
        caps.append((max(0, before - min(owed, floor)), rules[1]))
    if flavor in q.lendable:
        caps.append((max(0, min(before, q.lendable[flavor])), Kept.LENDING_LIMIT))
    if q.history_seconds.get(flavor, math.inf) < limits.min_lend_history_s:
        caps.append((max(0, before - owed), Kept.YOUNG))
    if not lends:
        caps.append((max(0, before - owed), Kept.SHARE_RECLAIMS))
    kept = Kept.NONE
    for most, rule in caps:
        if most < down:
            down, kept = most, rule
    return down, kept


def share_steps(before: int, demand: float, share: float, recent: int, step: int,
                gained: int = 0, lost: int = 0) -> tuple[int, int]:
    """(most GPUs gained, most lost) in one plan, after the share, night and no-reversal rules.

    A queue below its share whose demand is above its quota may regain up to the smaller of the
    two in one plan, and a queue above its share may give down to it in one plan: what a queue
    lent while it did not need it comes back the night its demand returns, not step by step over
    a week while its jobs wait. Either is what a queue may move in a night: ``gained`` and
    ``lost`` there already are spent. No reversal: after a recent loss a queue gains only up to its
    demand; after a recent gain it loses only down to its demand or its share, whichever is lower.
    """
    wanted = math.ceil(demand - 1e-9)
    owed = math.floor(share + 1e-9)
    up = max(0, max(step, min(wanted, owed) - before) - gained)
    down = max(0, max(step, before - owed) - lost)
    if recent < 0:
        up = min(up, max(0, wanted - before))
    if recent > 0:
        down = min(down, max(0, before - min(wanted, owed)))
    return up, down


def plan_quotas(queues: Sequence[QueueDemand], limits: QuotaLimits) -> QuotaPlan:
    """The lexicographically best plan (guarantee gap, shortfall cost, GPUs moved) under the limits."""
    validate_quota_input(queues, limits)
    started = time.perf_counter()
    cells = _cells(queues, limits)
    solution = solve_lexicographic(cells, limits.hysteresis_gpus, limits.total_left)
    if solution is None:
        raise QuotaPlanInfeasible("the quota model has no solution although staying put is one; nothing applied")
    after = solution.after
    elapsed = time.perf_counter() - started
    owed = owed_multiplier([c.weight for c in cells])
    reasons = reasons_for(cells, after, limits)
    changes = [QuotaChange(c.queue, c.flavor, c.before, a, r) for c, a, r in zip(cells, after, reasons)]
    shortfall: dict[str, dict[str, float]] = {}
    for c, a in zip(cells, after):
        shortfall.setdefault(c.queue, {})[c.flavor] = max(0.0, c.demand - a)
    return QuotaPlan(
        changes=changes,
        moved_gpus=sum(max(0, a - c.before) for c, a in zip(cells, after)),
        shortfall=shortfall,
        weighted_shortfall=sum(c.weight * max(0.0, c.demand - a) for c, a in zip(cells, after)),
        solve_seconds=elapsed,
        weighted_shortfall_before=sum(c.weight * max(0.0, c.demand - c.before) for c in cells),
        shortfall_cost=sum(segment_cost(c.demand, c.weight, a, c.share, owed) for c, a in zip(cells, after)),
        shortfall_cost_before=sum(segment_cost(c.demand, c.weight, c.before, c.share, owed) for c in cells),
        unmet_guarantees=[f"{c.queue} {c.flavor}: {a} of guaranteed {c.guaranteed} (+{c.step_up} a run at most)"
                          for c, a in zip(cells, after) if a < c.guaranteed],
        notes=solution.notes + overloaded(cells) + held_back_notes(cells, after),
        overloaded=overloaded_flavors(cells),
    )


def plan_to_dict(plan: QuotaPlan) -> dict[str, Any]:
    """The plan as plain JSON (the shape ``gpuaas plan quotas --format json`` prints)."""
    return {
        "changes": [{"queue": c.queue, "flavor": c.flavor, "before": c.before, "after": c.after, "reason": c.reason}
                    for c in plan.changes],
        "moved_gpus": plan.moved_gpus,
        "shortfall": plan.shortfall,
        "weighted_shortfall": plan.weighted_shortfall,
        "unmet_guarantees": plan.unmet_guarantees,
        "notes": plan.notes,
        "solve_seconds": round(plan.solve_seconds, 4),
    }
