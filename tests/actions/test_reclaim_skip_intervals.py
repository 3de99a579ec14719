"""A skip or deferral that persists is recorded once per ``reclaim.record_skips_every_minutes``, not once per run.

Cases: a skip unchanged over three hours of 15-minute runs writes a row per hour and every run's result names
the row that holds it; another cause, another uid (the object recreated), another mode, another outcome, a
planned decision in between and the interval elapsing each write a row at once; 0 writes a row every run; a
skip the action itself finds (the object deleted) is kept the same way; the cause is in the row's evidence.
A property over random sequences of runs: every window of the interval plus one run inside a streak of one
unchanged skip holds a row of it, and no two rows of a streak are closer than the interval.

The runs are ``execute_decisions`` on a SQLite store, with the clock each run stamps its rows with given.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuaas.actions.reclaim import ActionResult, execute_decisions
from gpuaas.errors import NotFound
from gpuaas.models import Outcome
from gpuaas.policies.reclaim import Decision, SkipCause, reclaim_key
from gpuaas.policy import FreeGoal, Mode
from gpuaas.store import AuditEntry, Store

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
CADENCE = timedelta(minutes=15)
REASONS = {SkipCause.opted_out: 'opted out on the Notebook (gpuaas.io/reclaim: "never")',
           SkipCause.keda: "KEDA scales it on gpuaas's idle signal (policy actuator: keda)",
           SkipCause.over_cap: "over the cap of 10 actions per run (rank 12 by GPUs x idle time)"}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    opened = Store(f"sqlite:///{tmp_path_factory.mktemp('skips')}/gpuaas.db")
    yield opened
    opened.close()


_names = (f"nb-{i}" for i in itertools.count())


@pytest.fixture()
def name() -> str:
    """An object no other test of the module has written about (they share one store)."""
    return next(_names)


def decision(name: str, at: datetime, cause: SkipCause | None = SkipCause.opted_out, *, uid: str = "uid-1",
             mode: Mode = Mode.dry_run, outcome: Outcome | None = None) -> Decision:
    """The decision a run at ``at`` makes about Notebook team-a/``name`` (a deferral for ``over_cap``)."""
    if outcome is None:
        outcome = Outcome.planned if cause is None else (
            Outcome.deferred if cause is SkipCause.over_cap else Outcome.skipped)
    return Decision(kind="Notebook", namespace="team-a", name=name, uid=uid, tenant="team-a", gpus=1,
                    idle_seconds=3600, free=FreeGoal.compute, outcome=outcome,
                    reason=REASONS[cause] if cause is not None else "idle 1h00m", resource_version="7",
                    idempotency_key=reclaim_key(mode, "Notebook", "team-a", name, uid, at), mode=mode,
                    evidence={"window_minutes": 30.0, "activity_max": 0.0}, cause=cause)


class _Gone:
    """A cluster where every object has been deleted."""

    def get(self, kind: str, namespace: str, name: str, version: str | None = None) -> dict[str, Any]:
        raise NotFound("not found", status=404, reason="Not Found", kind=kind, namespace=namespace, name=name)


def run(store: Store, decisions: list[Decision], at: datetime, minutes: float = 60,
        mode: Mode = Mode.dry_run) -> list[ActionResult]:
    """One reclaim run's act step at ``at`` (its wall clock)."""
    return execute_decisions(decisions, store, _Gone(), mode=mode, flow_run_id=f"run-{at:%H%M}",  # type: ignore[arg-type]
                             now=at, record_skips_every=timedelta(minutes=minutes), clock=lambda: at)


def rows(store: Store, name: str) -> list[AuditEntry]:
    return store.audit(flow="reclaim", obj=f"Notebook/team-a/{name}", limit=None)


