"""An undo run shows the rows its headline points at: "The other 3: see each row's result" names rows on its page.

``gpuaas undo`` prints a table of what became of each audit id; a run started from the Prefect UI had only its
headline, and its log named an id that is no change as ``undo #987654 None: skipped …``. Real parts: the embedded
cluster, the store, the Prefect test server.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpuaas.actions import UndoResult
from gpuaas.models import Outcome
from reports.reclaim import undo_line, undo_markdown
from tests.scenarios import embedded, point_at

MISSING = 987654


def test_each_id_is_a_bullet_under_the_headline() -> None:
    restores = [UndoResult(MISSING, Outcome.skipped, f"no audit row #{MISSING}: nothing undone"),
                UndoResult(3, Outcome.restored, "restored (resourceVersion 56)", subject="Deployment team-a/dep",
                           restore_audit_id=12, action="reclaim")]
    lines = undo_markdown(restores).splitlines()
    assert lines[0] == f"Restored 1 of 2 changes (audit 3). #{MISSING} skipped: no audit row #{MISSING}: nothing undone."
    assert lines[-2:] == [f"- `#{MISSING}`: skipped: no audit row #{MISSING}: nothing undone",
                          "- `#3` Deployment team-a/dep: restored: restored (resourceVersion 56); restore audit #12"]
    assert undo_line(restores[0]) == f"#{MISSING}: skipped: no audit row #{MISSING}: nothing undone"  # no "None"


@pytest.mark.integration
@pytest.mark.flow
def test_an_undo_run_publishes_its_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefect_harness: None) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, LogFilter, LogFilterFlowRunId

    from flows.reclaim import reclaim
    from gpuaas.settings import load_settings
    from gpuaas.store import AuditEntry, open_store

    with embedded(tmp_path / "cluster") as cluster:
        point_at(cluster, monkeypatch, data_dir=tmp_path / "data")
        with open_store(load_settings()) as store:  # a row of no change: the undo refuses it in its row
            row = store.append(AuditEntry(flow="collect", action="collect", kind="Snapshot", name="1", mode="apply",
                                          outcome="applied"))
        state = reclaim(undo=[row.id], return_state=True)
    run_id = state.state_details.flow_run_id
    assert state.is_completed() and run_id is not None, state.message
    assert state.message.startswith(f"Restored 0 of 1 change. #{row.id} skipped: audit #{row.id} is a collect row")
    why = (f"audit #{row.id} is a collect row (applied), not a change gpuaas can undo: nothing undone; gpuaas undo "
           "takes the id of a reclaim, a quota plan or a deadline hold or demotion (gpuaas audit list)")
    line = f"undo #{row.id}: skipped: {why}"
    with get_client(sync_client=True) as client:
        [artifact] = client.read_artifacts(artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[run_id])))
        deadline = time.monotonic() + 30  # the logs go to the server in batches: they may land after the state
        while line not in (logs := [entry.message for entry in client.read_logs(
                log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run_id])))]) and time.monotonic() < deadline:
            time.sleep(0.5)
    assert artifact.key == "gpuaas-undo" and artifact.description == state.message
    assert f"- `#{row.id}`: skipped: {why}" in str(artifact.data).splitlines()
    assert line in logs, logs
