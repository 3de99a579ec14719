"""How an undo run ends, without a cluster: the reclaim flow's ``undo`` and the deadlines flow's ``undo``.

An undo is a write to the cluster like any other: one the cluster refused (a 403: the writer role
is not bound) or whose answer was lost and could not be read back ends the run Failed, with a
headline as its message, so it reaches the failure notification and shows red in the runs list
(docs/prefect.md, "What the UI shows"). A deadlines undo ends as every other run does: its headline
the state's message and the run named by its gist, not a Prefect-generated name and no message.
The undo itself is faked here (its real path: tests/flows/test_reclaim_flow.py,
test_deadline_nudges_flow.py); this checks only the flow's ending. An id that names no audit row
is refused before the undo, as an incident review refuses it: the run ends Failed, named after it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

import pytest

from flows import RunFailed
from flows._outcome import run_name
from gpuaas.actions import UndoResult
from gpuaas.actions.deadline_holds import NudgeResult
from gpuaas.models import Outcome
from gpuaas.operations.deadlines import DeadlinesResult
from gpuaas.policies.deadlines.nudges import Nudge, NudgeAction

pytestmark = [pytest.mark.flow, pytest.mark.usefixtures("prefect_harness")]

REFUSED = "patching Deployment team-a/chat: 403 Forbidden: bind gpuaas-reclaimer"


@contextmanager
def _no_lock(*_: Any) -> Iterator[None]:
    yield


def _flow_run_name(flow_run_id: UUID) -> str:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.read_flow_run(flow_run_id).name


def _reclaim_undo(result: Outcome, monkeypatch: pytest.MonkeyPatch) -> Any:
    import flows.reclaim as module

    undone = UndoResult(audit_id=7, result=result, message=REFUSED if result is Outcome.failed else "restored",
                        kind="Deployment", namespace="team-a", name="chat", action="reclaim",
                        subject="Deployment team-a/chat")
    monkeypatch.setattr(module, "cluster_writes", _no_lock)
    monkeypatch.setattr(module, "check_undo_ids", lambda settings, ids: None)  # #7 is in no store here
    monkeypatch.setattr(module, "undo_actions", lambda settings, ids: [undone])
    return module.reclaim(undo=[7], return_state=True)


def test_a_reclaim_undo_the_cluster_refused_ends_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    state = _reclaim_undo(Outcome.failed, monkeypatch)
    assert state.is_failed(), state.message
    error = state.result(raise_on_failure=False)
    assert isinstance(error, RunFailed) and error.result["undo"][0]["result"] == "failed"  # the CLI still prints it
    assert state.message == error.result["headline"]


def test_a_reclaim_undo_that_restored_stays_completed(monkeypatch: pytest.MonkeyPatch) -> None:
    state = _reclaim_undo(Outcome.restored, monkeypatch)
    assert state.is_completed(), state.message
    assert state.result()["undo"][0]["result"] == "restored"


def test_a_reclaim_undo_of_an_id_no_audit_row_has_ends_failed_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import flows.reclaim as module
    from gpuaas.errors import ConfigError
    from gpuaas.settings import load_settings
    from gpuaas.store import open_store

    open_store(load_settings()).close()  # an audit log without #99999
    touched: list[str] = []

    @contextmanager
    def lock(*_: Any) -> Iterator[None]:
        touched.append("lock")
        yield

    monkeypatch.setattr(module, "cluster_writes", lock)
    monkeypatch.setattr(module, "undo_actions", lambda settings, ids: touched.append("undo") or [])
    state = module.reclaim(undo=[99999], return_state=True)
    assert state.is_failed(), state.message
    error = state.result(raise_on_failure=False)
    line = "undo: no audit row #99999 (see `gpuaas audit list`); nothing undone"
    assert isinstance(error, ConfigError) and str(error) == line
    assert state.message is not None and line in state.message and "\n" not in state.message
    assert _flow_run_name(state.state_details.flow_run_id) == "undo: no audit row #99999"
    assert touched == []  # refused before the writes were taken, nothing undone


def _deadlines_undo(result: Outcome, reason: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    import flows.deadlines as module

    nudge = Nudge(NudgeAction.release, "team-a", "train-1", "undo of audit #7")
    undone = DeadlinesResult((NudgeResult(nudge, result, reason, 8),))
    monkeypatch.setattr(module, "_writes_lock", _no_lock)
    monkeypatch.setattr(module, "undo_deadline_holds", lambda settings, ids: undone)
    return module.deadlines(undo=[7], return_state=True)


def test_a_deadlines_undo_ends_with_its_headline_and_is_named_by_it(monkeypatch: pytest.MonkeyPatch) -> None:
    state = _deadlines_undo(Outcome.released, "undo of audit #7", monkeypatch)
    assert state.is_completed(), state.message
    result = state.result()
    assert result["undo"][0]["result"] == "released"
    assert state.message and state.message == result["headline"] and "1 released" in state.message
    assert _flow_run_name(state.state_details.flow_run_id) == run_name(state.message)


def test_a_deadlines_undo_the_cluster_refused_ends_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    state = _deadlines_undo(Outcome.failed, "patching Workload team-a/train-1: 403 Forbidden", monkeypatch)
    assert state.is_failed(), state.message
    error = state.result(raise_on_failure=False)
    assert isinstance(error, RunFailed) and error.result["undo"][0]["result"] == "failed"
    assert "1 failed" in str(state.message) and "403" in str(state.message)
