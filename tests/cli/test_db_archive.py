"""``gpuaas db archive --before DATE --to FILE`` as a person runs it, then ``gpuaas db status``.

* without --apply it says in numbers what would go (rows, times, ids, per flow) and what stays and why, and writes
  nothing; --apply writes the file and says where, its SHA-256 and the audit row; ``db status`` then says when the
  log was last archived and up to when, where it said "never pruned";
* a cutoff less than 30 days ago, a date that is none, and a file already there are one line each, exit 2, nothing
  written; on a shared PostgreSQL database the same (with the password hidden).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app
from gpuaas.cluster.services import fresh_schema_url
from gpuaas.store import AuditEntry, Store, read_archive

pytestmark = pytest.mark.usefixtures("wide_terminal")  # each sentence on one line: the wrapping is test_db_output_wraps's

runner = CliRunner()
TODAY = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
CUTOFF = (TODAY - timedelta(days=40)).date()


def _fill(url: str) -> None:
    with Store(url) as store:
        for days_ago, flow in ((60, "reclaim"), (55, "reclaim"), (50, "rebalance"), (10, "reclaim")):
            store.append(AuditEntry(created_at=TODAY - timedelta(days=days_ago), flow=flow, action="reclaim",
                                    kind="Notebook", namespace="team-a", name="nb", mode="dry-run",
                                    outcome="skipped", reason="busy"))
        intent = store.append(AuditEntry(created_at=TODAY - timedelta(days=58), flow="reclaim", action="reclaim",
                                         kind="Notebook", namespace="team-a", name="nb", mode="apply",
                                         outcome="planned", reason="idle"))
        store.append(AuditEntry(created_at=TODAY - timedelta(days=58), flow="reclaim", action="reclaim",
                                kind="Notebook", namespace="team-a", name="nb", mode="apply", outcome="applied",
                                reason="idle", refers_to=intent.id))


@pytest.fixture()
def sqlite_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path}/gpuaas.db"
    monkeypatch.setenv("GPUAAS_DATABASE_URL", url)
    _fill(url)
    return url


def _lines(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines()]


def test_the_dry_run_says_what_would_go_and_what_stays_and_writes_nothing(sqlite_url: str, tmp_path: Path) -> None:
    target = tmp_path / "audit.jsonl.gz"
    result = runner.invoke(app, ["db", "archive", "--before", str(CUTOFF), "--to", str(target)])
    assert result.exit_code == 0, result.output
    lines = _lines(result.stdout)
    assert lines[0] == f"Would archive 3 audit entries from before {CUTOFF} 00:00 UTC to {target}:"
    assert lines[2] == "by flow: rebalance 1, reclaim 2"
    assert lines[3:5] == ["Kept back 2 older entries that gpuaas still reads:",
                          "2 an applied reclaim never restored (the object may still be stopped)"]
    assert lines[5] == f"1 entries from {CUTOFF} 00:00 UTC on stay."
    assert lines[6].startswith("Dry run: nothing written. Run again with --apply")
    assert not target.exists()
    as_json = runner.invoke(app, ["db", "archive", "--before", str(CUTOFF), "--to", str(target), "--format", "json"])
    data = json.loads(as_json.stdout)
    assert (data["applied"], data["rows"], data["kept_back"]) == (False, 3, {"reclaim_not_restored": 2})


def test_apply_writes_the_file_and_status_says_when_the_log_was_archived(sqlite_url: str, tmp_path: Path) -> None:
    before = runner.invoke(app, ["db", "status"])
    assert "(never pruned)" in before.stdout
    target = tmp_path / "audit.jsonl.gz"
    result = runner.invoke(app, ["db", "archive", "--before", str(CUTOFF), "--to", str(target), "--apply"])
    assert result.exit_code == 0, result.output
    first = _lines(result.stdout)[0]
    assert first.startswith(f"Archived 3 audit entries from before {CUTOFF} 00:00 UTC to {target} (sha256 ")
    assert first.endswith(f"records it. The file is yours to keep: zcat {target} | jq")
    assert target.exists() and "Traceback" not in result.output
    after = runner.invoke(app, ["db", "status"])
    assert f"(last archived on {datetime.now(UTC):%Y-%m-%d}, up to {CUTOFF})" in " ".join(after.stdout.split())
    again = runner.invoke(app, ["db", "archive", "--before", str(CUTOFF), "--to", str(target), "--apply"])
    assert again.exit_code == 2 and "already exists: an archive is never written over a file" in again.output


@pytest.mark.parametrize(("before", "words"), [
    (str((TODAY - timedelta(days=10)).date()), "less than 30 days ago"),
    ("2026-02-30", "expected a date (2026-09-01, midnight UTC) or an ISO time"),
], ids=["too-recent", "no-such-date"])
def test_a_cutoff_refused_is_one_line_and_writes_nothing(sqlite_url: str, tmp_path: Path, before: str,
                                                         words: str) -> None:
    target = tmp_path / "audit.jsonl.gz"
    result = runner.invoke(app, ["db", "archive", "--before", before, "--to", str(target), "--apply"])
    assert result.exit_code == 2 and words in result.output and "Traceback" not in result.output
    assert not target.exists()
    with Store(sqlite_url) as store:
        assert len(store.audit(limit=None)) == 6


def test_on_postgresql_the_archive_runs_and_hides_the_password(postgres_url: str, request: pytest.FixtureRequest,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    url = fresh_schema_url(postgres_url, f"arc_{abs(hash(request.node.nodeid)) % 10**8}")
    url = url.replace("://postgres@", "://postgres:s3cret-db@")
    monkeypatch.setenv("GPUAAS_DATABASE_URL", url)
    _fill(url)
    target = tmp_path / "audit.jsonl.gz"
    result = runner.invoke(app, ["db", "archive", "--before", str(CUTOFF), "--to", str(target), "--apply"])
    assert result.exit_code == 0, result.output
    assert "s3cret-db" not in result.output and target.exists()
    header, _ = read_archive(target)
    assert "s3cret-db" not in header["database"] and "***" in header["database"]
    with Store(url) as store:
        assert len(store.audit(limit=None)) == 4  # 6 - 3 archived + the archive's own row
