"""``gpuaas.operations.reclaim.plan`` skips, before the cap, what a guard found on an object unchanged since.

Pure: hand-made decisions and an ``AuditView`` whose ``held`` rows stand for each object's newest audit row. Cases:
the held object gives its place under the cap to the next; another resourceVersion or uid, a row that recorded no
version, a cause the object does not keep or a planned row in between make it a candidate again; the reason names
the row (a failed stop: its intent) and keeps its words, without wrapping an earlier such reason again; dry-run and
apply plan alike. A property over random fleets: the held objects take no place, and the others are capped by waste
as if the held ones were not there. Then ``read_audit_view`` on SQLite and PostgreSQL: what it reads into ``held``, in a
number of queries that does not grow with the fleet; and ``unchanged_since``: a guard skip that judged another
resourceVersion is a change.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import event

from gpuaas.models import Outcome
from gpuaas.operations.reclaim import AuditView, plan, read_audit_view
from gpuaas.policies.reclaim import Decision, LastRow, SkipCause, reclaim_key, unchanged_since
from gpuaas.policy import FreeGoal, Mode, Policy, ReclaimPolicy
from gpuaas.store import AuditEntry, Store

NOW = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
ARGO = ("synced by Argo CD (argocd.argoproj.io/tracking-id: apps:apps/Deployment:team-a/inference): its next sync "
        "would undo the stop; to stop it, scale it down in Git")
NOT_HELD = ("the stop did not hold: the API server answered 200 but spec.replicas is 2 (the stop sets 0); nothing "
            "freed; not tried again while its spec is unchanged (generation 4)")


def decision(name: str, gpus: float = 1.0, *, uid: str | None = None, rv: str | None = "7",
             mode: Mode = Mode.apply) -> Decision:
    """A planned stop of Deployment team-a/``name``, idle one hour on ``gpus`` GPUs."""
    uid = f"uid-{name}" if uid is None else uid
    return Decision(kind="Deployment", namespace="team-a", name=name, uid=uid, tenant="team-a", gpus=gpus,
                    idle_seconds=3600.0, free=FreeGoal.compute, outcome=Outcome.planned, reason="idle 1h00m",
                    resource_version=rv, idempotency_key=reclaim_key(mode, "Deployment", "team-a", name, uid, NOW),
                    mode=mode, evidence={"window_minutes": 30.0})


def row(name: str, *, audit_id: int = 7, cause: str | None = SkipCause.gitops_managed, version: str | None = "7",
        outcome: str = Outcome.skipped, uid: str | None = None, reason: str = ARGO,
        refers_to: int | None = None) -> LastRow:
    """The newest audit row of Deployment team-a/``name``, as ``read_audit_view`` hands it over."""
    return LastRow(audit_id, NOW - timedelta(minutes=15), f"uid-{name}" if uid is None else uid, "apply", outcome,
                   None if cause is None else str(cause), version, reason, refers_to)


def view(name: str, last: LastRow) -> AuditView:
    """What ``read_audit_view`` hands over when Deployment team-a/``name``'s newest row is ``last``."""
    return AuditView(guard_skips={("Deployment", "team-a", name): last})


def policy(cap: int) -> Policy:
    return Policy(reclaim=ReclaimPolicy(max_actions_per_run=cap))


def outcomes(decisions: list[Decision]) -> dict[str, tuple[Outcome, SkipCause | None]]:
    return {d.name: (d.outcome, d.cause) for d in decisions}


def test_the_held_object_gives_its_place_under_the_cap_to_the_next() -> None:
    proposed = [decision("inference", gpus=8), decision("notebook", gpus=1)]
    before = plan(proposed, AuditView(), policy(1), Mode.apply, NOW).decisions
    assert outcomes(before) == {"inference": (Outcome.planned, None),
                                "notebook": (Outcome.deferred, SkipCause.over_cap)}

    planned = plan(proposed, view("inference", row("inference")), policy(1), Mode.apply, NOW)
    assert outcomes(planned.decisions) == {"inference": (Outcome.skipped, SkipCause.gitops_managed),
                                           "notebook": (Outcome.planned, None)}
    held = next(d for d in planned.decisions if d.name == "inference")
    assert held.reason == f"still managed by its GitOps controller (audit #7, unchanged since): {ARGO}"
    assert [d.name for d in planned.targets] == ["notebook"]


