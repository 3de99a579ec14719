"""The deadline plan counts a ``gpuaas.io/deadline-hold`` mark as a hold only where gpuaas recorded it (pure).

The plan takes ``recorded``: (uid, audit id) of the marks the audit log proves (``recorded_holds``). Covers: a
mark a tenant wrote on its pending Workload (a hold that is not there) does not keep the plan from holding it;
the hold is written over that very mark and says so, in its reason, its evidence and its pool's notes; a
mark that names a hold gpuaas recorded still counts (no second hold); a deactivated Workload under a forged
mark is not queued work, nor is a forged demotion's priority Kueue's; a run's preview (``would_write``) lists no
sweep release of a forged mark; and, as a property, marks outside ``recorded`` never change the plan
compared with no mark at all.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuaas.models import Outcome, Snapshot
from gpuaas.operations.deadlines import DeadlinesPlan, plan, would_write
from gpuaas.policies.deadlines import UNRECORDED, Nudge, NudgeAction, RecordedHolds
from gpuaas.policy import DeadlinesPolicy

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
H = 3600.0
POLICY = DeadlinesPolicy(max_holds_per_run=3, release_margin_minutes=30, runtime_estimate_error=1.0)
GIVE_UP = DeadlinesPolicy(max_holds_per_run=3, release_margin_minutes=30)
"""The defaults' rule for lost deadlines: given up (demoted)."""


def wl(name: str, state: str, gpus: int, *, runtime: float = H, deadline_in: float | None = None,
       admitted_ago: float | None = None, active: bool = True, priority: int = 0, mark: str | None = None,
       age_s: float = 600.0) -> dict[str, Any]:
    return {"namespace": "ns", "name": name, "uid": f"uid-{name}", "resource_version": "1", "state": state,
            "gpus": float(gpus), "active": active, "flavor": "h100" if state == "admitted" else None,
            "cluster_queue": "cq-a", "cohort": "c", "runtime_seconds": runtime, "deadline_hold": mark,
            "priority": priority, "created_at": pd.Timestamp(NOW - timedelta(seconds=age_s)),
            "deadline_at": None if deadline_in is None else pd.Timestamp(NOW + timedelta(seconds=deadline_in)),
            "admitted_at": None if admitted_ago is None else pd.Timestamp(NOW - timedelta(seconds=admitted_ago))}


def snapshot(rows: list[dict[str, Any]], gpus: int = 4) -> Snapshot:
    quotas = pd.DataFrame([{"cluster_queue": "cq-a", "cohort": "c", "flavor": "h100", "resource": "nvidia.com/gpu",
                            "nominal": float(gpus)}])
    frame = pd.DataFrame(rows)
    for column in ("deadline_at", "admitted_at", "created_at"):
        frame[column] = pd.to_datetime(frame[column], utc=True)
    return Snapshot(collected_at=NOW, windows_minutes=(30.0,), sources={}, workloads=frame, quotas=quotas)


def field_example(slack_mark: str | None = None, *, slack_active: bool = True) -> Snapshot:
    """4 GPUs: ``run`` holds all 4 for 50 more min; pending ``urgent`` (4 GPUs, 1 h, due in 2 h) and ``slack``
    (2 GPUs, 1 h, due in 5 h, queued first). Kueue's order starts slack at +50 min and urgent misses; the proven
    plan: urgent at +50 min, slack at +110 min; with a 30-min margin slack is held until +80 min and urgent until
    +20 min."""
    return snapshot([wl("run", "admitted", 4, admitted_ago=600),
                     wl("urgent", "pending", 4, deadline_in=2 * H),
                     wl("slack", "pending", 2, deadline_in=5 * H, mark=slack_mark, active=slack_active, age_s=900)])


def mark(audit_id: object = 7, release_in: timedelta = timedelta(minutes=80), **before: object) -> str:
    return json.dumps({"audit_id": audit_id, "release_at": (NOW + release_in).isoformat(),
                       "before": before or {"active": True}})


def by_ref(nudges: tuple[Nudge, ...]) -> dict[str, Nudge]:
    return {n.ref: n for n in nudges}


FORGED = mark(audit_id=7, release_in=timedelta(days=30))  # a "hold" of the tenant's own, until next month


