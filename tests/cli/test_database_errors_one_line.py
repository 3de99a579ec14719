"""The database, as the command line says it: a SQLite URL gpuaas cannot honour is refused before anything runs,
and a database that refuses a flow run's work (locked, a table gone) ends it with one line naming the database.

Before: ``GPUAAS_DATABASE_URL=sqlite:// gpuaas db upgrade`` upgraded an in-memory database and exited 0;
``…gpuaas.db?mode=ro gpuaas db status`` printed a SAWarning and its source line; a locked store failed ``gpuaas
collect`` with SQLAlchemy's statement, parameters and link over several lines.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import typer
from sqlalchemy import text

from gpuaas.cli._flows import _run_body
from gpuaas.store import Store


def _gpuaas(tmp_path: Path, *args: str, url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUAAS_", "PREFECT_API_URL"))}
    env |= {"GPUAAS_DATA_DIR": str(tmp_path / "data"), "GPUAAS_DATABASE_URL": url, "HOME": str(tmp_path),
            "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "gpuaas.cli.app", *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///", "sqlite:///:memory:"])
def test_db_upgrade_refuses_an_in_memory_database(tmp_path: Path, url: str) -> None:
    proc = _gpuaas(tmp_path, "db", "upgrade", url=url)
    assert proc.returncode == 1 and proc.stdout == "", proc.stdout
    assert proc.stderr.splitlines() == [proc.stderr.strip()] and proc.stderr.startswith(
        "error: environment: GPUAAS_DATABASE_URL: a SQLite URL without a file is an in-memory database"), proc.stderr


def test_a_sqlite_option_the_driver_would_drop_is_refused_without_warning_text(tmp_path: Path) -> None:
    file = tmp_path / "gpuaas.db"
    Store(f"sqlite:///{file}").close()  # there, at the newest schema: only the option is wrong
    proc = _gpuaas(tmp_path, "db", "status", url=f"sqlite:///{file}?mode=ro")
    assert proc.returncode == 1 and proc.stdout == "", proc.stdout
    assert proc.stderr.splitlines() == [
        "error: environment: GPUAAS_DATABASE_URL: a SQLite URL takes no query options (this one has 'mode'): gpuaas "
        "decides how the file is opened (WAL, its own busy timeout); remove the '?' and what follows"], proc.stderr
    assert "Warning" not in proc.stderr


def test_a_flow_run_the_database_refuses_ends_in_one_line_naming_it(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """As ``gpuaas collect`` calls its body; the store's write fails on the database (a table gone: immediate, where a
    lock waits out the busy timeout first, ``tests/store/test_database_errors.py``)."""
    url = f"sqlite:///{tmp_path}/gpuaas.db"

    def body(**_: Any) -> None:
        with Store(url) as store:
            with store.engine.begin() as conn:
                conn.execute(text("DROP TABLE queue_history"))
            store.prune_history(timedelta(days=1), now=datetime(2026, 3, 1, tzinfo=UTC))

    with pytest.raises(typer.Exit) as ended:
        _run_body(body, "collecting a snapshot", {})
    assert ended.value.exit_code == 1
    err = capsys.readouterr().err.splitlines()  # the step's lines, then the error
    assert err[-1] == f"error: the gpuaas database at {url}: no such table: queue_history", err
    assert not any(word in line for line in err[:-1] for word in ("error", "SQL", "sqlalche", "parameters")), err
