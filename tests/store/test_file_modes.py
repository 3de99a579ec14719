"""Who may read the SQLite audit log, and its copies: under the usual umask (022) a new file would be 0644.

* a fresh store's file is 0600, with its WAL, and a data directory it creates 0700;
* a data directory the user made, and a file whose mode the user chose, keep their modes;
* the copy an upgrade keeps beside the file (``before_upgrade``) has the file's mode, 0600 or 0640 alike, also
  where an earlier attempt left a copy more open than the file.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from gpuaas.store import Store


@pytest.fixture(autouse=True)
def _usual_umask() -> Iterator[None]:
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _write_a_row(store: Store) -> None:
    with store.engine.begin() as conn:
        conn.execute(text("INSERT INTO audit_log (created_at, flow, action, kind, name, mode, outcome, reason, "
                          "evidence) VALUES ('2026-11-01 00:00:00', 'reclaim', 'reclaim', 'Notebook', 'nb', "
                          "'apply', 'applied', 'idle', '{}')"))


def test_a_fresh_store_is_for_its_owner_alone(tmp_path: Path) -> None:
    data = tmp_path / "share" / "gpuaas"
    file = data / "gpuaas.db"
    with Store(f"sqlite:///{file}") as store:
        _write_a_row(store)
        assert _mode(file) == 0o600
        wal = file.with_name("gpuaas.db-wal")
        assert not wal.exists() or _mode(wal) == 0o600
    assert _mode(data) == 0o700
    assert _mode(tmp_path / "share") == 0o755  # a parent is no data directory: made as anything makes it


def test_what_the_user_made_keeps_its_mode(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    with Store(f"sqlite:///{data / 'gpuaas.db'}"):
        pass
    assert (_mode(data), _mode(data / "gpuaas.db")) == (0o755, 0o600)
    (data / "gpuaas.db").chmod(0o640)
    with Store(f"sqlite:///{data / 'gpuaas.db'}"):
        pass
    assert _mode(data / "gpuaas.db") == 0o640


def _behind(file: Path, revision: str = "0003") -> None:
    store = Store(f"sqlite:///{file}", migrate=False)
    store.upgrade(revision)
    _write_a_row(store)
    store.close()


@pytest.mark.parametrize("mode", [0o600, 0o640], ids=["0600", "0640"])
def test_the_copy_an_upgrade_keeps_has_the_files_mode(tmp_path: Path, mode: int) -> None:
    file = tmp_path / "gpuaas.db"
    _behind(file)
    file.chmod(mode)
    store = Store(f"sqlite:///{file}", migrate=False)
    store.upgrade()  # ``gpuaas db upgrade``
    store.close()
    copy = file.with_name("gpuaas.db.schema-0003.bak")
    assert copy.is_file() and _mode(copy) == mode


def test_a_copy_an_earlier_attempt_left_more_open_is_given_the_files_mode(tmp_path: Path) -> None:
    file = tmp_path / "gpuaas.db"
    _behind(file)
    file.chmod(0o600)
    copy = file.with_name("gpuaas.db.schema-0003.bak")
    copy.write_bytes(b"")
    copy.chmod(0o644)
    with Store(f"sqlite:///{file}"):  # a flow's opening upgrades a SQLite file that is behind
        pass
    assert _mode(copy) == 0o600
    with Store(f"sqlite:///{copy}", migrate=False) as kept:
        assert kept.current_revision() == "0003"