def test_a_forged_mark_is_planned_as_not_held_and_the_hold_is_written_over_it() -> None:
    plain = by_ref(plan(field_example(), POLICY, NOW, recorded=frozenset()).nudges)
    forged = plan(field_example(FORGED), POLICY, NOW, recorded=frozenset())
    slack = by_ref(forged.nudges)["ns/slack"]
    assert (slack.action, slack.outcome, slack.release_at) == (NudgeAction.hold, Outcome.planned,
                                                                NOW + timedelta(minutes=80))
    assert slack.release_at == plain["ns/slack"].release_at and slack.uid == "uid-slack"
    assert slack.over_mark == FORGED and slack.evidence["unrecorded_mark"] == FORGED
    assert slack.reason == f"{plain['ns/slack'].reason}; {UNRECORDED}"
    assert "ns/slack: its gpuaas.io/deadline-hold mark is not one gpuaas recorded: planned as not held" in \
        forged.pools[0].problem.notes
    assert not [n for n in forged.nudges if n.action is NudgeAction.release]  # never released by the plan


def test_without_the_audit_logs_answer_every_mark_still_counts() -> None:
    """``recorded=None``: a plan with no audit log behind it (a replay) takes every mark as gpuaas's, as before."""
    legacy = by_ref(plan(field_example(FORGED), POLICY, NOW).nudges)
    assert legacy["ns/slack"].action is NudgeAction.release and legacy["ns/slack"].over_mark is None


def test_a_recorded_hold_still_counts_as_held_and_is_not_held_twice() -> None:
    recorded: RecordedHolds = frozenset({("uid-slack", 7)})
    kept = plan(field_example(mark(audit_id=7)), POLICY, NOW, recorded=recorded)
    assert "ns/slack" not in by_ref(kept.nudges)  # held until +80 min already: kept, no second hold
    assert not any(UNRECORDED in note for note in kept.pools[0].problem.notes)
    held_elsewhere = plan(field_example(mark(audit_id=7)), POLICY, NOW, recorded=frozenset({("uid-other", 7)}))
    assert by_ref(held_elsewhere.nudges)["ns/slack"].action is NudgeAction.hold  # a pair for another object
    other_id = plan(field_example(mark(audit_id=8)), POLICY, NOW, recorded=recorded)
    assert by_ref(other_id.nudges)["ns/slack"].action is NudgeAction.hold  # another audit id on the same object


def test_a_recorded_hold_the_plan_no_longer_needs_is_released() -> None:
    recorded: RecordedHolds = frozenset({("uid-slack", 7)})
    released = by_ref(plan(field_example(FORGED), POLICY, NOW, recorded=recorded).nudges)["ns/slack"]
    assert released.action is NudgeAction.release and "before the held release time" in released.reason


def test_a_lost_deadline_under_a_forged_mark_is_given_up_like_any_other() -> None:
    """``lost`` (2 GPUs for 1 h, due in 10 min) carries a hold mark its team wrote: demoted one priority, the
    demotion written over that mark, as it would be with none."""
    rows = [wl("run", "admitted", 4, admitted_ago=600), wl("lost", "pending", 2, deadline_in=600, mark=FORGED)]
    demoted = by_ref(plan(snapshot(rows), GIVE_UP, NOW, recorded=frozenset()).nudges)["ns/lost"]
    assert (demoted.action, demoted.outcome, demoted.over_mark) == (NudgeAction.demote, Outcome.planned, FORGED)
    assert demoted.evidence["given_up"] and demoted.reason.endswith(UNRECORDED)


def test_a_deactivated_workload_under_a_forged_mark_is_no_queued_work() -> None:
    """Deactivated by its team, a mark written beside it: not a hold of gpuaas's, so not pending work (a recorded
    hold is: its Workload waits for its release)."""
    forged = plan(field_example(FORGED, slack_active=False), POLICY, NOW, recorded=frozenset())
    assert [j.name for j in forged.pools[0].problem.jobs] == ["ns/run", "ns/urgent"]
    real = plan(field_example(mark(audit_id=7), slack_active=False), POLICY, NOW,
                recorded=frozenset({("uid-slack", 7)}))
    assert [j.name for j in real.pools[0].problem.jobs] == ["ns/run", "ns/urgent", "ns/slack"]


def test_a_forged_demotion_mark_does_not_set_the_priority_kueues_order_is_played_at() -> None:
    """Its team writes that ``slack`` was demoted from 101: taken on its word, Kueue's order would put slack
    before urgent and miss urgent's deadline, and the plan would look needed where it is not."""
    base = [wl("run", "admitted", 4, admitted_ago=600), wl("urgent", "pending", 4, deadline_in=2 * H, age_s=900)]
    raised = [*base, wl("slack", "pending", 4, deadline_in=5 * H, mark=mark(audit_id=None, priority=101))]
    plain = [*base, wl("slack", "pending", 4, deadline_in=5 * H)]
    forged = plan(snapshot(raised), POLICY, NOW, recorded=frozenset()).pools[0].versus_kueue
    assert forged == plan(snapshot(plain), POLICY, NOW, recorded=frozenset()).pools[0].versus_kueue == (2, 2)


