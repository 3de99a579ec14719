"""A hold whose read or patch the API does not answer cleanly: audited as what happened, the other nudges go on.

The stand-in writer of the release tests (no cluster) and a SQLite store. A hold that cannot be read is
``failed`` with nothing written, and the next hold in the run is still written; a hold whose patch got no
answer is read back: ``applied`` when the object carries this intent's mark, ``failed`` when it does not,
``unknown`` when it cannot be read either.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuaas.actions.deadline_holds import apply_nudges
from gpuaas.errors import TransientError
from gpuaas.models import Outcome
from gpuaas.policies.deadlines import HOLD_ANNOTATION, Nudge
from gpuaas.policy import Mode
from gpuaas.store import Store
from tests.actions.test_deadline_release_audit import NOW, Cluster, forbidden


def pending(name: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name, "uid": f"uid-{name}", "resourceVersion": "7",
                         "annotations": {}}, "spec": {"active": True, "priority": 0}, "status": {}}


def hold(name: str) -> Nudge:
    return Nudge("hold", "ns", name, "its deadline needs the GPUs first", release_at=NOW + timedelta(hours=1),
                 uid=f"uid-{name}", resource_version="7")


def lost() -> TransientError:
    return TransientError("patching Workload ns/wl: no answer (read timed out)")


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(f"sqlite:///{tmp_path}/gpuaas.db")
    yield opened
    opened.close()


def test_an_unreadable_workload_is_audited_and_the_next_hold_is_still_written(store: Store) -> None:
    cluster = Cluster(pending("wl"), pending("other"))
    cluster.fail[("get", "wl")] = forbidden("reading")
    first, second = apply_nudges([hold("wl"), hold("other")], store, cluster, mode=Mode.apply,  # type: ignore[arg-type]
                                 flow_run_id=None)
    assert first.result == Outcome.failed and first.reason.startswith("not read, nothing written: ")
    assert [r.outcome for r in store.audit(limit=None) if r.name == "wl"] == [Outcome.failed]
    assert second.result == Outcome.applied and cluster.held("other") and not cluster.held("wl")


@pytest.mark.parametrize(("landed", "readable", "expected"), [
    (True, True, Outcome.applied), (False, True, Outcome.failed), (True, False, Outcome.unknown)])
def test_a_lost_answer_is_settled_from_the_object(store: Store, landed: bool, readable: bool,
                                                   expected: Outcome) -> None:
    cluster = Cluster(pending("wl"))
    cluster.fail[("patch", "wl")] = lost()
    cluster.landed = landed

    def unreadable_from_now_on() -> None:
        if not readable:
            cluster.fail[("get", "wl")] = lost()

    cluster.on_patch = unreadable_from_now_on
    [result] = apply_nudges([hold("wl")], store, cluster, mode=Mode.apply, flow_run_id=None)  # type: ignore[arg-type]
    assert result.result == expected
    rows = [r for r in store.audit(limit=None) if r.name == "wl"]
    assert [r.outcome for r in rows] == [Outcome.planned, expected]
    assert rows[1].refers_to == rows[0].id == result.audit_id
    assert cluster.held() == landed  # the object says what happened, whatever the row could tell
    if landed:
        assert f'"audit_id": {rows[0].id}' in cluster.objs["wl"]["metadata"]["annotations"][HOLD_ANNOTATION]
    # a hold found landed is told to the Workload's team as if the answer had come: why, and how to release it
    assert cluster.events == ([("HeldForDeadline", f"Held by gpuaas until {(NOW + timedelta(hours=1)).isoformat()}: "
                                f"its deadline needs the GPUs first. Audit #{rows[0].id}; to release it now: "
                                f"gpuaas undo {rows[0].id}")] if expected == Outcome.applied else [])
