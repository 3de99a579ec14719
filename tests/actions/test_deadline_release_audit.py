"""A deadline release is audited like a hold: the intent first, a completion whatever happens, recovery after a kill.

A stand-in writer (Workloads by name, merge patches, failures on demand; no cluster) and a SQLite store.
Covers: the intent row (the live ``spec.active`` and ``spec.priority``, the hold) is on record before the
patch is sent; every way a release ends (released, the object deleted, not held, 409 twice, a 403 on the
read or on the patch, a lost answer) leaves a row with its outcome, so ``gpuaas audit list`` shows it; a
run killed after the patch landed, or before, leaves its intent open and the next sweep closes it from the
object (``released`` or ``failed``, then released again under an intent of its own), never one still in
flight or one whose object cannot be read; the reclaim run's recovery leaves it alone. The sweep releases
every due hold gpuaas recorded, a mark with a ``release_at`` lacking a zone or none included, no mark it did
not record (a ``before`` edited by hand, an unreadable one), and one Workload it cannot release keeps no other held.
Each test's store holds the hold of ``wl`` (audit #1, applied as #2) that ``MARK`` names.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuaas.actions import recover_interrupted
from gpuaas.actions.deadline_holds import (
    RELEASE_ACTION,
    SETTLE_AFTER,
    apply_nudges,
    recover_releases,
    release_due,
    undo_holds,
)
from gpuaas.errors import Conflict, Forbidden, NotFound, TransientError
from gpuaas.models import Outcome
from gpuaas.operations.deadlines import release_sweep
from gpuaas.policies.deadlines import HOLD_ANNOTATION, Nudge
from gpuaas.policy import Mode
from gpuaas.store import AuditEntry, Store

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
MARK = {"audit_id": 1, "release_at": (NOW - timedelta(minutes=1)).isoformat(), "before": {"active": None}}
RELEASE = Nudge("release", "ns", "wl", "release time has come")


class Killed(BaseException):
    """The flow process dying mid-release (SIGKILL): nothing after it runs, no handler sees it."""


class Cluster:
    """GET and merge-PATCH of Workloads by name; ``fail`` raises on the named verb, after the write when ``landed``."""

    def __init__(self, *objs: dict[str, Any]) -> None:
        self.objs = {o["metadata"]["name"]: o for o in objs}
        self.fail: dict[tuple[str, str], BaseException] = {}
        self.landed = False
        self.on_patch: Callable[[], None] = lambda: None
        self.gets = 0
        self.patches: list[dict[str, Any]] = []
        self.events: list[tuple[str, str]] = []

    def get(self, kind: str, namespace: str, name: str, *, version: str | None = None) -> dict[str, Any]:
        self.gets += 1
        if ("get", name) in self.fail:
            raise self.fail[("get", name)]
        if name not in self.objs:
            raise NotFound("not found", status=404, reason="Not Found", kind=kind, namespace=namespace, name=name)
        return copy.deepcopy(self.objs[name])

    def patch(self, kind: str, namespace: str, name: str, body: dict[str, Any], *,
              version: str | None = None) -> dict[str, Any]:
        self.on_patch()
        error = self.fail.get(("patch", name))
        if error is not None and not self.landed:
            raise error
        obj = self.objs[name]
        obj["spec"].update(body.get("spec") or {})
        for key, value in body["metadata"].get("annotations", {}).items():
            if value is None:
                obj["metadata"]["annotations"].pop(key, None)
            else:
                obj["metadata"]["annotations"][key] = value
        obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
        self.patches.append(body)
        if error is not None:
            raise error
        return copy.deepcopy(obj)

    def record_event(self, obj: dict[str, Any], reason: Any, note: str) -> bool:
        self.events.append((str(reason), note))
        return True

    def held(self, name: str = "wl") -> bool:
        return HOLD_ANNOTATION in self.objs[name]["metadata"]["annotations"]


def held(name: str = "wl", mark: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name, "uid": f"uid-{name}", "resourceVersion": "7",
                         "annotations": {HOLD_ANNOTATION: json.dumps(MARK if mark is None else mark)}},
            "spec": {"active": False, **spec}, "status": {}}


def forbidden(verb: str) -> Forbidden:
    return Forbidden('workloads.kueue.x-k8s.io "wl" is forbidden', status=403, reason="Forbidden", kind="Workload",
                     namespace="ns", name="wl", verb=verb)


def record_hold(store: Store, name: str = "wl", before: dict[str, Any] | None = None) -> dict[str, Any]:
    """The rows the deadlines flow writes for a hold it applied on ``name``; returns the mark it put there."""
    before = {"active": None} if before is None else before
    intent = store.append(AuditEntry(flow="deadlines", action="deadline-hold", kind="Workload", namespace="ns",
                                     name=name, uid=f"uid-{name}", mode="apply", outcome="planned",
                                     reason="planned start later", before=before,
                                     idempotency_key=f"deadline-hold/ns/{name}/"))
    store.append(AuditEntry(flow="deadlines", action="deadline-hold", kind="Workload", namespace="ns", name=name,
                            uid=f"uid-{name}", mode="apply", outcome="applied", reason="planned start later",
                            before=before, refers_to=intent.id, idempotency_key=f"deadline-hold/ns/{name}/"))
    return {**MARK, "audit_id": intent.id, "before": before}


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(f"sqlite:///{tmp_path}/gpuaas.db")
    assert record_hold(opened) == MARK
    yield opened
    opened.close()


def rows(store: Store) -> list[AuditEntry]:
    """The rows of the releases (the hold's own rows left out)."""
    return [r for r in store.audit(flow="deadlines", limit=None) if r.action == RELEASE_ACTION]


def release(store: Store, cluster: Cluster) -> Any:
    [result] = apply_nudges([RELEASE], store, cluster, mode=Mode.apply, flow_run_id=None)  # type: ignore[arg-type]
    return result


def later() -> datetime:
    """A run after the one that wrote the intent, past the time a release may still be in flight."""
    return datetime.now(UTC) + SETTLE_AFTER + timedelta(minutes=1)


def test_the_intent_with_the_live_state_and_the_hold_is_on_record_before_the_patch(store: Store) -> None:
    cluster = Cluster(held(priority=5))
    at_patch: list[list[AuditEntry]] = []
    cluster.on_patch = lambda: at_patch.append(rows(store))
    result = release(store, cluster)
    assert result.result == Outcome.released and cluster.objs["wl"]["spec"]["active"] is True and not cluster.held()
    [[intent]] = at_patch
    assert (intent.action, intent.outcome, intent.mode, intent.refers_to, intent.uid) == (
        RELEASE_ACTION, "planned", "apply", 1, "uid-wl")
    assert intent.before == {"active": False, "priority": 5, "resourceVersion": "7", "hold": MARK}
    assert intent.after == {"active": True}
    [_, done] = rows(store)
    assert (done.id, done.outcome, done.refers_to) == (result.audit_id, "released", intent.id)
    assert done.before == intent.before and done.after == {"active": True, "resourceVersion": "8"}
    assert cluster.events == [("Released", "Released by gpuaas: release time has come (the hold of audit #1)")]


@pytest.mark.parametrize(("setup", "outcome", "words", "intent"), [
    (lambda c: c.objs.pop("wl"), "skipped", "object deleted", False),
    (lambda c: c.objs["wl"]["metadata"]["annotations"].clear(), "skipped", "not held by gpuaas", False),
    (lambda c: c.fail.update({("get", "wl"): forbidden("reading")}), "failed",
     "the Workload could not be read: reading Workload ns/wl: 403 Forbidden", False),
    (lambda c: c.fail.update({("patch", "wl"): forbidden("patching")}), "failed",
     "patching Workload ns/wl: 403 Forbidden", True),
    (lambda c: c.fail.update({("patch", "wl"): Conflict("modified", status=409, reason="Conflict")}), "failed",
     "409 Conflict twice: released next run", True),
], ids=["deleted", "not-held", "read-forbidden", "patch-forbidden", "conflict-twice"])
def test_every_release_that_does_not_happen_leaves_a_row_saying_why(
        store: Store, setup: Callable[[Cluster], object], outcome: str, words: str, intent: bool) -> None:
    cluster = Cluster(held())
    setup(cluster)
    result = release(store, cluster)
    assert result.result == outcome and words in result.reason
    written = rows(store)
    assert written[-1].id == result.audit_id and written[-1].outcome == outcome and words in written[-1].reason
    if intent:  # the write was attempted: its intent came first, the row closes it
        assert [r.outcome for r in written] == ["planned", outcome] and written[-1].refers_to == written[0].id
    else:  # refused before any write: the row alone
        assert [r.outcome for r in written] == [outcome] and written[0].refers_to is None
    assert all(r.action == RELEASE_ACTION for r in written) and cluster.patches == []


@pytest.mark.parametrize(("landed", "outcome", "words"), [
    (True, "released", "read back: the hold is gone from the object"),
    (False, "failed", "read back: the object still carries the hold: the release did not land"),
], ids=["landed", "not-landed"])
def test_a_lost_answer_is_settled_from_the_object(store: Store, landed: bool, outcome: str, words: str) -> None:
    cluster = Cluster(held())
    cluster.fail[("patch", "wl")] = TransientError("patching Workload ns/wl: connection reset")
    cluster.landed = landed
    result = release(store, cluster)
    assert result.result == outcome and "the response was lost (patching Workload ns/wl: connection reset)" in result.reason
    assert words in result.reason and [r.outcome for r in rows(store)] == ["planned", outcome]
    # the Workload's team reads the release in kubectl describe whether or not its answer came back
    assert cluster.events == ([("Released", "Released by gpuaas: release time has come (the hold of audit #1)")]
                              if landed else [])


def test_a_lost_answer_that_cannot_be_read_back_leaves_the_intent_to_the_next_sweep(store: Store) -> None:
    cluster = Cluster(held())
    cluster.fail[("patch", "wl")] = TransientError("patching Workload ns/wl: timed out")
    cluster.landed = True
    cluster.on_patch = lambda: cluster.fail.update({("get", "wl"): TransientError("reading: timed out")})
    result = release(store, cluster)
    [intent] = rows(store)
    assert result.result == Outcome.unknown and result.audit_id == intent.id and intent.outcome == "planned"
    del cluster.fail[("get", "wl")]
    [settled] = recover_releases(store, cluster, flow_run_id="next", now=later())  # type: ignore[arg-type]
    assert (settled.outcome, settled.refers_to) == ("released", intent.id)


def test_a_run_killed_after_the_patch_landed_is_closed_as_released_by_the_next_sweep(store: Store) -> None:
    cluster = Cluster(held())
    cluster.fail[("patch", "wl")] = Killed()
    cluster.landed = True
    with pytest.raises(Killed):
        release(store, cluster)
    [intent] = rows(store)  # the record survives the kill: the prior state is on file
    assert intent.outcome == "planned" and intent.before is not None and intent.before["hold"] == MARK
    assert not cluster.held()
    assert recover_releases(store, cluster, flow_run_id="next", now=datetime.now(UTC)) == []  # type: ignore[arg-type]
    [settled] = recover_releases(store, cluster, flow_run_id="next", now=later())  # type: ignore[arg-type]
    assert (settled.action, settled.outcome, settled.refers_to, settled.flow_run_id) == (
        RELEASE_ACTION, "released", intent.id, "next")
    assert settled.reason == ("recovered: the release had reached the object before the interruption; "
                              "the hold is gone from the object")
    assert recover_releases(store, cluster, flow_run_id="again", now=later()) == []  # type: ignore[arg-type]
    assert len(cluster.patches) == 1  # recovery only reads


def test_a_run_killed_before_the_patch_is_closed_as_failed_and_released_again(store: Store) -> None:
    cluster = Cluster(held())
    cluster.fail[("patch", "wl")] = Killed()
    with pytest.raises(Killed):
        release(store, cluster)
    assert cluster.held() and cluster.patches == []
    del cluster.fail[("patch", "wl")]
    workloads = [copy.deepcopy(cluster.objs["wl"])]
    [done] = release_sweep(workloads, store, cluster, now=later(), flow_run_id="next").nudges  # type: ignore[arg-type]
    first, settled, second, released = rows(store)
    assert (settled.outcome, settled.refers_to) == ("failed", first.id)
    assert settled.reason.startswith("recovered: interrupted before the release reached the object; the object "
                                     "still carries the hold")
    assert (second.outcome, released.outcome, released.refers_to) == ("planned", "released", second.id)
    assert done.result == Outcome.released and not cluster.held() and cluster.objs["wl"]["spec"]["active"] is True


@pytest.mark.parametrize(("setup", "outcome"), [
    (lambda c: c.fail.update({("get", "wl"): TransientError("reading: connection refused")}), None),
    (lambda c: c.objs.pop("wl"), "skipped"),
], ids=["unreadable", "deleted"])
def test_recovery_never_guesses(store: Store, setup: Callable[[Cluster], object], outcome: str | None) -> None:
    cluster = Cluster(held())
    cluster.fail[("patch", "wl")] = Killed()
    with pytest.raises(Killed):
        release(store, cluster)
    del cluster.fail[("patch", "wl")]
    setup(cluster)
    settled = recover_releases(store, cluster, flow_run_id="next", now=later())  # type: ignore[arg-type]
    assert [r.outcome for r in settled] == ([outcome] if outcome else [])  # unreadable: left open for the next run


def test_the_reclaim_runs_recovery_leaves_a_release_intent_alone(store: Store) -> None:
    cluster = Cluster(held())
    cluster.fail[("patch", "wl")] = Killed()
    with pytest.raises(Killed):
        release(store, cluster)
    [intent] = rows(store)
    assert (intent.action, intent.outcome, intent.mode) == (RELEASE_ACTION, "planned", "apply")  # open, in apply mode
    gets = cluster.gets
    assert recover_interrupted(store, cluster, flow_run_id=None, now=later()) == []  # type: ignore[arg-type]
    assert cluster.gets == gets


def test_the_undo_of_a_hold_is_audited_as_its_release(store: Store) -> None:
    cluster = Cluster(held())
    cluster.fail[("patch", "wl")] = forbidden("patching")
    [undone] = undo_holds(store, cluster, [MARK["audit_id"]])  # type: ignore[arg-type]
    assert undone.result == Outcome.failed and "403 Forbidden" in undone.reason
    intent, failed = rows(store)
    assert (intent.outcome, intent.refers_to, failed.outcome, failed.refers_to) == (
        "planned", MARK["audit_id"], "failed", intent.id)
    assert undone.audit_id == failed.id


@pytest.mark.parametrize(("fault", "outcome", "words"), [
    (None, Outcome.skipped, "object deleted"),
    (TransientError("503 Service Unavailable"), Outcome.failed, "could not be read: 503"),
])
def test_the_undo_of_a_hold_whose_workload_cannot_be_found_is_audited(
        store: Store, fault: Exception | None, outcome: Outcome, words: str) -> None:
    cluster = Cluster(held())
    if fault is None:
        cluster.objs.pop("wl")
    else:
        cluster.fail[("get", "wl")] = fault
    [undone] = undo_holds(store, cluster, [MARK["audit_id"]])  # type: ignore[arg-type]
    assert undone.result == outcome and words in undone.reason
    [row] = rows(store)
    assert (row.action, row.outcome, row.refers_to, row.mode) == (RELEASE_ACTION, outcome, MARK["audit_id"], "apply")
    assert words in row.reason and undone.audit_id == row.id
    assert cluster.patches == []


def test_the_sweep_releases_every_due_hold_gpuaas_recorded_and_no_other(store: Store) -> None:
    naive = (NOW - timedelta(minutes=5)).replace(tzinfo=None).isoformat()
    later = (NOW + timedelta(hours=1)).replace(tzinfo=None).isoformat()
    marks = {name: record_hold(store, name) for name in ("naive", "naive-later", "refused", "no-time")}
    demoted = record_hold(store, "hand-edited", {"priority": 9})
    cluster = Cluster(
        held("naive", {**marks["naive"], "release_at": naive}),
        held("naive-later", {**marks["naive-later"], "release_at": later}),
        held("refused", marks["refused"]),
        held("no-time", {k: v for k, v in marks["no-time"].items() if k != "release_at"}),
        held("hand-edited", {**demoted, "release_at": naive, "before": {"priority": "high"}}, priority=8),
        held("garbage", {"audit_id": 6, "release_at": 1234, "before": "active"}),
    )
    cluster.fail[("patch", "refused")] = forbidden("patching")
    workloads = [copy.deepcopy(o) for o in cluster.objs.values()]
    results = release_due(workloads, store, cluster, NOW, flow_run_id=None)  # type: ignore[arg-type]
    assert {r.nudge.name: r.result for r in results} == {
        "naive": "released", "refused": "failed", "no-time": "released", "hand-edited": "skipped",
        "garbage": "skipped"}
    assert [n for n in cluster.objs if cluster.held(n)] == ["naive-later", "refused", "hand-edited", "garbage"]
    assert cluster.objs["hand-edited"]["spec"]["priority"] == 8  # a mark gpuaas did not write is never written
    assert cluster.objs["garbage"]["spec"]["active"] is False
