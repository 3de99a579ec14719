"""The incident review's timeline table fits a 1600-pixel screen in the Prefect UI: short cells only.

Seen in headless Chromium at 1600 px: with each row's reason and evidence in the table, the timeline was
1599 px wide in its 1034 px box, and its last columns (evidence, undoable) were off the screen. The UI
never wraps a table cell; the sentences are on each row's line of the review's markdown, which wraps.
"""

from __future__ import annotations

from reports.incident import event_rows, incident_markdown
from tests.policies.test_incident_review import review

CELL_MAX = 24
"""Characters of the longest cell that keeps an eight-column table inside the artifact's ~1040 px box."""


def test_the_timeline_table_holds_short_cells_only() -> None:
    r = review()
    rows = event_rows(r)
    assert list(rows[0]) == ["time (UTC)", "audit id", "flow", "action", "object", "mode", "outcome", "undoable"]
    long = [str(v) for row in rows for v in row.values() if len(str(v)) > CELL_MAX]
    assert not long, long
    assert {row["audit id"]: row["undoable"] for row in rows}[4] == "yes"  # on screen, the column one looks for
    assert all(value not in ("-", "") for row in rows for value in row.values())  # a bare dash renders as a bullet


def test_each_reason_and_its_evidence_stay_in_the_markdown() -> None:
    r = review()
    markdown = incident_markdown(r, None, None, None)
    for e in r.events:
        assert e.reason in markdown
    assert "evidence: window 30m" in markdown
