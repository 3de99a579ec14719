"""``gpuaas.operations.incident.plan`` as a pure function: the records a store read returns in, the scoped review
out; the scope comes from the policy's tenants, where the workloads were queued, and the queue history's tenants."""

from __future__ import annotations

from gpuaas.operations.incident import IncidentRecords, plan
from gpuaas.policy import Policy, Tenant
from tests.policies.test_incident_review import AUDIT, END, T0, queue_rows, tenant_rows

POLICY = Policy(tenants=[Tenant(name="team-a", namespaces=["team-a"], cluster_queues=["team-a-cq"]),
                         Tenant(name="team-b", namespaces=["team-b"], cluster_queues=["team-b-cq"])])
IN_WINDOW = [r for r in AUDIT if T0 <= r.created_at < END]


def records(placements: list[tuple[str, str]] | None = None) -> IncidentRecords:
    return IncidentRecords(start=T0, end=END, queue_rows=queue_rows(), tenant_rows=tenant_rows(), audit=IN_WINDOW,
                           placements=placements or [])


def test_an_unfiltered_review_holds_every_row_of_the_window_and_marks_what_can_be_undone() -> None:
    review = plan(records(), POLICY)

    assert [e.audit_id for e in review.events] == [1, 2, 3, 4, 5, 6]
    assert len(review.fleet) == 12  # one row per collect
    # The applied reclaim (#2, completed by #3) and the applied quota plan (#4) can be undone; the dry-run cannot.
    assert {e.audit_id for e in review.events if e.undoable} == {2, 4}


def test_a_namespace_no_tenant_names_is_scoped_through_where_its_workloads_were_queued() -> None:
    # team-z is in no tenant of the policy: without placements its review finds no queue, so no quota change.
    assert [e.audit_id for e in plan(records(), POLICY, namespaces=["team-z"]).events] == []
    # Its workloads were queued in team-b-cq: the quota change of that queue is in its review, team-a's reclaims not.
    placed = plan(records([("team-z", "team-b-cq")]), POLICY, namespaces=["team-z"])
    assert 5 in [e.audit_id for e in placed.events]
    assert not {1, 2, 3} & {e.audit_id for e in placed.events}


def test_a_queue_filter_keeps_the_decisions_about_its_quota_and_its_tenants_workloads() -> None:
    events = {e.audit_id for e in plan(records(), POLICY, queues=["team-a-cq"]).events}
    assert {1, 2, 3} <= events and 5 not in events
