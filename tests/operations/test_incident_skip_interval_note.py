"""The incident review names the unchanged reclaim skips that may have held through its window without a row in it.

A reclaim skip that stays the same is recorded once per ``reclaim.record_skips_every_minutes`` (default 60), not
every run: a window can hold no row of a skip recorded shortly before it. The review reads the reclaim rows of
that interval before the window and names, in a note, each object whose newest row there is a skip or deferral
and which has no reclaim row in the window; nothing else (a plan, a skip followed by a row in the window, a skip
older than the interval, a policy that records every run) makes the note.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from gpuaas.models import Outcome
from gpuaas.operations.incident import plan, read
from gpuaas.policy import Policy
from gpuaas.store import AuditEntry, Store
from tests.policies.test_incident_review import T0

HOUR = timedelta(hours=1)


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(f"sqlite:///{tmp_path / 'gpuaas.db'}") as opened:
        yield opened


def _row(store: Store, minutes: float, name: str, outcome: str = Outcome.skipped, cause: str | None = "opted-out",
         flow: str = "reclaim") -> int:
    evidence = {"cause": cause} if cause else {}
    row = store.append(AuditEntry(created_at=T0 + timedelta(minutes=minutes), flow=flow, action="reclaim",
                                  kind="Notebook", namespace="team-a", name=name, uid=f"uid-{name}", mode="apply",
                                  outcome=outcome, reason="opted out", evidence=evidence))
    return int(row.id or 0)


def _notes(store: Store, every: timedelta = HOUR) -> list[str]:
    records = read(store, T0, T0 + HOUR, scoped=False, skip_interval=every)
    return [n for n in plan(records, Policy()).notes if "reclaim skip" in n]


def test_a_skip_recorded_before_the_window_and_silent_in_it_is_named(store: Store) -> None:
    held = _row(store, -50, "nb-held")
    assert _notes(store) == [
        "1 reclaim skip recorded in the 60 min before the window may have held through it without a row in it (an "
        "unchanged skip is recorded once per 60 min, reclaim.record_skips_every_minutes): Notebook team-a/nb-held "
        f"(opted-out, #{held}); see gpuaas audit list --flow reclaim --since 2026-12-01T01:00"]


def test_objects_with_a_row_in_the_window_or_no_skip_before_it_are_not_named(store: Store) -> None:
    _row(store, -40, "nb-again")
    _row(store, 10, "nb-again")  # recorded again in the window: its row is there
    _row(store, -30, "nb-planned", outcome=Outcome.planned, cause=None)  # a plan, not a skip
    _row(store, -70, "nb-old")  # older than the interval: its next row falls in the window or it ended
    _row(store, -20, "nb-other-flow", flow="deadlines")
    _row(store, -60, "nb-ended")
    _row(store, -10, "nb-ended", outcome=Outcome.planned, cause=None)  # the streak ended before the window
    assert _notes(store) == []


def test_deferrals_count_and_many_are_summed_up(store: Store) -> None:
    for i in range(5):
        _row(store, -5 - i, f"nb-{i}", outcome=Outcome.deferred, cause="over-cap")
    notes = _notes(store)
    assert len(notes) == 1 and notes[0].startswith("5 reclaim skips recorded in the 60 min before the window")
    assert "and 2 more; see" in notes[0]


def test_a_policy_that_records_every_run_reads_nothing_before_the_window(store: Store) -> None:
    _row(store, -50, "nb-held")
    assert _notes(store, every=timedelta(0)) == []