@pytest.mark.parametrize("newest", [
    row("inference", version="8"),
    row("inference", uid="uid-old"),
    row("inference", version=None),
    row("inference", cause=SkipCause.keda),
    row("inference", cause=SkipCause.reverted),
    row("inference", cause=None, outcome=Outcome.planned),
    row("inference", cause=SkipCause.gitops_managed, outcome=Outcome.deferred),
], ids=["another resourceVersion", "another uid", "no version recorded", "keda", "reverted",
        "a planned row since", "not a skip"])
def test_anything_else_is_a_candidate_again(newest: LastRow) -> None:
    proposed = [decision("inference", gpus=8), decision("notebook", gpus=1)]
    planned = plan(proposed, view("inference", newest), policy(1), Mode.apply, NOW)
    assert outcomes(planned.decisions) == {"inference": (Outcome.planned, None),
                                           "notebook": (Outcome.deferred, SkipCause.over_cap)}


def test_a_decision_without_a_resource_version_is_never_held() -> None:
    proposed = [decision("inference", gpus=8, rv=None)]
    [planned] = plan(proposed, view("inference", row("inference", version=None)), policy(1), Mode.apply, NOW).decisions
    assert planned.outcome == Outcome.planned


def test_a_failed_stop_is_named_by_its_intent_and_an_earlier_repeat_is_not_wrapped_again() -> None:
    proposed = [decision("inference", gpus=8)]
    failed = row("inference", audit_id=12, cause=SkipCause.stop_not_held, outcome=Outcome.failed, reason=NOT_HELD,
                 refers_to=11)
    [first] = plan(proposed, view("inference", failed), policy(1), Mode.apply, NOW).decisions
    assert (first.outcome, first.cause) == (Outcome.skipped, SkipCause.stop_not_held)
    assert first.reason == f"its stop still would not hold (audit #11, unchanged since): {NOT_HELD}"
    repeated = row("inference", audit_id=30, cause=SkipCause.stop_not_held, reason=first.reason)
    [second] = plan(proposed, view("inference", repeated), policy(1), Mode.apply, NOW).decisions
    assert second.reason == f"its stop still would not hold (audit #30, unchanged since): {NOT_HELD}"


def test_dry_run_and_apply_plan_alike() -> None:
    plans = [plan([decision("inference", gpus=8, mode=mode), decision("notebook", mode=mode)],
                  view("inference", row("inference")), policy(1), mode, NOW) for mode in (Mode.dry_run, Mode.apply)]
    assert [[(d.name, d.outcome, d.cause, d.reason) for d in p.decisions] for p in plans] == [[
        ("inference", Outcome.skipped, SkipCause.gitops_managed,
         f"still managed by its GitOps controller (audit #7, unchanged since): {ARGO}"),
        ("notebook", Outcome.planned, None, "idle 1h00m")]] * 2


# -- the property ----------------------------------------------------------------------------------------------

_TARGETS = st.lists(st.tuples(st.integers(1, 8), st.sampled_from(["7", "8"]),
                              st.sampled_from([None, SkipCause.gitops_managed, SkipCause.stop_not_held,
                                               SkipCause.keda]),
                              st.sampled_from(["7", "8", None])),
                    min_size=0, max_size=12)


@settings(max_examples=200, deadline=None)
@given(targets=_TARGETS, cap=st.integers(0, 5))
def test_held_objects_take_no_place_and_the_rest_are_capped_as_if_they_were_not_there(
        targets: list[tuple[int, str, SkipCause | None, str | None]], cap: int) -> None:
    proposed = [decision(f"d{i}", gpus=gpus, rv=rv) for i, (gpus, rv, _, _) in enumerate(targets)]
    held = {("Deployment", "team-a", f"d{i}"): row(f"d{i}", cause=cause, version=version)
            for i, (_, _, cause, version) in enumerate(targets) if cause is not None}
    decided = {d.name: d for d in plan(proposed, AuditView(guard_skips=held), policy(cap), Mode.apply, NOW).decisions}
    kept = {f"d{i}" for i, (_, rv, cause, version) in enumerate(targets)
            if cause in (SkipCause.gitops_managed, SkipCause.stop_not_held) and version == rv}
    assert {n for n, d in decided.items() if d.outcome == Outcome.skipped} == kept
    assert all(decided[n].cause == held[("Deployment", "team-a", n)].cause for n in kept)
    alone = {d.name: d for d in plan([d for d in proposed if d.name not in kept], AuditView(), policy(cap),
                                     Mode.apply, NOW).decisions}
    assert {n: (d.outcome, d.reason) for n, d in decided.items() if n not in kept} == {
        n: (d.outcome, d.reason) for n, d in alone.items()}
    assert sum(d.outcome == Outcome.planned for d in decided.values()) == min(cap, len(targets) - len(kept))


