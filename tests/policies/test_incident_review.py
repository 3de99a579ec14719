"""The incident review's pure parts by hand: the window, the filters, the timeline, the fleet series, the words.

A hand-checked hour (02:00-03:00, a collect every 5 minutes, two queues of one cohort): the backlog
rises 0, 2, 4, ... to 14 workloads at 02:35 and falls again; team-a's idle GPUs cycle 0-3; team-b's
queue goes from 4 to 6 nominal GPUs at 02:35. In it: a reclaim planned and applied at 02:15, a
dry-run reclaim, and a quota plan at 02:33 whose completion refers to it. Plus a property test:
events are always in time order and are exactly the audit rows of the window and the filter.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuaas.errors import ConfigError
from gpuaas.fleet_history import QUEUE_HISTORY_COLUMNS, TENANT_HISTORY_COLUMNS
from gpuaas.policies.incident import build_review, parse_instant, resolve_window, scope_for
from gpuaas.store import AuditEntry
from reports.incident import event_rows, fleet_rows, incident_markdown, quota_rows, summary_line, window_label

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
END = T0 + timedelta(hours=1)
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TENANTS = [("team-a", ["team-a"], ["team-a-cq"]), ("team-b", ["team-b"], ["team-b-cq"])]


def _minutes(m: float) -> datetime:
    return T0 + timedelta(minutes=m)


def queue_rows(samples: int = 12) -> pd.DataFrame:
    rows = []
    for i in range(samples):
        for queue in ("team-a-cq", "team-b-cq"):
            b = queue == "team-b-cq"
            rows.append({**dict.fromkeys(QUEUE_HISTORY_COLUMNS, 0.0), "collected_at": _minutes(5 * i),
                         "cluster_queue": queue, "flavor": "h100", "cohort": "c", "tenant": queue[:6],
                         "nominal_gpus": 6.0 if b and i >= 7 else 4.0, "borrowing_limit_gpus": None,
                         "oldest_pending_seconds": None,
                         "pending_workloads": (min(i, 14 - i) if b else 0), "pending_gpus": 2.0 * i if b else 0.0})
    frame = pd.DataFrame(rows, columns=["collected_at", *QUEUE_HISTORY_COLUMNS])  # the store's frame
    frame["collected_at"] = pd.to_datetime(frame["collected_at"], utc=True)
    return frame


def tenant_rows(samples: int = 12) -> pd.DataFrame:
    rows = [{**dict.fromkeys(TENANT_HISTORY_COLUMNS, 0.0), "collected_at": _minutes(5 * i), "tenant": t,
             "workloads": 2, "allocated_gpus": 4.0, "idle_gpus": float(i % 4) if t == "team-a" else 0.0}
            for i in range(samples) for t in ("team-a", "team-b")]
    frame = pd.DataFrame(rows, columns=["collected_at", *TENANT_HISTORY_COLUMNS])
    frame["collected_at"] = pd.to_datetime(frame["collected_at"], utc=True)
    return frame


def row(id: int, minute: float, action: str, kind: str, name: str, mode: str, outcome: str, reason: str = "",
        **fields: Any) -> AuditEntry:
    return AuditEntry(id=id, created_at=_minutes(minute), flow=fields.pop("flow", "reclaim"), action=action, kind=kind,
                      name=name, mode=mode, outcome=outcome, reason=reason, **fields)


IDLE = {"window_minutes": 30.0, "activity_max": 0.0, "threshold": 0.05, "coverage": 1.0, "gpus_requested": 2.0}
PLAN = {"before": {"team-a-cq": {"h100": 4}, "team-b-cq": {"h100": 4}},
        "after": {"team-a-cq": {"h100": 4}, "team-b-cq": {"h100": 6}}}
AUDIT = [
    row(1, 14, "reclaim", "RayCluster", "ray", "dry-run", "planned", "idle 30 m", namespace="team-a", evidence=IDLE),
    row(2, 15, "reclaim", "Notebook", "nb", "apply", "planned", "idle 30 m", namespace="team-a", evidence=IDLE),
    row(3, 15.1, "reclaim", "Notebook", "nb", "apply", "applied", "stop-annotation: frees quota",
        namespace="team-a", refers_to=2),
    row(4, 33, "quota-plan", "Cohort", "c", "apply", "planned", "2 GPUs moved", flow="rebalance", **PLAN),
    row(5, 33.1, "quota-change", "ClusterQueue", "team-b-cq", "apply", "applied", "apply: h100 4 -> 6",
        flow="rebalance", before={"h100": 4}, after={"h100": 6}, refers_to=4),
    row(6, 33.2, "quota-plan", "Cohort", "c", "apply", "applied", "1 patches", flow="rebalance", refers_to=4),
    row(7, 75, "reclaim", "Notebook", "late", "apply", "planned", "after the window", namespace="team-a"),
]
UNDOABLE = {"reclaim", "quota-plan", "deadline-hold"}


def review(**filters: list[str]) -> Any:
    scope = scope_for(filters.get("namespaces", ()), filters.get("queues", ()), tenants=TENANTS)
    return build_review(queue_rows(), tenant_rows(), AUDIT, T0, END, scope, undoable_actions=UNDOABLE)


# -- the window ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("now", NOW), ("2h", NOW - timedelta(hours=2)), ("90m", NOW - timedelta(minutes=90)), ("7d", NOW - timedelta(days=7)),
    ("2026-11-29T02:00", datetime(2026, 11, 29, 2, 0, tzinfo=UTC)),
    ("2026-11-29T02:00+01:00", datetime(2026, 11, 29, 1, 0, tzinfo=UTC)),
    ("2026-11-29T02:00:00Z", datetime(2026, 11, 29, 2, 0, tzinfo=UTC)),
], ids=["now", "hours", "minutes", "days", "iso-utc", "iso-offset", "iso-z"])
def test_instants_are_iso_times_or_durations_before_now(text: str, expected: datetime) -> None:
    assert parse_instant(text, NOW, "start") == expected


@pytest.mark.parametrize(("start", "end", "message"), [
    ("yesterday", "now", "start: expected an ISO time (2026-11-29T02:00), a duration before now (2h, 90m) or 'now', "
                         "got 'yesterday'"),
    ("1h", "2026-13-01T00:00", "end: expected an ISO time"),
    ("2026-11-29T03:00", "2026-11-29T02:00", "start: start 2026-11-29 03:00:00 UTC is not before end 2026-11-29 02:00:00 UTC"),
    ("1h", "1h", "is not before end"),
    ("99999999999d", "now", "start: '99999999999d' is out of range"),
], ids=["bad-start", "bad-end", "backwards", "empty", "overflow"])
def test_a_bad_window_names_the_parameter(start: str, end: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        resolve_window(start, end, NOW)
    assert message in str(err.value)


# -- the hand-checked hour ---------------------------------------------------------------------------

def test_the_hour_by_hand() -> None:
    r = review()
    assert [e.audit_id for e in r.events] == [1, 2, 3, 4, 5, 6]  # #7 is after the window
    assert [(o.audit_id, o.action, o.result) for o in r.actions] == [
        (1, "reclaim", "dry-run"), (2, "reclaim", "applied"), (4, "quota-plan", "applied")]
    assert [e.audit_id for e in r.events if e.undoable] == [2, 4]
    assert r.events[1].evidence == "window 30m, max activity 0.00 ≤ 0.05, coverage 100%, 2 GPUs"
    assert r.events[3].evidence == "team-b-cq h100 4 -> 6"
    assert r.fleet["pending_workloads"].tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 6, 5, 4, 3]
    assert r.fleet["idle_gpus"].tolist() == [0, 1, 2, 3] * 3
    assert r.fleet["nominal_gpus"].tolist() == [8] * 7 + [10] * 5
    [change] = r.quota_changes
    assert (change.at, change.queue, change.before, change.after) == (_minutes(35), "team-b-cq", 4, 6)
    assert summary_line(r) == ("2026-12-01 02:00–03:00 UTC: 1 reclaim applied, 1 dry-run reclaim decision (1 planned), "
                               "1 quota plan applied; "
                               "backlog peaked at 7 workloads (02:35), idle GPUs at most 3 over 12 collects.")


def test_a_window_across_midnight_dates_its_instants() -> None:
    # The same rows, reviewed from the evening before: the window spans two dates, so a bare 02:35 would be ambiguous.
    r = build_review(queue_rows(), tenant_rows(), [], T0 - timedelta(hours=3), END)
    assert summary_line(r) == ("2026-11-30 23:00 – 2026-12-01 03:00 UTC: no gpuaas decisions or actions; "
                               "backlog peaked at 7 workloads (12-01 02:35), idle GPUs at most 3 over 12 collects.")


def test_the_markdown_reads_top_to_bottom() -> None:
    text = incident_markdown(review(), plot="iVBORw0KGgo=")
    lines = text.splitlines()
    assert lines[0] == f"**{summary_line(review())}**"
    assert lines.index("## Fleet over the window") < lines.index("## What gpuaas decided and did, oldest first") \
        < lines.index("## Quota per queue (nominal GPUs)")
    # the quota table's times are the collects' that saw the changes, and it says so under its title
    assert lines[lines.index("## Quota per queue (nominal GPUs)") + 2].startswith("As the collects saw it: ")
    assert "![backlog and idle GPUs](data:image/png;base64,iVBORw0KGgo=)" in lines
    [nb] = [line for line in lines if line.startswith("- **02:15:00** `#2`")]
    assert nb == ("- **02:15:00** `#2` reclaim Notebook team-a/nb — apply, **planned**: idle 30 m · evidence: window "
                  "30m, max activity 0.00 ≤ 0.05, coverage 100%, 2 GPUs · fleet then: backlog 3 workloads, 3 idle "
                  "GPUs at 02:15:00 · undoable (`undo: [2]`)")
    assert "| team-b-cq | h100 | 4 | 02:35:00 4 -> 6 | 6 |" in lines


def test_a_window_without_backlog_says_so() -> None:
    rows = queue_rows(3).assign(pending_workloads=0)
    assert summary_line(build_review(rows, tenant_rows(3), [], T0, END)) == (
        "2026-12-01 02:00–03:00 UTC: no gpuaas decisions or actions; no backlog, idle GPUs at most 2 over 3 collects.")


def test_an_empty_window_says_so() -> None:
    empty = build_review(queue_rows(0), tenant_rows(0), [], T0, END)
    assert summary_line(empty) == ("2026-12-01 02:00–03:00 UTC: no gpuaas decisions or actions; no stored fleet "
                                   "history in the window.")
    assert any("no stored fleet history" in n for n in empty.notes)
    assert "No audit rows in the window for this scope." in incident_markdown(empty)


def test_undo_results_are_said_first() -> None:
    undo = [{"audit_id": 2, "result": "restored", "message": "restored", "kind": "Workload", "namespace": "team-a",
             "name": "raycluster-ray-1", "restore_audit_id": 9,
             "subject": "RayCluster team-a/ray (Workload raycluster-ray-1)"},
            {"audit_id": 4, "result": "skipped", "message": "team-b-cq: h100 quota is 5, not the plan's 6",
             "kind": "Cohort", "namespace": None, "name": "c", "restore_audit_id": None, "subject": "Cohort c"}]
    text = incident_markdown(review(), undo=undo)
    assert text.splitlines()[0].endswith("; undo: 1 restored, 1 refused.**")
    assert "- undone: `#2` RayCluster team-a/ray (Workload raycluster-ray-1): restored (audit #9)" in text
    assert "- refused: `#4` Cohort c (skipped): team-b-cq: h100 quota is 5, not the plan's 6" in text


# -- the filters -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("filters", "events", "pending", "idle"), [
    ({"namespaces": ["team-a"]}, [1, 2, 3], [0] * 12, [0, 1, 2, 3] * 3),
    ({"namespaces": ["team-b"]}, [4, 5, 6], [0, 1, 2, 3, 4, 5, 6, 7, 6, 5, 4, 3], [0] * 12),
    ({"queues": ["team-a-cq"]}, [1, 2, 3], [0] * 12, [0, 1, 2, 3] * 3),  # the plan changed only team-b-cq
    ({"queues": ["team-b-cq"]}, [4, 5, 6], [0, 1, 2, 3, 4, 5, 6, 7, 6, 5, 4, 3], [0] * 12),
], ids=["ns-a", "ns-b", "queue-a", "queue-b"])
def test_filters_reach_rows_and_series_through_the_tenants(filters: dict[str, list[str]], events: list[int],
                                                           pending: list[int], idle: list[int]) -> None:
    r = review(**filters)
    assert [e.audit_id for e in r.events] == events
    assert r.fleet["pending_workloads"].tolist() == pending and r.fleet["idle_gpus"].tolist() == idle


def test_a_completion_whose_plan_came_before_the_window_follows_the_plan_through_the_referents() -> None:
    late_start = _minutes(33.05)  # the plan (#4) is before the window, its patch and completion in it
    scope = scope_for(queues=["team-b-cq"], tenants=TENANTS)
    r = build_review(queue_rows(), tenant_rows(), AUDIT, late_start, END, scope, referents=[AUDIT[3]],
                     undoable_actions=UNDOABLE)
    assert [e.audit_id for e in r.events] == [5, 6] and r.actions == []  # the action started before the window


def test_a_namespace_in_no_tenant_shows_idle_gpus_as_unknown() -> None:
    r = review(namespaces=["team-z"])
    assert r.events == [] and r.fleet["idle_gpus"].isna().all() and (r.fleet["pending_workloads"] == 0).all()
    assert any("idle GPUs are not shown" in n for n in r.notes) and any("team-z" in n for n in r.notes)
    rows = fleet_rows(r) + event_rows(review()) + quota_rows(review(), changed_only=False)
    assert all(value != "-" for row in rows for value in row.values())  # a bare dash renders as a bullet
    assert {row["idle GPUs"] for row in fleet_rows(r)} == {"unknown"}


def test_placements_map_a_namespace_the_policy_does_not_name() -> None:
    scope = scope_for(["ml"], tenants=TENANTS, placements=[("ml", "team-b-cq")],
                      queue_tenants=[("team-b-cq", "team-b")])
    assert scope.queues_of_namespaces() == {"team-b-cq"} and scope.tenants() == {"team-b"}


# -- property: the timeline is the audit log of the window and the filter, in order ------------------------

NAMESPACES = ["team-a", "team-b", "team-c"]
rows_strategy = st.lists(st.tuples(
    st.floats(min_value=-30, max_value=90, allow_nan=False), st.sampled_from(["reclaim", "restore", "deadline-hold"]),
    st.sampled_from(NAMESPACES), st.sampled_from(["planned", "applied", "skipped", "deferred", "failed"]),
    st.sampled_from(["apply", "dry-run"]), st.integers(min_value=0, max_value=30)), max_size=30)


@settings(max_examples=60, deadline=None)
@given(rows_strategy, st.lists(st.sampled_from(NAMESPACES), max_size=2, unique=True))
def test_events_are_sorted_and_are_the_rows_of_the_window_and_filter(specs: list[tuple[Any, ...]],
                                                                     namespaces: list[str]) -> None:
    audit = [row(i + 1, minute, action, "Notebook", f"n{i}", mode, outcome, namespace=ns,
                 refers_to=(ref if 0 < ref <= i else None))
             for i, (minute, action, ns, outcome, mode, ref) in enumerate(specs)]
    r = build_review(queue_rows(2), tenant_rows(2), list(reversed(audit)), T0, END,
                     scope_for(namespaces, tenants=TENANTS), undoable_actions=UNDOABLE)
    expected = [a for a in audit if T0 <= a.created_at < END and (not namespaces or a.namespace in namespaces)]
    assert sorted(e.audit_id for e in r.events) == sorted(int(a.id or 0) for a in expected)
    assert [(e.at, e.audit_id) for e in r.events] == sorted((e.at, e.audit_id) for e in r.events)
    assert {o.audit_id for o in r.actions} <= {e.audit_id for e in r.events}
    assert all(o.result in ("applied", "dry-run", "open", "skipped", "deferred", "failed") for o in r.actions)
    assert all(not e.undoable or e.mode == "apply" for e in r.events)
    assert window_label(T0, END) in summary_line(r)


def test_a_shortened_fleet_table_keeps_the_peak_and_every_applied_action_and_counts_the_rest() -> None:
    """The hour's 12 collects all differ; shown in 6 rows, the table keeps the first and last, the backlog
    peak (7 at 02:35), the peak of idle GPUs (3, first at 02:15), the collects before and after the reclaim
    applied at 02:15.1 and the quota change at 02:33.1, and says how many collects each gap left out."""
    r = review()
    full = fleet_rows(r, limit=None)
    short = fleet_rows(r, limit=6)
    gaps = [row["time (UTC)"] for row in short if row["time (UTC)"].startswith("(")]
    shown = [row for row in short if not row["time (UTC)"].startswith("(")]
    assert len(full) == 12 and shown[0] == full[0] and shown[-1] == full[-1]
    assert max(int(row["backlog"]) for row in shown) == max(int(row["backlog"]) for row in full) == 7
    times = {row["time (UTC)"] for row in shown}
    assert {full[3]["time (UTC)"], full[4]["time (UTC)"], full[6]["time (UTC)"], full[7]["time (UTC)"]} <= times
    left_out = sum(int(g.split()[0].strip("(")) for g in gaps)
    assert left_out + len(shown) == len(full) and left_out > 0
    assert "collects were left out" in incident_markdown(r) or len(full) <= 24


def test_a_deadline_hold_released_in_the_window_is_not_offered_for_undo() -> None:
    """A hold applied at 02:10 and undone at 02:20 (``gpuaas undo 10`` writes a ``deadline-release`` intent
    referring to the hold and a ``released`` completion): the hold is no longer in place, so the timeline must not
    offer ``undo: [10]`` (it would answer "nothing to undo"), as it does not for a reclaim already restored."""
    audit = [
        row(10, 10, "deadline-hold", "Workload", "w", "apply", "planned", "hold", namespace="team-a", flow="deadlines"),
        row(11, 10.1, "deadline-hold", "Workload", "w", "apply", "applied", "held", namespace="team-a",
            flow="deadlines", refers_to=10),
        row(12, 20, "deadline-release", "Workload", "w", "apply", "planned", "undo of audit #10", namespace="team-a",
            flow="deadlines", refers_to=10),
        row(13, 20.1, "deadline-release", "Workload", "w", "apply", "released", "undo of audit #10",
            namespace="team-a", flow="deadlines", refers_to=12)]
    r = build_review(queue_rows(), tenant_rows(), audit, T0, END, undoable_actions=UNDOABLE)
    assert [(o.audit_id, o.result) for o in r.actions] == [(10, "applied"), (12, "released")]
    assert [e.audit_id for e in r.events if e.undoable] == []
    assert "undo: [10]" not in incident_markdown(r)
