"""``recorded_holds``: which hold marks on a snapshot's Workloads the deadline plan counts, read in one query.

A SQLite store holding the applied holds of ``wl`` and ``other`` (``record_hold``). Marks on the snapshot: the
real ones, ``wl``'s copied onto another Workload, ``other``'s with a hand-written ``before``, one naming an id
that is no hold, one naming none, one unreadable. Only the two real ones are counted; the rows about all of
them are read in one statement; a snapshot with no mark reads nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from sqlalchemy import event

from gpuaas.models import Snapshot
from gpuaas.operations.deadlines import recorded_holds
from gpuaas.store import Store
from tests.actions.test_deadline_release_audit import NOW, record_hold


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(f"sqlite:///{tmp_path}/gpuaas.db")
    yield opened
    opened.close()


def _snapshot(marks: dict[str, object]) -> Snapshot:
    rows = [{"namespace": "ns", "name": name, "uid": f"uid-{name}",
             "deadline_hold": mark if isinstance(mark, str) or mark is None else json.dumps(mark)}
            for name, mark in marks.items()]
    return Snapshot(collected_at=NOW, windows_minutes=(30.0,), sources={}, workloads=pd.DataFrame(rows))


def _statements(store: Store) -> list[str]:
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    event.listen(store.engine, "before_cursor_execute", record)
    return seen


def test_only_marks_gpuaas_recorded_are_counted_and_all_are_proven_in_one_query(store: Store) -> None:
    wl, other = record_hold(store, "wl"), record_hold(store, "other")
    snapshot = _snapshot({
        "wl": wl, "other": other, "copy": wl, "edited": {**record_hold(store, "edited"), "before": {"active": False}},
        "unrecorded": {**wl, "audit_id": 999}, "unnamed": {"before": {"priority": 101}}, "unreadable": "x",
        "plain": None,
    })
    statements = _statements(store)
    assert recorded_holds(snapshot, store) == frozenset({("uid-wl", wl["audit_id"]), ("uid-other", other["audit_id"])})
    assert len(statements) == 1 and "audit_log.refers_to IN" in statements[0]


def test_a_snapshot_without_marks_reads_nothing(store: Store) -> None:
    statements = _statements(store)
    assert recorded_holds(_snapshot({"plain": None, "unreadable": "x"}), store) == frozenset()
    assert statements == []
