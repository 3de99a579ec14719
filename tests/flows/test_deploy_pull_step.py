"""The deployments' pull step on a fresh checkout: no path to edit, and a wrong one named in the run's log.

The deployed version, run by a real process worker, is in ``tests/test_prefect_yaml.py``.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from tasks.pull import ProjectDirectoryMissing, set_project_directory

ROOT = Path(__file__).resolve().parents[2]


def test_unset_directory_means_the_installed_project(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    assert set_project_directory("") == {"directory": str(ROOT)}
    assert Path.cwd() == ROOT


def test_a_directory_without_the_project_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ProjectDirectoryMissing, match=r"'/opt/nowhere' \(from GPUAAS_PROJECT_DIR\) does not exist"):
        set_project_directory("/opt/nowhere")
    with pytest.raises(ProjectDirectoryMissing, match="has no flows/ package"):
        set_project_directory(str(tmp_path))
    assert Path.cwd() == tmp_path  # nothing changed


def test_a_missing_directory_is_one_error_line_under_the_worker_run(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """Run by a worker, the step logs outside any run context: the line must reach the run's logs in the API
    and the worker's console as a line, never as a "Logging error" traceback from Prefect's console format."""
    from prefect.logging.handlers import PrefectConsoleHandler, set_api_log_sink

    monkeypatch.chdir(tmp_path)
    run_id = uuid4()
    monkeypatch.setenv("PREFECT__FLOW_RUN_ID", str(run_id))
    [console] = [h for h in logging.getLogger().handlers if isinstance(h, PrefectConsoleHandler)]
    shown = io.StringIO()  # the worker's console: the handler Prefect's logging.yml puts on the root logger
    monkeypatch.setattr(console.console, "file", shown)
    sent: list[dict[str, Any]] = []
    set_api_log_sink(sent.append)  # what Prefect's API handler would send to the server
    try:
        with pytest.raises(ProjectDirectoryMissing):
            set_project_directory("/opt/nowhere")
    finally:
        set_api_log_sink(None)
    err = capfd.readouterr().err + shown.getvalue()  # logging reports its own errors on stderr
    for broken in ("Logging error", "KeyError", "Traceback", "Formatting field not found"):
        assert broken not in err, err
    [printed] = [line for line in shown.getvalue().splitlines() if "pull step failed" in line]
    assert "| ERROR" in printed
    assert "pull step failed: project directory '/opt/nowhere' (from GPUAAS_PROJECT_DIR) does not exist" in printed
    [line] = [log for log in sent if "pull step failed" in log["message"]]
    assert line["flow_run_id"] == str(run_id) and line["level"] == logging.ERROR
    assert line["message"].startswith("pull step failed: project directory '/opt/nowhere' (from GPUAAS_PROJECT_DIR) "
                                      "does not exist")
