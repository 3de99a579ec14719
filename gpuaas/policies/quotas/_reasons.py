"""The quota planner's words: why each queue changed or didn't.

Kept apart from the model so that the MILP reads as the constraints it states. Every sentence
carries its numbers ("team-b a100: 8 -> 12 (+4 from team-a): demand 20, shortfall 12 -> 8;
limited by the step of 4 (50% of 8)"), because an operator approving a nightly move has only
these lines to go on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from gpuaas.policy import MOVES_WINDOW

__all__ = ["MOVES_WINDOW_WORDS", "Cell", "Kept", "held_back_notes", "overloaded", "overloaded_flavors", "reasons_for"]

MOVES_WINDOW_WORDS = f"{MOVES_WINDOW.total_seconds() / 3600:g} hours"
"""How the reasons and notes name the window whose moves a plan counts as spent ("22 hours")."""


class Kept(Enum):
    """The lending rule that set how far a queue may lend (``Cell.step_down``) below what its demand leaves."""

    NONE = ""
    SHARE_RECLAIMS = "it can reclaim, and borrowing already lends its idle quota: it lends nothing below its share"
    KEEP_FACTOR = ("it cannot reclaim what it lends, in a cohort full at its busiest: it keeps no_reclaim_keep_factor "
                   "times its busiest demand, up to its share")
    KEEP_FACTOR_RECLAIMS = ("in a cohort full at its busiest, it keeps reclaiming_keep_factor times its busiest "
                            "demand, up to its share")
    KEEP_GPUS_RECLAIMS = "it keeps reclaiming_keep_gpus of its share"
    KEEP_GPUS = "it cannot reclaim what it lends: it keeps no_reclaim_keep_gpus of its share"
    YOUNG = "it has too little history of its own to lend on (min_history_days): it lends nothing below its share"
    LENDING_LIMIT = "its lendingLimit keeps nominalQuota - lendingLimit from other queues: that part is never taken"


class _Limits(Protocol):
    @property
    def max_step_gpus(self) -> int: ...
    @property
    def max_step_percent(self) -> float: ...
    @property
    def min_step_gpus(self) -> int: ...
    @property
    def max_total_moved_gpus(self) -> int: ...
    @property
    def hysteresis_gpus(self) -> int: ...
    @property
    def moved_24h_gpus(self) -> int: ...
    @property
    def total_cap(self) -> str: ...
    @property
    def total_left(self) -> int: ...


@dataclass(frozen=True)
class Cell:
    """One queue and flavor as the model sees it (steps already reduced by the no-reversal rule)."""

    queue: str
    flavor: str
    before: int
    demand: float
    guaranteed: int
    weight: float
    recent: int
    step: int
    step_up: int
    step_down: int
    evidence: str = ""
    share: float = 0.0
    """The queue's weighted share of the flavor's GPUs in the cohort: shortfall within it is owed first."""
    gained_24h: int = 0
    """What plans applied in the moves window (``MOVES_WINDOW``) already gave it: spent of the night's step."""
    lost_24h: int = 0
    kept: Kept = Kept.NONE
    """The rule that keeps it from lending as far as its demand would leave (none when nothing did)."""

    @property
    def floor(self) -> int:
        return max(self.guaranteed, self.before - self.step_down)

    def held_back(self, after: int) -> bool:
        """Whether a lending rule held it back in a plan that leaves it ``after``: at the least the rule allows it,
        with a GPU or more above its demand."""
        return self.kept is not Kept.NONE and after == self.floor and after - self.demand >= 1


def _num(x: float) -> str:
    return f"{x:.0f}" if abs(x - round(x)) < 1e-9 else f"{x:.1f}"


def _step_words(c: Cell, limits: _Limits) -> str:
    pct = f"{_num(limits.max_step_percent)}% of {max(c.before - c.gained_24h + c.lost_24h, c.guaranteed)}"
    spent = f", {c.gained_24h} of it gained in the last {MOVES_WINDOW_WORDS}" if c.gained_24h else ""
    if c.step >= limits.max_step_gpus:
        return f"the step of {c.step} (max_step_gpus{spent})"
    if c.step == limits.min_step_gpus and c.step > 0:
        return f"the step of {c.step} (min_step_gpus{spent})"
    return f"the step of {c.step} ({pct}{spent})"


