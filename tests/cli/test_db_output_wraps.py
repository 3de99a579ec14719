"""``gpuaas db status`` and ``gpuaas db archive`` in an 80-column terminal, and the status's word on free space.

* each sentence wraps at its spaces within 80 columns, as the other commands' do: no word is split (every word at 80
  columns is a word of the same output at 400), and the archive's SHA-256 and path stay whole on one line;
* after an archive a SQLite file is as large as before: the status says how much of it is free and that VACUUM gives
  it back, where that is at least a quarter of the file and 50 MB (``VACUUM_SHARE``, ``VACUUM_BYTES``), and says
  nothing of it below either, or on a file with no free pages.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app
from gpuaas.store import AuditEntry, Holdings, Store, holdings

runner = CliRunner()
TODAY = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
CUTOFF = (TODAY - timedelta(days=40)).date()
SHA = re.compile(r"sha256 ([0-9a-f]+)\)")


def _fill(url: str, rows: int, *, pad: int = 0) -> None:
    with Store(url) as store:
        for k in range(rows):
            store.append(AuditEntry(created_at=TODAY - timedelta(days=60, minutes=k), flow="reclaim",
                                    action="reclaim", kind="Notebook", namespace="team-a", name=f"nb-{k}",
                                    mode="dry-run", outcome="skipped", reason="busy", evidence={"pad": "x" * pad}))
        store.append(AuditEntry(created_at=TODAY - timedelta(days=1), flow="reclaim", action="reclaim",
                                kind="Notebook", namespace="team-a", name="nb", mode="dry-run", outcome="skipped",
                                reason="busy"))


@pytest.fixture()
def sqlite_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    # a folder name long enough that the archive's line must wrap around its path
    folder = tmp_path / "a-folder-with-a-rather-long-name-as-operators-keep-records-in"
    folder.mkdir()
    url = f"sqlite:///{folder}/gpuaas.db"
    monkeypatch.setenv("GPUAAS_DATABASE_URL", url)
    return url


def _at(columns: int, args: list[str]) -> str:
    result = runner.invoke(app, args, env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.stdout


def _words_kept_whole(narrow: str, wide: str, columns: int) -> None:
    """Every line within ``columns`` (or one word alone), and every word of ``narrow`` a word of ``wide``."""
    for line in narrow.splitlines():
        assert len(line) <= columns or len(line.split()) == 1, line
    split = set(narrow.split()) - set(wide.split())
    assert not split, f"words split at {columns} columns: {sorted(split)}"


def test_status_wraps_at_words_in_80_columns(sqlite_url: str) -> None:
    _fill(sqlite_url, 3)
    narrow, wide = _at(80, ["db", "status"]), _at(400, ["db", "status"])
    assert max(len(line) for line in wide.splitlines()) > 80  # the sentence is longer than the terminal
    _words_kept_whole(narrow, wide, 80)
    assert " ".join(narrow.split()) == " ".join(wide.split())


def test_archive_wraps_at_words_and_keeps_its_sha256_and_path_whole(sqlite_url: str, tmp_path: Path) -> None:
    _fill(sqlite_url, 3)
    target = Path(sqlite_url.removeprefix("sqlite:///")).parent / "audit-archive-of-the-trial-database.jsonl.gz"
    dry_narrow = _at(80, ["db", "archive", "--before", str(CUTOFF), "--to", str(target)])
    dry_wide = _at(400, ["db", "archive", "--before", str(CUTOFF), "--to", str(target)])
    _words_kept_whole(dry_narrow, dry_wide, 80)
    narrow = _at(80, ["db", "archive", "--before", str(CUTOFF), "--to", str(target), "--apply"])
    found = SHA.search(narrow)
    assert found is not None and len(found.group(1)) == 64, narrow  # on one line, all 64 digits
    lines = narrow.splitlines()
    assert any(str(target) in line for line in lines) and len(lines[0]) <= 80
    assert f"zcat {target}" in " ".join(narrow.split())
    for line in lines:
        assert len(line) <= 80 or len(line.split()) == 1, line


def test_a_path_longer_than_the_terminal_is_not_split(sqlite_url: str, tmp_path: Path) -> None:
    _fill(sqlite_url, 3)
    deep = Path(sqlite_url.removeprefix("sqlite:///")).parent / ("d" * 90)
    deep.mkdir()
    target = deep / "audit.jsonl.gz"
    narrow = _at(80, ["db", "archive", "--before", str(CUTOFF), "--to", str(target)])
    assert f"{target}:" in narrow.splitlines()  # alone on its line, past the 80 columns, whole


@pytest.mark.parametrize(("free", "size", "said"), [
    (225_000_000, 300_000_000, True),   # an archive took three quarters of the file
    (60_000_000, 300_000_000, False),   # a fifth: the churn of the daily prune, reused by the next rows
    (40_000_000, 50_000_000, False),    # most of a small file: not worth a pause of the runs
    (0, 300_000_000, False),
    (None, 300_000_000, False),          # PostgreSQL: no free-page count
], ids=["three-quarters", "a-fifth", "small-file", "none-free", "postgresql"])
def test_the_vacuum_hint_needs_a_quarter_of_the_file_and_50_mb(free: int | None, size: int, said: bool) -> None:
    held = Holdings(audit=71_310, oldest_audit=None, snapshots=0, history=0, size_bytes=size, free_bytes=free)
    hint = held.vacuum_hint()
    assert (hint is not None) is said
    if hint is not None:
        assert hint.startswith("225.0 MB of the file (75%) is free space") and "VACUUM" in hint


def test_status_says_vacuum_gives_back_the_space_an_archive_freed(sqlite_url: str, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A real file, its free pages read from SQLite: none before the archive, most of the file after it. The
    50 MB floor is lowered to 100 kB so that the test writes 1 MB, not 50."""
    _fill(sqlite_url, 400, pad=2_000)
    with Store(sqlite_url, migrate=False, read_only=True) as store:
        before = holdings(store)
    assert before.free_bytes is not None and before.free_bytes < 0.05 * (before.size_bytes or 0)
    monkeypatch.setattr("gpuaas.store._holdings.VACUUM_BYTES", 100_000)
    assert "VACUUM" not in _at(80, ["db", "status"])
    _at(80, ["db", "archive", "--before", str(CUTOFF), "--to", str(tmp_path / "a.jsonl.gz"), "--apply"])
    with Store(sqlite_url, migrate=False, read_only=True) as store:
        after = holdings(store)
    assert (after.size_bytes or 0) >= 0.9 * (before.size_bytes or 0)  # SQLite does not shrink the file
    assert after.free_bytes is not None and after.free_bytes > 0.75 * (after.size_bytes or 0)
    status = " ".join(_at(80, ["db", "status"]).split())
    assert re.search(r"[0-9.]+ MB of the file \((7[5-9]|[89][0-9])%\) is free space .* run VACUUM on it while the "
                     r"flows are paused", status), status
