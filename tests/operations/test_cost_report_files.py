"""The cost report's HTML pages in the reports directory: one file per window, and none kept past the retention.

Cases: ``prune_reports`` removes only gpuaas's own pages (by name, directly in the folder, regular files) written
before the retention, never the page just written, anything else an operator keeps there, the load tests' folder
or a link; and the flow's step that writes a page prunes the old ones with ``collect.retention_days``.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpuaas.operations.cost_report import REPORT_FILE, prune_reports, report_file

NOW = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)
RETENTION = timedelta(days=14)


def _file(folder: Path, name: str, age: timedelta, now: datetime = NOW) -> Path:
    """A file in ``folder`` last written ``age`` before ``now``."""
    path = folder / name
    path.write_text("<html></html>", encoding="utf-8")
    written = (now - age).timestamp()
    os.utime(path, (written, written))
    return path


def test_the_page_name_is_the_one_pruning_recognises() -> None:
    report = SimpleNamespace(end=datetime(2026, 12, 1, 8, 0, 5, tzinfo=UTC), window_s=86400.0)
    name = report_file(report)  # type: ignore[arg-type]
    assert name == "cost-report-20261201T080005Z-86400s.html"
    assert REPORT_FILE.fullmatch(name) and REPORT_FILE.fullmatch(f"{name}.tmp")


def test_only_gpuaas_pages_written_before_the_retention_are_removed(tmp_path: Path) -> None:
    old, day = RETENTION + timedelta(hours=1), timedelta(days=1)
    gone = [_file(tmp_path, "cost-report-20261101T000000Z-86400s.html", old),
            _file(tmp_path, "cost-report-20261101T000000Z-3600s.html.tmp", old)]  # a write a killed run left
    stay = [_file(tmp_path, "cost-report-20261130T000000Z-86400s.html", day),
            _file(tmp_path, "cost-report-20261101T000000Z-7200s.html", RETENTION - timedelta(hours=1)),
            _file(tmp_path, "notes.html", old),  # an operator's own, beside the reports
            _file(tmp_path, "cost-report-latest.html", old),  # not a name gpuaas gives
            _file(tmp_path, "cost-report-20261101T000000Z-86400s.html.bak", old)]
    (tmp_path / "load-tests").mkdir()
    stay.append(_file(tmp_path / "load-tests", "cost-report-20261101T000000Z-86400s.html", old))
    target = _file(tmp_path, "kept.html", old)
    link = tmp_path / "cost-report-20261001T000000Z-86400s.html"
    link.symlink_to(target)
    os.utime(link, ((NOW - old).timestamp(),) * 2, follow_symlinks=False)  # the link itself is old too
    just_written = _file(tmp_path, "cost-report-20261001T000000Z-3600s.html", old)  # an mtime a skewed disk gave

    removed, failed = prune_reports(tmp_path, RETENTION, NOW, keep=just_written)

    assert sorted(removed) == sorted(gone) and failed == []
    assert not any(p.exists() for p in gone)
    assert all(p.exists() for p in [*stay, target, just_written]) and link.is_symlink()


def test_a_page_that_cannot_be_removed_is_said_and_the_rest_still_go(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    old = RETENTION + timedelta(days=1)
    locked = _file(tmp_path, "cost-report-20261101T000000Z-86400s.html", old)
    other = _file(tmp_path, "cost-report-20261102T000000Z-86400s.html", old)
    unlink = Path.unlink

    def refuse(self: Path, missing_ok: bool = False) -> None:
        if self == locked:
            raise PermissionError(13, "Permission denied")
        unlink(self, missing_ok)

    monkeypatch.setattr(Path, "unlink", refuse)
    removed, failed = prune_reports(tmp_path, RETENTION, NOW)
    assert removed == [other] and failed == [f"{locked}: Permission denied"]


def test_writing_a_page_removes_those_written_more_than_the_retention_ago(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The flow's step, with the policy's ``collect.retention_days``: each run's page is new, the old ones go."""
    import tasks.cost_report as step
    from gpuaas.settings import load_settings

    policy = tmp_path / "policy.yaml"
    policy.write_text("collect:\n  retention_days: 7\n", encoding="utf-8")
    monkeypatch.setenv("GPUAAS_POLICY_FILE", str(policy))
    monkeypatch.setenv("GPUAAS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(step, "render_html", lambda report, previous: "<html>report</html>")
    settings = load_settings()
    folder = settings.reports_dir
    folder.mkdir(parents=True)
    now = datetime.now(UTC)
    old = _file(folder, "cost-report-20261101T000000Z-86400s.html", timedelta(days=8), now)
    recent = _file(folder, "cost-report-20261102T000000Z-86400s.html", timedelta(days=6), now)
    foreign = _file(folder, "team-a-notes.txt", timedelta(days=30), now)

    report = SimpleNamespace(end=now - timedelta(minutes=5), window_s=86400.0)
    written = Path(step.write_html_report.fn(settings, report, None))  # type: ignore[arg-type]

    assert written.parent == folder and written.read_text(encoding="utf-8") == "<html>report</html>"
    assert not old.exists() and recent.exists() and foreign.exists()


def test_a_page_is_kept_at_least_as_long_as_the_window_it_covers(tmp_path: Path) -> None:
    """A month's report, written 20 days ago, outlives a 14-day retention until the next month's is written; one
    written 31 days ago goes, as does a day's report of 20 days ago."""
    month = _file(tmp_path, "cost-report-20261111T000000Z-2592000s.html", timedelta(days=20))
    last_month = _file(tmp_path, "cost-report-20261031T000000Z-2592000s.html", timedelta(days=31))
    day = _file(tmp_path, "cost-report-20261111T000000Z-86400s.html", timedelta(days=20))

    removed, failed = prune_reports(tmp_path, RETENTION, NOW)

    assert sorted(removed) == sorted([last_month, day]) and failed == []
    assert month.exists()