def reasons_for(cells: Sequence[Cell], after: Sequence[int], limits: _Limits) -> list[str]:
    """One sentence per cell, in the cells' order."""
    partners = _pair_moves(cells, after)
    moved = sum(max(0, a - c.before) for c, a in zip(cells, after))
    short = {c.flavor: True for c, a in zip(cells, after) if c.demand - a > 1e-9}
    out: list[str] = []
    for i, (c, a) in enumerate(zip(cells, after)):
        head = f"{c.queue} {c.flavor}: "
        evidence = f"{c.evidence}; " if c.evidence else ""
        short_before = max(0.0, c.demand - c.before)
        short_after = max(0.0, c.demand - a)
        demand = f"demand {_num(c.demand)}"
        if a > c.before:
            text = (f"{c.before} -> {a} (+{a - c.before} from {partners[i]}): {evidence}{demand}{_owed(c, a)}, "
                    f"shortfall {_num(short_before)} -> {_num(short_after)}")
            if short_after > 0:
                text += "; " + _why_not_more(c, a, moved, limits)
        elif a < c.before:
            text = (f"{c.before} -> {a} ({a - c.before} to {partners[i]}): {evidence}{demand}"
                    f"{_owed(c)}, {_num(max(0.0, a - c.demand))} above demand after the move")
            if c.held_back(a):
                text += f"; {c.kept.value}"
            if short_after > 0:
                text += (f" (short {_num(short_after)}: another queue is shorter for its weight, or is owed its "
                         "guarantee)")
        elif short_before > 0:
            text = f"unchanged at {a}: {evidence}{demand}{_owed(c, a)}, short {_num(short_before)}; "
            text += _why_not_more(c, a, moved, limits)
        else:
            text = f"unchanged at {a}: {evidence}{demand}{_owed(c, a)}"
            surplus = a - c.demand
            if surplus < 1:
                text += ", fits"
            elif c.recent > 0 and c.step_down == 0:
                text += f", {_num(surplus)} above demand; gained {c.recent} recently, so gives none back (no reversal)"
            elif short.get(c.flavor) and c.held_back(a):
                text += f", {_num(surplus)} above demand; {c.kept.value}"
            elif short.get(c.flavor):
                text += (f", {_num(surplus)} above demand, but no queue short of {c.flavor} may take it "
                         "(steps, guarantees, recent changes, the plan's cap)")
            else:
                text += f", {_num(surplus)} above demand; no queue of the cohort is short of {c.flavor}"
        out.append(head + text)
    return out


def _owed(c: Cell, after: int | None = None) -> str:
    if not c.guaranteed:
        return ""
    if after is not None and after < c.guaranteed:
        return f", guaranteed {c.guaranteed} (not reached yet: at most +{c.step_up} a run, the rest on the next runs)"
    return f", guaranteed {c.guaranteed}"


def _why_not_more(c: Cell, a: int, moved: int, limits: _Limits) -> str:
    if c.recent < 0 and c.step_up < c.step and a >= c.before + c.step_up:
        return f"it lost {-c.recent} GPUs recently, so it gains back only up to its demand (no reversal)"
    if c.step_up == 0:
        return f"{_step_words(c, limits)} allows no gain"
    if a >= c.before + c.step_up:
        if c.step_up > c.step:  # the step gave way to the return of lent quota, up to the share
            return f"back to its weighted share of {_num(c.share)} in one plan (beyond {_step_words(c, limits)})"
        return f"limited by {_step_words(c, limits)}"
    if c.step_up < limits.hysteresis_gpus:
        return f"{_step_words(c, limits)} is below hysteresis_gpus={limits.hysteresis_gpus}"
    if moved >= limits.total_left:
        cap = limits.total_cap or f"max_total_moved_gpus={limits.max_total_moved_gpus}"
        if limits.moved_24h_gpus:
            return f"limited by {cap} a night, {limits.moved_24h_gpus} of it moved in the last {MOVES_WINDOW_WORDS}"
        return f"limited by {cap} for the whole plan"
    return ("no other queue can give more (each is at its demand, guarantee, step, recent gain, or what a "
            "lending rule keeps: see the notes"
            + (f", or the change would be under hysteresis_gpus={limits.hysteresis_gpus}"
               if limits.hysteresis_gpus >= 2 else "") + ")")


def _pair_moves(cells: Sequence[Cell], after: Sequence[int]) -> list[str]:
    """Who gave to whom, per flavor: the gains matched to the losses in order (for the words only)."""
    names = ["" for _ in cells]
    by_flavor: dict[str, list[int]] = {}
    for i, c in enumerate(cells):
        by_flavor.setdefault(c.flavor, []).append(i)
    for members in by_flavor.values():
        gains = [[i, after[i] - cells[i].before] for i in members if after[i] > cells[i].before]
        losses = [[i, cells[i].before - after[i]] for i in members if after[i] < cells[i].before]
        got: dict[int, list[str]] = {}
        gave: dict[int, list[str]] = {}
        gi = li = 0
        while gi < len(gains) and li < len(losses):
            amount = min(gains[gi][1], losses[li][1])
            g, lo = gains[gi][0], losses[li][0]
            got.setdefault(g, []).append(f"{cells[lo].queue} {amount}" if amount else cells[lo].queue)
            gave.setdefault(lo, []).append(f"{cells[g].queue} {amount}")
            gains[gi][1] -= amount
            losses[li][1] -= amount
            if gains[gi][1] == 0:
                gi += 1
            if losses[li][1] == 0:
                li += 1
        for i, parts in got.items():
            names[i] = _join(parts)
        for i, parts in gave.items():
            names[i] = _join(parts)
    return names