# -- what read_audit_view reads ----------------------------------------------------------------------------------



def _skip(name: str, at: datetime, cause: SkipCause, *, version: str | None = "7", outcome: str = Outcome.skipped,
          reason: str = ARGO, refers_to: int | None = None) -> AuditEntry:
    evidence: dict[str, Any] = {"window_minutes": 30.0, "cause": str(cause)}
    if version is not None:
        evidence["judged_version"] = version
    return AuditEntry(created_at=at, flow="reclaim", action="reclaim", kind="Deployment", namespace="team-a", name=name,
                      uid=f"uid-{name}", mode="apply", outcome=outcome, reason=reason, evidence=evidence,
                      refers_to=refers_to)


@contextmanager
def _selects(store: Store) -> Iterator[list[str]]:
    """The SELECTs on the audit log sent inside the block."""
    sent: list[str] = []

    def capture(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if "audit_log" in statement and statement.lstrip().upper().startswith("SELECT"):
            sent.append(statement)

    event.listen(store.engine, "before_cursor_execute", capture)
    try:
        yield sent
    finally:
        event.remove(store.engine, "before_cursor_execute", capture)


def test_the_view_holds_each_target_s_newest_row_of_a_kept_cause(any_store: Store) -> None:
    any_store.append(_skip("argo", NOW - timedelta(minutes=30), SkipCause.gitops_managed, version="6"))
    newest = any_store.append(_skip("argo", NOW - timedelta(minutes=15), SkipCause.gitops_managed))
    failed = any_store.append(_skip("refused", NOW - timedelta(hours=2), SkipCause.stop_not_held,
                                outcome=Outcome.failed, reason=NOT_HELD, refers_to=41))
    any_store.append(_skip("kedad", NOW - timedelta(minutes=15), SkipCause.keda))
    any_store.append(_skip("gone", NOW - timedelta(minutes=15), SkipCause.gitops_managed))  # not a target now
    any_store.append(_skip("daily", NOW - timedelta(hours=20), SkipCause.gitops_managed))  # a run a day, or by hand
    any_store.append(_skip("old", NOW - timedelta(hours=26), SkipCause.gitops_managed))  # further back than it looks
    proposed = [decision(n) for n in ("argo", "refused", "kedad", "daily", "old", "fresh")]
    view = read_audit_view(any_store, proposed, NOW, skips_every=timedelta(minutes=60))
    assert set(view.guard_skips) == {("Deployment", "team-a", n) for n in ("argo", "refused", "daily")}
    argo = view.guard_skips[("Deployment", "team-a", "argo")]
    assert (argo.audit_id, argo.version, argo.reason, argo.cause) == (newest.id, "7", ARGO, "gitops-managed")
    refused = view.guard_skips[("Deployment", "team-a", "refused")]
    assert (refused.audit_id, refused.refers_to, refused.outcome, refused.reason) == (
        failed.id, 41, Outcome.failed, NOT_HELD)


def test_the_view_is_read_in_as_many_queries_for_a_large_fleet_as_for_a_small_one(any_store: Store) -> None:
    counts = []
    for size in (2, 40):
        names = [f"n{size}-{i}" for i in range(size)]
        for name in names:
            any_store.append(_skip(name, NOW - timedelta(minutes=15), SkipCause.gitops_managed))
        with _selects(any_store) as sent:
            view = read_audit_view(any_store, [decision(n) for n in names], NOW, skips_every=timedelta(minutes=60))
        assert len(view.guard_skips) == size
        counts.append(len(sent))
    assert counts[0] == counts[1], counts


def test_a_guard_skip_that_judged_another_version_is_a_change() -> None:
    last = row("argo", version="7")

    def since(last: LastRow, version: str, cause: SkipCause = SkipCause.gitops_managed) -> LastRow | None:
        return unchanged_since(last, uid="uid-argo", mode="apply", outcome=Outcome.skipped, cause=cause, at=NOW,
                               every=timedelta(minutes=60), version=version)

    assert since(last, "7") == last
    assert since(last, "8") is None
    assert since(replace(last, version=None), "7") is None
    keda = replace(last, cause=str(SkipCause.keda))  # a cause the object does not keep: the version is not compared
    assert since(keda, "8", SkipCause.keda) == keda
