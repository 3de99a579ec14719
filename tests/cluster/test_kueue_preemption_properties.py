"""Properties of ``find_targets`` on random cohorts (hypothesis).

For any book of admitted Workloads and any preemptor that does not fit (the only case the
scheduler asks about): the search leaves the quota book as it
found it; when it returns targets, evicting them makes the preemptor fit, and every target is
needed (evicting all but one of them does not make it fit within nominal quota); every target
satisfies its policy (same queue: ``withinClusterQueue``; another queue: ``reclaimWithinCohort``,
and that queue was above its nominal quota) and carries the matching reason.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gpuaas.cluster.kueue._model import PodSetInfo, WorkloadRecord, WorkloadState
from gpuaas.cluster.kueue._preemption import AdmittedIndex, _fits, find_targets, satisfies_policy
from gpuaas.cluster.kueue._quota import ClusterQueueQuota, PreemptionPolicy, QuotaBook, ResourceQuota

GPU = "nvidia.com/gpu"
FR = ("default", GPU)
T0 = datetime(2026, 1, 1, tzinfo=UTC)

policies = st.sampled_from(["Never", "LowerPriority", "Any"])
within = st.sampled_from(["Never", "LowerPriority", "LowerOrNewerEqualPriority"])
queue = st.tuples(st.integers(0, 8), st.one_of(st.none(), st.integers(0, 4)), within, policies)
workload = st.tuples(st.integers(0, 2), st.integers(-1, 1), st.integers(1, 4), st.integers(0, 20))


def _record(name: str, cq: str | None, priority: int, gpus: int, at: int) -> WorkloadRecord:
    record = WorkloadRecord("ns", name, name, "q", priority, T0, T0 + timedelta(seconds=at),
                            [PodSetInfo("main", 1, {GPU: gpus * 1000}, {})], seq=at)
    if cq is not None:
        record.state, record.cluster_queue, record.usage = WorkloadState.RESERVED, cq, {FR: gpus * 1000}
        record.admitted_at = T0 + timedelta(seconds=at)
    return record


@settings(max_examples=200, deadline=None)
@given(st.lists(queue, min_size=1, max_size=3), st.lists(workload, max_size=10), st.integers(0, 2),
       st.integers(-1, 2), st.integers(1, 8), st.booleans())
def test_targets_make_room_are_all_needed_and_follow_the_policy(
        queues: list[tuple[int, int | None, str, str]], workloads: list[tuple[int, int, int, int]],
        target_queue: int, priority: int, gpus: int, cohort: bool) -> None:
    book = QuotaBook()
    book.set_queues([ClusterQueueQuota(f"cq{i}", "co" if cohort else None, [((GPU,), ("default",))],
                                       {FR: ResourceQuota(n * 1000, None, None if lend is None or not cohort
                                                          else min(lend, n) * 1000)},
                                       preemption=PreemptionPolicy(w, r))
                     for i, (n, lend, w, r) in enumerate(queues)], [])
    names = [f"cq{i}" for i in range(len(queues))]
    records = [_record(f"w{i}", names[q % len(names)], p, g, at) for i, (q, p, g, at) in enumerate(workloads)]
    for record in records:
        book.add(record.cluster_queue or "", record.usage)
    cq = names[target_queue % len(names)]
    preemptor = _record("in", None, priority, gpus, 10)
    request = {FR: gpus * 1000}
    before = {name: dict(q.usage) for name, q in book.queues.items()}
    assume(not _fits(book, cq, request, borrow=True))  # the scheduler only asks when it does not fit
    above = {name for name, q in book.queues.items() if q.usage.get(FR, 0) > q.nominal(FR)}

    targets = find_targets(book, cq, preemptor, request, {FR}, AdmittedIndex(records))

    assert {name: dict(q.usage) for name, q in book.queues.items()} == before
    if not targets:
        return
    policy = book.queues[cq].preemption
    for target in targets:
        owner = target.record.cluster_queue
        if owner == cq:
            assert target.reason == "InClusterQueue"
            assert satisfies_policy(preemptor, target.record, policy.within_cluster_queue)
        else:
            assert target.reason == "InCohortReclamation" and cohort and owner in above
            assert satisfies_policy(preemptor, target.record, policy.reclaim_within_cohort)
    for target in targets:
        book.add(target.record.cluster_queue or "", target.record.usage, -1)
    assert _fits(book, cq, request, borrow=True)
    for target in targets:
        book.add(target.record.cluster_queue or "", target.record.usage)
        assert not _fits(book, cq, request, borrow=False)
        book.add(target.record.cluster_queue or "", target.record.usage, -1)
