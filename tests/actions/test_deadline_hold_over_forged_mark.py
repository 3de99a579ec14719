"""A hold or demotion the plan made over a mark gpuaas did not record (``Nudge.over_mark``), as the action writes it.

A stand-in writer (``Cluster``: Workloads by name, merge patches) and a SQLite store. ``wl`` is pending and active
at priority 5, under its team's mark ``{"before": {"priority": 101}}``. A demotion over that very mark is written:
priority 4, and the new mark and the intent row record the live priority 5, not the 101 the old mark claimed (a
release of it then puts back 5). A hold over that mark records ``active: true``. A nudge naming another mark than
the one on the object, or none, is refused as held already, writing nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuaas.actions.deadline_holds import apply_nudges
from gpuaas.models import Outcome
from gpuaas.policies.deadlines import HOLD_ANNOTATION, Nudge
from gpuaas.policy import Mode
from gpuaas.store import Store
from tests.actions.test_deadline_release_audit import NOW, Cluster

FORGED = json.dumps({"before": {"priority": 101}})


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(f"sqlite:///{tmp_path}/gpuaas.db")
    yield opened
    opened.close()


def _pending(mark: str = FORGED) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": "wl", "uid": "uid-wl", "resourceVersion": "7",
                         "annotations": {HOLD_ANNOTATION: mark}},
            "spec": {"active": True, "priority": 5}, "status": {}}


def _nudge(action: str, over: str | None) -> Nudge:
    return Nudge(action, "ns", "wl", "plan", release_at=NOW, uid="uid-wl", resource_version="7", over_mark=over)


@pytest.mark.parametrize(("action", "before", "spec"), [
    ("demote", {"priority": 5}, {"active": True, "priority": 4}),
    ("hold", {"active": True}, {"active": False, "priority": 5}),
], ids=["demotion", "hold"])
def test_a_nudge_over_the_forged_mark_records_the_live_prior_state(
        store: Store, action: str, before: dict[str, Any], spec: dict[str, Any]) -> None:
    cluster = Cluster(_pending())
    [done] = apply_nudges([_nudge(action, FORGED)], store, cluster, mode=Mode.apply, flow_run_id=None)  # type: ignore[arg-type]
    assert done.result == Outcome.applied, done.reason
    obj = cluster.objs["wl"]
    mark = json.loads(obj["metadata"]["annotations"][HOLD_ANNOTATION])
    assert obj["spec"] == spec and mark["before"] == before and mark["audit_id"] == done.audit_id
    intent = store.get_audit(done.audit_id or 0)
    assert intent is not None and intent.before == before


@pytest.mark.parametrize("over", [None, json.dumps({"before": {"priority": 7}})], ids=["no-over-mark", "another-mark"])
def test_a_nudge_not_naming_the_mark_on_the_object_is_refused(store: Store, over: str | None) -> None:
    cluster = Cluster(_pending())
    [done] = apply_nudges([_nudge("demote", over)], store, cluster, mode=Mode.apply, flow_run_id=None)  # type: ignore[arg-type]
    assert (done.result, done.reason) == (Outcome.skipped, "already held by gpuaas")
    assert cluster.patches == [] and cluster.objs["wl"]["metadata"]["annotations"][HOLD_ANNOTATION] == FORGED
