"""``gpuaas undo`` of an id that names no audit row: exit 1 and one line naming the id, nothing restored.

The command refuses such an id before the run starts (tests/cli/test_reclaim_cli.py); the reclaim flow refuses it
too, for a run started elsewhere (a deployment's parameters) or an id gone from the audit log since the command
looked (retention prunes it). Either way the command ends on that one line, not on a table of a run that completed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app
from gpuaas.store import Store

runner = CliRunner()


def test_an_id_the_flow_finds_missing_exits_1_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gpuaas.operations.incident as incident

    looked: list[list[int]] = []
    missing = incident.missing_audit_ids

    def gone_after_the_command_looked(store: Store, audit_ids: Sequence[int]) -> list[int]:
        looked.append(list(audit_ids))
        return [] if len(looked) == 1 else missing(store, audit_ids)

    monkeypatch.setenv("GPUAAS_KUBECONFIG", str(tmp_path / "missing-kubeconfig"))
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    monkeypatch.setattr(incident, "missing_audit_ids", gone_after_the_command_looked)
    result = runner.invoke(app, ["undo", "99999"])
    assert looked == [[99999], [99999]]  # the command's look, then the flow's
    assert result.exit_code == 1, result.output
    assert result.stderr.strip().splitlines()[-1] == (
        "error: undo: no audit row #99999 (see `gpuaas audit list`); nothing undone")
    assert result.stdout == ""  # no headline or table of a run that did nothing