def test_a_persisting_skip_is_recorded_once_per_interval_and_every_run_names_its_row(store: Store, name: str) -> None:
    results = [run(store, [decision(name, T0 + k * CADENCE)], T0 + k * CADENCE)[0] for k in range(12)]  # 3 hours
    recorded = rows(store, name)
    assert [r.created_at for r in recorded] == [T0, T0 + timedelta(hours=1), T0 + timedelta(hours=2)]
    assert all(r.evidence["cause"] == "opted-out" and r.outcome == Outcome.skipped for r in recorded)
    assert all(r.reason == REASONS[SkipCause.opted_out] for r in recorded)  # the wording is kept, nothing added
    holder = [recorded[k // 4].id for k in range(12)]  # runs 0-3 the first row, 4-7 the second, 8-11 the third
    assert [r.audit_id for r in results] == holder
    assert all(r.result == Outcome.skipped and r.cause is SkipCause.opted_out for r in results)
    assert [r.unchanged_since for r in results[:5]] == [None, T0, T0, T0, None]
    assert results[1].reason == (f'{REASONS[SkipCause.opted_out]} (unchanged, as recorded in audit #{recorded[0].id} '
                                 "at 2026-12-01 02:00 UTC)")
    assert results[0].reason == REASONS[SkipCause.opted_out]


@pytest.mark.parametrize("changed", [
    {"cause": SkipCause.keda},
    {"uid": "uid-2"},
    {"mode": Mode.apply},
    {"cause": SkipCause.over_cap},  # another outcome too: deferred
    {"cause": SkipCause.opted_out, "outcome": Outcome.deferred},  # the outcome alone
], ids=["cause", "uid (recreated)", "mode", "cause and outcome", "outcome"])
def test_any_change_is_recorded_at_once(store: Store, name: str, changed: dict[str, Any]) -> None:
    first = run(store, [decision(name, T0)], T0)[0]
    second = run(store, [decision(name, T0 + CADENCE, **changed)], T0 + CADENCE)[0]
    third = run(store, [decision(name, T0 + 2 * CADENCE, **changed)], T0 + 2 * CADENCE)[0]
    recorded = rows(store, name)
    assert [r.created_at for r in recorded] == [T0, T0 + CADENCE]
    assert second.audit_id == recorded[1].id and second.unchanged_since is None
    assert third.audit_id == recorded[1].id and third.unchanged_since == T0 + CADENCE  # the new state's own row
    assert first.audit_id == recorded[0].id


def test_back_to_the_first_cause_is_a_change_too(store: Store, name: str) -> None:
    for k, cause in enumerate([SkipCause.opted_out, SkipCause.keda, SkipCause.opted_out]):
        run(store, [decision(name, T0 + k * CADENCE, cause)], T0 + k * CADENCE)
    assert [r.evidence["cause"] for r in rows(store, name)] == ["opted-out", "keda", "opted-out"]


def test_a_planned_decision_in_between_ends_the_streak(store: Store, name: str) -> None:
    run(store, [decision(name, T0)], T0)
    at = T0 + CADENCE
    planned = decision(name, at, None)
    store.append_decision(AuditEntry(created_at=at, flow="reclaim", flow_run_id="run-x", action="reclaim",
                                     kind="Notebook", namespace="team-a", name=name, uid="uid-1", mode="dry-run",
                                     outcome=Outcome.planned, reason=planned.reason, evidence=planned.evidence,
                                     idempotency_key=planned.idempotency_key))
    again = run(store, [decision(name, T0 + 2 * CADENCE)], T0 + 2 * CADENCE)[0]
    recorded = rows(store, name)
    assert [r.outcome for r in recorded] == [Outcome.skipped, Outcome.planned, Outcome.skipped]
    assert again.audit_id == recorded[2].id and again.unchanged_since is None


@pytest.mark.parametrize(("minutes", "second_at", "new_row"), [
    (60, timedelta(minutes=59), False),
    (60, timedelta(minutes=60), True),
    (45, timedelta(minutes=45), True),
    (50, timedelta(minutes=45), False),
])
def test_the_interval_elapsing_records_a_row(store: Store, name: str, minutes: float, second_at: timedelta,
                                              new_row: bool) -> None:
    run(store, [decision(name, T0)], T0, minutes)
    run(store, [decision(name, T0 + second_at)], T0 + second_at, minutes)
    assert len(rows(store, name)) == (2 if new_row else 1)


def test_zero_records_every_run_as_before(store: Store, name: str) -> None:
    results = [run(store, [decision(name, T0 + k * CADENCE)], T0 + k * CADENCE, minutes=0)[0] for k in range(4)]
    recorded = rows(store, name)
    assert [r.created_at for r in recorded] == [T0 + k * CADENCE for k in range(4)]
    assert [r.audit_id for r in results] == [r.id for r in recorded]
    assert all(r.unchanged_since is None for r in results)


def test_a_skip_the_action_finds_is_kept_the_same_way(store: Store, name: str) -> None:
    """A planned decision whose object is gone when the action reads it: "object deleted", recorded once an hour."""
    results = [run(store, [decision(name, T0 + k * CADENCE, None)], T0 + k * CADENCE, mode=Mode.apply)[0]
               for k in range(5)]
    recorded = rows(store, name)
    assert [(r.created_at, r.outcome, r.reason, r.evidence["cause"]) for r in recorded] == [
        (T0, Outcome.skipped, "object deleted", "object-deleted"),
        (T0 + timedelta(hours=1), Outcome.skipped, "object deleted", "object-deleted")]
    assert [r.audit_id for r in results] == [recorded[0].id] * 4 + [recorded[1].id]
    assert all(r.cause is SkipCause.object_deleted for r in results)


def test_a_skip_does_not_stand_for_an_object_of_another_name(store: Store, name: str) -> None:
    run(store, [decision(name, T0)], T0)
    other = f"{name}-twin"
    run(store, [decision(other, T0 + CADENCE)], T0 + CADENCE)
    assert len(rows(store, name)) == 1 and len(rows(store, other)) == 1


# -- the property ----------------------------------------------------------------------------------------------

_STATES = st.one_of(
    st.none(),  # not a target this run (busy)
    st.just("planned"),
    st.tuples(st.sampled_from([SkipCause.opted_out, SkipCause.keda, SkipCause.over_cap]),
              st.sampled_from(["uid-1", "uid-2"]), st.sampled_from([Mode.dry_run, Mode.apply])),
)


def _streaks(states: list[Any]) -> list[tuple[int, int, Any]]:
    """(first run, last run, state) of each maximal stretch of consecutive runs with one and the same skip."""
    out: list[tuple[int, int, Any]] = []
    for k, state in enumerate(states):
        if isinstance(state, tuple) and out and out[-1][2] == state and out[-1][1] == k - 1:
            out[-1] = (out[-1][0], k, state)
        elif isinstance(state, tuple):
            out.append((k, k, state))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(minutes=st.sampled_from([0, 15, 20, 45, 50, 60, 90]), objects=st.lists(
    st.lists(_STATES, min_size=1, max_size=30), min_size=1, max_size=3))
def test_every_window_of_a_streak_holds_a_row_and_rows_are_an_interval_apart(
        store: Store, minutes: int, objects: list[list[Any]]) -> None:
    names = [next(_names) for _ in objects]
    every = timedelta(minutes=minutes)
    results: dict[tuple[str, int], ActionResult] = {}
    for k in range(max(len(states) for states in objects)):
        at = T0 + k * CADENCE
        decisions = []
        for name, states in zip(names, objects, strict=True):
            state = states[k] if k < len(states) else None
            if state == "planned":  # a run that planned it: its intent row, as the action writes it
                planned = decision(name, at, None)
                store.append_decision(AuditEntry(
                    created_at=at, flow="reclaim", action="reclaim", kind="Notebook", namespace="team-a", name=name,
                    uid="uid-1", mode="dry-run", outcome=Outcome.planned, reason=planned.reason,
                    idempotency_key=planned.idempotency_key))
            elif state is not None:
                cause, uid, mode = state
                decisions.append(decision(name, at, cause, uid=uid, mode=mode))
        for d, r in zip(decisions, run(store, decisions, at, minutes), strict=True):
            results[(d.name, k)] = r
    for name, states in zip(names, objects, strict=True):
        recorded = {r.id: r for r in rows(store, name)}
        skip_runs = {int((r.created_at - T0) / CADENCE) for r in recorded.values() if r.outcome != Outcome.planned}
        for first, last, (cause, uid, mode) in _streaks(states):
            # Each run's result names a row of this object that says the same, written at most an interval ago.
            for k in range(first, last + 1):
                held = recorded[results[(name, k)].audit_id or 0]
                assert (held.evidence["cause"], held.uid, held.mode) == (str(cause), uid, str(mode))
                assert T0 + k * CADENCE - held.created_at < max(every, CADENCE)
            times = sorted(T0 + k * CADENCE for k in skip_runs if first <= k <= last)
            start, end = T0 + first * CADENCE, T0 + last * CADENCE
            if minutes == 0:
                assert len(times) == last - first + 1
                continue
            # No two rows of the streak are closer than the interval.
            assert all(b - a >= every for a, b in itertools.pairwise(times))
            # Every window of N + 15 minutes inside the streak holds one: none fits between two of its rows, before
            # its first or after its last.
            window = every + CADENCE
            if not times:
                assert end - start < window
            else:
                assert times[0] - start <= window and end - times[-1] <= window
                assert all(b - a <= window for a, b in itertools.pairwise(times))
            # A streak that follows another state (not a pause of one run as a non-target) starts with its own row.
            if first > 0 and states[first - 1] is not None:
                assert times and times[0] == start