def _join(parts: list[str]) -> str:
    if len(parts) == 1:
        return parts[0].rsplit(" ", 1)[0]
    return ", ".join(parts)


_HELD_WORDS = {
    Kept.KEEP_FACTOR: (
        "{names} cannot reclaim what it lends (no cohort, or reclaimWithinCohort: Never) and lends only beyond "
        "no_reclaim_keep_factor times the busiest demand",
        "{names} cannot reclaim what they lend (no cohort, or reclaimWithinCohort: Never) and lend only beyond "
        "no_reclaim_keep_factor times the busiest demand"),
    Kept.YOUNG: (
        "{names} has less than min_history_days of its own history: it lends nothing below its share until it "
        "has that much",
        "{names} have less than min_history_days of their own history: they lend nothing below their share until "
        "they have that much"),
    Kept.KEEP_GPUS: (
        "{names} cannot reclaim what it lends: it keeps no_reclaim_keep_gpus of its share",
        "{names} cannot reclaim what they lend: they keep no_reclaim_keep_gpus of their share"),
    Kept.KEEP_FACTOR_RECLAIMS: (
        "{names} lends only beyond reclaiming_keep_factor times the busiest demand",
        "{names} lend only beyond reclaiming_keep_factor times the busiest demand"),
    Kept.KEEP_GPUS_RECLAIMS: (
        "{names} keeps reclaiming_keep_gpus of its share",
        "{names} keep reclaiming_keep_gpus of their share"),
    Kept.LENDING_LIMIT: (
        "{names} gives at most its lendingLimit: nominalQuota - lendingLimit is kept from other queues",
        "{names} give at most their lendingLimit: nominalQuota - lendingLimit is kept from other queues"),
}
"""The notes' sentence for the queues a rule held, naming one queue or several."""


def held_back_notes(cells: Sequence[Cell], after: Sequence[int]) -> list[str]:
    """One sentence per lending rule that held a queue back tonight, naming the queues it held (none: no sentence).

    Held: the plan left the queue at the least the rule allows it, with a GPU or more above its demand. Why only
    those: a note names what the operator can change (the rule's setting) for a queue it changed; a rule that
    held nobody back is noise."""
    held = [c for c, a in zip(cells, after, strict=True) if c.held_back(a)]
    out = []
    for flavor in sorted({c.flavor for c in held}):
        kept = [_held(rule, names) for rule in (Kept.KEEP_FACTOR, Kept.KEEP_FACTOR_RECLAIMS)
                if (names := sorted(c.queue for c in held if c.flavor == flavor and c.kept is rule))]
        if kept:
            out.append(f"{flavor}: the cohort was full at its busiest this window; " + "; ".join(kept))
    for rule in (Kept.YOUNG, Kept.KEEP_GPUS, Kept.KEEP_GPUS_RECLAIMS, Kept.LENDING_LIMIT):
        names = sorted({c.queue for c in held if c.kept is rule})
        if names:
            out.append(_held(rule, names))
    return out


def _held(rule: Kept, names: list[str]) -> str:
    one, many = _HELD_WORDS[rule]
    return (one if len(names) == 1 else many).format(names=", ".join(names))


def overloaded_flavors(cells: Sequence[Cell]) -> list[str]:
    """The flavors where every queue wants at least its share (and together more than the cohort has)."""
    out = []
    for flavor in sorted({c.flavor for c in cells}):
        members = [c for c in cells if c.flavor == flavor]
        wanted = sum(c.demand for c in members)
        if len(members) > 1 and wanted > sum(c.before for c in members) and all(
                c.demand >= c.share - 1e-9 for c in members):
            out.append(flavor)
    return out


def overloaded(cells: Sequence[Cell]) -> list[str]:
    """One sentence per flavor where every queue wants at least its share: quota moves cannot meet the demand.

    The most a move can do there is bring each queue to its share; where every queue holds it already (to
    a GPU), no move helps at all. Either way the honest answer is more GPUs; the deadline plan's extra GPUs
    is the signal that says how many.
    """
    out = []
    for flavor in sorted({c.flavor for c in cells}):
        members = [c for c in cells if c.flavor == flavor]
        total, wanted = sum(c.before for c in members), sum(c.demand for c in members)
        if len(members) > 1 and wanted > total and all(c.demand >= c.share - 1e-9 for c in members):
            at_share = all(abs(c.before - c.share) < 1 for c in members)
            moves = ("moving quota cannot help" if at_share
                     else "moving quota can only bring each queue toward its share")
            out.append(f"{flavor}: every queue wants at least its share ({wanted:g} GPUs wanted of {total}): {moves}; "
                       "more GPUs can (see the deadline plan's extra GPUs, gpuaas_extra_gpus_needed)")
    return out
