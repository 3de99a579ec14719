"""``gpuaas audit list`` on a long log: the newest ``--limit`` rows are read (the log is never loaded whole to keep its
tail), shown oldest first, and a cut listing says so: its title names how many match in all and the ``--before``
that shows the rows before it, and the JSON carries ``total``. ``--before ID`` pages back to the first row."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event
from typer.testing import CliRunner

from gpuaas.cli.app import app
from gpuaas.settings import load_settings
from gpuaas.store import AuditEntry, open_store

runner = CliRunner()
T0 = datetime(2026, 11, 1, tzinfo=UTC)
ROWS = 2500


@pytest.fixture()
def ids() -> list[int]:
    """A log of 2,500 rows a second apart (every fifth of rebalance); their ids, oldest first."""
    store = open_store(load_settings())
    try:
        with store.session() as session:
            session.add_all(AuditEntry(created_at=T0 + timedelta(seconds=i), flow="rebalance" if i % 5 == 0 else
                                       "reclaim", action="reclaim", kind="Notebook", namespace="a", name=f"nb-{i}",
                                       mode="dry-run", outcome="planned") for i in range(ROWS))
            session.commit()
        return [int(r.id or 0) for r in store.audit(limit=None)]
    finally:
        store.close()


@pytest.fixture()
def loaded() -> Iterator[list[int]]:
    """The audit rows the database hands over while the test runs (one count per row loaded)."""
    rows: list[int] = []

    def count(target: AuditEntry, *_: Any) -> None:
        rows.append(int(target.id or 0))

    event.listen(AuditEntry, "load", count)
    yield rows
    event.remove(AuditEntry, "load", count)


def _json(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, ["audit", "list", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_a_small_limit_reads_only_the_newest_rows(ids: list[int], loaded: list[int]) -> None:
    listed = _json("--limit", "5")
    assert sorted(loaded) == ids[-5:]  # the database handed over these five rows alone
    assert [e["id"] for e in listed["entries"]] == ids[-5:]  # the newest five, oldest first
    assert listed["total"] == ROWS


def test_the_default_cut_is_said_in_the_title_and_the_json(ids: list[int]) -> None:
    listed = _json()
    assert [e["id"] for e in listed["entries"]] == ids[-200:] and listed["total"] == ROWS
    table = runner.invoke(app, ["audit", "list"], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    title = table.stdout.strip().splitlines()[0]
    assert f"the newest 200 of {ROWS:,} entries" in title and f"--before {ids[-200]}" in title
    rebalance = _json("--flow", "rebalance", "--limit", "3")
    assert rebalance["total"] == ROWS // 5 and [e["name"] for e in rebalance["entries"]] == [
        "nb-2485", "nb-2490", "nb-2495"]


def test_before_pages_back_through_the_whole_log_once(ids: list[int]) -> None:
    seen: list[int] = []
    page = _json("--limit", "1000")
    while page["entries"]:
        assert page["total"] == ROWS - len(seen)  # what is left at and before this page
        seen = [e["id"] for e in page["entries"]] + seen
        page = _json("--limit", "1000", "--before", str(page["entries"][0]["id"]))
    assert seen == ids
    empty = runner.invoke(app, ["audit", "list", "--before", str(ids[0])])
    assert empty.exit_code == 0 and f"--before {ids[0]}" in empty.stdout


def test_a_listing_that_is_not_cut_counts_what_it_shows() -> None:
    store = open_store(load_settings())
    try:
        store.append(AuditEntry(flow="reclaim", action="reclaim", kind="Notebook", namespace="a", name="nb",
                                mode="dry-run", outcome="planned"))
    finally:
        store.close()
    assert _json()["total"] == 1
    table = runner.invoke(app, ["audit", "list"], env={"COLUMNS": "200"})
    assert "newest" not in table.stdout and "--before" not in table.stdout


def test_before_takes_an_audit_id() -> None:
    result = runner.invoke(app, ["audit", "list", "--before", "x"])
    assert result.exit_code == 2 and "'--before'" in result.stderr


def test_before_an_id_no_row_has_is_a_usage_error_naming_it(ids: list[int]) -> None:
    """Rows are listed by time, so "before" a row needs the row: an id past the log is refused, not read as all."""
    result = runner.invoke(app, ["audit", "list", "--before", str(ids[-1] + 1)])
    assert result.exit_code == 2, result.output
    assert "'--before'" in result.stderr and "no audit entry has that id" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize("limit", ["99999999999999999999999", "10001", "0"])
def test_a_limit_out_of_range_is_a_usage_error_naming_it(limit: str) -> None:
    result = runner.invoke(app, ["audit", "list", "--limit", limit])
    assert result.exit_code == 2, result.output
    assert "--limit" in result.stderr and "Traceback" not in result.output