def test_a_runs_preview_lists_no_sweep_release_of_a_forged_mark() -> None:
    due = mark(audit_id=7, release_in=timedelta(0))
    shot = field_example(due)
    forged = would_write(plan(shot, POLICY, NOW, nudge=False, recorded=frozenset()), shot)
    assert [(n.action, n.ref) for n in forged if n.ref == "ns/slack"] == []
    real = would_write(plan(shot, POLICY, NOW, nudge=False, recorded=frozenset({("uid-slack", 7)})), shot)
    assert [(n.action, n.ref) for n in real if n.ref == "ns/slack"] == [(NudgeAction.release, "ns/slack")]


def _without_marks(p: DeadlinesPlan) -> tuple[object, ...]:
    """The plan as it would read with no mark: the notes and reasons about forged marks taken out."""
    pools = tuple(replace(pool, problem=replace(pool.problem, notes=tuple(
        n for n in pool.problem.notes if not n.endswith(UNRECORDED)))) for pool in p.pools)
    nudges = tuple(replace(n, reason=n.reason.removesuffix(f"; {UNRECORDED}"), over_mark=None,
                           evidence={k: v for k, v in n.evidence.items() if k != "unrecorded_mark"})
                   for n in p.nudges)
    return pools, nudges


FORGERIES = st.sampled_from([
    "x", "", json.dumps({"before": {"priority": 101}}), json.dumps({"before": {"priority": -5}, "audit_id": 3}),
    mark(audit_id=1, release_in=timedelta(days=30)), mark(audit_id=2, release_in=timedelta(0)),
    mark(audit_id=4, release_in=timedelta(minutes=10), priority=0),
])
JOBS = st.lists(st.tuples(st.integers(1, 4), st.integers(1, 3), st.sampled_from([*range(9)] * 3 + [None]),
                          st.sampled_from([True] * 7 + [False]), st.sampled_from([0] * 6 + [-1, 1]),
                          FORGERIES | st.none()), min_size=2, max_size=5)
NEAR = DeadlinesPolicy(max_holds_per_run=3, release_margin_minutes=5, runtime_estimate_error=1.0)
NEAR_GIVE_UP = DeadlinesPolicy(max_holds_per_run=3, release_margin_minutes=5)
"""A short margin: more of the plans hold something."""


@settings(max_examples=80, deadline=None)
@given(JOBS, st.booleans() | st.just(True), st.booleans(), st.integers(0, 3), st.randoms(use_true_random=False))
def test_marks_gpuaas_did_not_record_never_change_the_plan(jobs: list[tuple[int, int, int | None, bool, int,
                                                                             str | None]],
                                                           busy: bool, give_up: bool, lie: int, rnd: Any) -> None:
    """Random pending Workloads (GPUs, half hours of run time, half hours of slack to the deadline after ``run``
    ends, active, priority; queued in a random order), some under a forged
    mark (a tenant's text, a raised priority, a hold until next month or due now, a demotion), a few named in
    ``recorded`` under another uid or audit id: the plan, nudges and pools, is the plan with no mark at all but
    for the words that say so and the mark each hold is written over."""
    rows = [wl("run", "admitted", 4, admitted_ago=600)] if busy else []
    ages = rnd.sample(range(len(jobs)), len(jobs))
    for i, (gpus, half_hours, slack, active, priority, _) in enumerate(jobs):
        runtime = half_hours * 1800.0
        rows.append(wl(f"j{i}", "pending", gpus, runtime=runtime, active=active, priority=priority, age_s=600.0 + ages[i],
                       deadline_in=None if slack is None else 3000.0 + runtime + slack * 1800.0))
    marked = [{**row, "deadline_hold": forged} for row, (*_, forged) in zip(rows[int(busy):], jobs, strict=True)]
    recorded: RecordedHolds = frozenset({(f"uid-j{i}", 100 + i) for i in range(lie)} | {("uid-run", 1), ("uid-x", 2)})
    policy = NEAR_GIVE_UP if give_up else NEAR
    bare = plan(snapshot(rows), policy, NOW, recorded=recorded)
    forged = plan(snapshot(rows[:int(busy)] + marked), policy, NOW, recorded=recorded)
    assert _without_marks(forged) == _without_marks(bare)
    for n in forged.nudges:
        text = next(r["deadline_hold"] for r in marked if f"ns/{r['name']}" == n.ref)
        assert n.action is not NudgeAction.release
        assert n.over_mark == (text if text else None)
