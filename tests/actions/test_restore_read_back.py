"""A restore whose answer was lost is read back from the object; a recreated object says nothing of it."""

from __future__ import annotations

from typing import Any

from gpuaas.actions._restore import _read_back
from gpuaas.models import Outcome
from gpuaas.store import AuditEntry

RECLAIM = AuditEntry(id=7, flow="reclaim", action="reclaim", kind="Deployment", namespace="ns", name="dep",
                     uid="uid-when-reclaimed", mode="apply", outcome="planned", reason="idle",
                     before={"spec": {"replicas": 1}})


class _Writer:
    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        return self.obj


def test_an_object_recreated_at_the_prior_state_is_not_taken_for_a_landed_restore() -> None:
    recreated = {"metadata": {"uid": "another-uid", "annotations": {}}, "spec": {"replicas": 1}}
    outcome, why, landed = _read_back(_Writer(recreated), RECLAIM)  # type: ignore[arg-type, misc]
    assert outcome == Outcome.failed and "a different object now has this name" in why and landed is None


def test_the_same_object_at_the_prior_state_is_a_landed_restore() -> None:
    same = {"metadata": {"uid": "uid-when-reclaimed", "annotations": {}}, "spec": {"replicas": 1}}
    outcome, _, landed = _read_back(_Writer(same), RECLAIM)  # type: ignore[arg-type, misc]
    assert outcome == Outcome.restored and landed == same
