"""The incident review reads back what collect and the flows stored, on SQLite and a real PostgreSQL.

Three collects inside the window ``[12:00, 12:15)`` and one after it; a quota plan made at 11:50
(before the window) whose patch and completion land at 12:06: the review over the window has the
three collects' sums, the patch and completion (following the plan, fetched from before the window)
for a filter on the queue the plan raised, and nothing for the other queue.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gpuaas.settings import load_settings
from gpuaas.store import AuditEntry, Store

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)



def _queue(name: str, nominal: float, pending: int) -> dict[str, object]:
    return {"cluster_queue": name, "flavor": "h100", "cohort": "c", "tenant": name.removesuffix("-cq"),
            "nominal_gpus": nominal, "usage_gpus": 2.0, "reserved_gpus": 2.0, "borrowed_gpus": 0.0,
            "borrowing_limit_gpus": float("nan"), "pending_workloads": pending, "pending_gpus": 2.0 * pending,
            "oldest_pending_seconds": float("nan"), "admitted_workloads": 1}


def _tenant(name: str, idle: float) -> dict[str, object]:
    return {"tenant": name, "workloads": 2, "allocated_gpus": 2.0, "idle_gpus": idle, "unknown_gpus": 0.0,
            "pending_gpus": 0.0}


def _row(minutes: float, action: str, kind: str, name: str, outcome: str, **fields: object) -> AuditEntry:
    return AuditEntry(created_at=T0 + timedelta(minutes=minutes), flow="rebalance", action=action, kind=kind, name=name,
                      mode="apply", outcome=outcome, reason=f"{action} {outcome}", **fields)


def test_the_review_reads_the_stored_history_and_audit_rows(db_url: str) -> None:
    from tasks.incident import read_review

    store = Store(db_url)
    try:
        for i, (b_nominal, b_pending, a_idle) in enumerate([(4, 3, 1.0), (4, 2, 2.0), (6, 1, 0.0), (6, 0, 5.0)]):
            store.save_history(T0 + timedelta(minutes=5 * i) if i < 3 else T0 + timedelta(minutes=20),
                               [_queue("team-a-cq", 8.0 if i < 2 else 6.0, 0), _queue("team-b-cq", b_nominal, b_pending)],
                               [_tenant("team-a", a_idle), _tenant("team-b", 0.0)])
        plan = store.append(_row(-10, "quota-plan", "Cohort", "c", "planned",
                                 before={"team-a-cq": {"h100": 8}, "team-b-cq": {"h100": 4}},
                                 after={"team-a-cq": {"h100": 6}, "team-b-cq": {"h100": 6}}))
        patch = store.append(_row(6, "quota-change", "ClusterQueue", "team-b-cq", "applied", refers_to=plan.id,
                                  before={"h100": 4}, after={"h100": 6}))
        done = store.append(_row(6.5, "quota-plan", "Cohort", "c", "applied", refers_to=plan.id))
    finally:
        store.close()

    settings = load_settings(database_url=db_url)
    end = T0 + timedelta(minutes=15)
    whole = read_review.fn(settings, T0, end, [], [])
    assert whole.fleet["pending_workloads"].tolist() == [3, 2, 1]
    assert whole.fleet["nominal_gpus"].tolist() == [12, 12, 12]
    assert whole.fleet["idle_gpus"].tolist() == [1, 2, 0]
    assert [e.audit_id for e in whole.events] == [patch.id, done.id] and whole.actions == []  # the plan is older

    raised = read_review.fn(settings, T0, end, [], ["team-b-cq"])
    assert [e.audit_id for e in raised.events] == [patch.id, done.id]
    assert [(c.queue, c.before, c.after) for c in raised.quota_changes] == [("team-b-cq", 4, 6)]
    assert raised.fleet["idle_gpus"].tolist() == [0, 0, 0]  # team-b's, through the queue's tenant
    other = read_review.fn(settings, T0, end, [], ["team-x-cq"])
    assert other.events == [] and (other.fleet["pending_workloads"] == 0).all()


def test_how_an_action_of_the_window_ended_is_read_from_rows_written_after_it(db_url: str) -> None:
    """A reclaim applied in the window ``[12:00, 12:15)`` and restored at 12:30, and a reclaim whose intent is at
    12:14:59 and whose completion lands at 12:15:01: the review says the first is undone (no longer undoable)
    and the second applied (not open), as the rows written after the window tell."""
    from tasks.incident import read_review

    def reclaim(minutes: float, name: str, outcome: str, **fields: object) -> AuditEntry:
        return AuditEntry(created_at=T0 + timedelta(minutes=minutes), flow="reclaim", action="reclaim",
                          kind="Notebook", namespace="team-a", name=name, mode="apply", outcome=outcome,
                          reason=f"reclaim {outcome}", **fields)

    store = Store(db_url)
    try:
        nb = store.append(reclaim(2, "nb", "planned"))
        store.append(reclaim(2.1, "nb", "applied", refers_to=nb.id))
        undo = store.append(AuditEntry(created_at=T0 + timedelta(minutes=30), flow="reclaim", action="restore",
                                       kind="Notebook", namespace="team-a", name="nb", mode="apply",
                                       outcome="planned", reason="undo", refers_to=nb.id))
        store.append(AuditEntry(created_at=T0 + timedelta(minutes=30.1), flow="reclaim", action="restore",
                                kind="Notebook", namespace="team-a", name="nb", mode="apply", outcome="restored",
                                reason="restored", refers_to=undo.id))
        late = store.append(reclaim(15 - 1 / 60, "late", "planned"))
        store.append(reclaim(15 + 1 / 60, "late", "applied", refers_to=late.id))
    finally:
        store.close()

    review = read_review.fn(load_settings(database_url=db_url), T0, T0 + timedelta(minutes=15), [], [])
    assert {o.audit_id: o.result for o in review.actions} == {nb.id: "applied", late.id: "applied"}
    undoable = {e.audit_id: e.undoable for e in review.events}
    assert undoable[nb.id] is False and undoable[late.id] is True
    assert all(e.audit_id is not None and e.audit_id <= late.id for e in review.events)  # later rows: no events
