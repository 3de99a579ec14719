"""``drift``: whether the live object is still the snapshot's, the one check every write makes, in the same words
for a stop and for a deadline nudge, each mapped to its own outcome."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaas.actions._drift import Drift, drift
from gpuaas.actions._hold_rules import changed_since
from gpuaas.actions.reclaim import _changed
from gpuaas.models import Outcome
from gpuaas.policies.deadlines import Nudge, NudgeAction
from gpuaas.policies.reclaim import Decision, SkipCause
from gpuaas.policy import FreeGoal, Mode


def _obj(uid: str = "u1", rv: str = "7", **meta: Any) -> dict[str, Any]:
    return {"metadata": {"uid": uid, "resourceVersion": rv, **meta}, "spec": {"replicas": 1}}


@pytest.mark.parametrize(("uid", "rv", "live", "expected"), [
    ("u1", "7", _obj(), None),
    (None, "7", _obj(), Drift.unknown),
    ("u1", "", _obj(), Drift.unknown),
    ("u1", "7", _obj(uid="u2", rv="9"), Drift.recreated),  # a new uid is named as such, not as an edit
    ("u1", "7", _obj(rv="8"), Drift.edited),
])
def test_the_live_object_against_the_snapshots(uid: str | None, rv: str, live: dict[str, Any],
                                               expected: Drift | None) -> None:
    found = drift(uid, rv, live)
    assert (found and found[0]) == expected


def _decision(uid: str | None = "u1", rv: str | None = "7") -> Decision:
    return Decision(kind="Notebook", namespace="team-a", name="nb", uid=uid, tenant="team-a", gpus=1.0,
                    idle_seconds=3600.0, free=FreeGoal.compute, outcome=Outcome.planned, reason="idle",
                    resource_version=rv, idempotency_key="k", mode=Mode.dry_run)


def test_a_stop_and_a_nudge_refuse_a_recreated_object_in_the_same_words() -> None:
    live = _obj(uid="u2", rv="9")
    nudge = Nudge(action=NudgeAction.hold, namespace="team-a", name="nb", reason="r", uid="u1", resource_version="7")
    stop = _changed(_decision(), live)
    held = changed_since(nudge, live)
    assert stop is not None and held is not None
    assert (stop[0], held[0]) == (SkipCause.recreated, Outcome.changed)
    assert stop[1] == held[1] and "u1 in the snapshot, u2 now" in stop[1]


def test_a_nudge_without_identity_is_skipped_not_changed() -> None:
    nudge = Nudge(action=NudgeAction.hold, namespace="team-a", name="nb", reason="r")
    assert changed_since(nudge, _obj()) == (
        Outcome.skipped, "the snapshot holds no uid and resourceVersion for it: no write on unknown state")


def test_an_object_being_deleted_is_named_so_not_as_edited() -> None:
    deleting = _obj(rv="8", deletionTimestamp="2026-12-01T02:00:00Z")
    found = _changed(_decision(), deleting)
    assert found is not None and found[0] is SkipCause.being_deleted
    assert _changed(_decision(), _obj(rv="8")) is not None
    assert _changed(_decision(), _obj(rv="8"))[0] is SkipCause.changed  # type: ignore[index]
    assert _changed(_decision(uid=None), deleting)[0] is SkipCause.no_uid  # type: ignore[index]
