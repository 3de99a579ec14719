"""The emulator's scheduling cycles against Kueue's, and the replay's bucketed walk against the full queue.

Kueue puts forward one Workload per ClusterQueue per cycle; a head that does not fit is set aside
and its queue puts forward nothing else that cycle. The rebalance replay does not walk every
pending record: it skips, by size bucket, the ones that cannot fit and counts them as lost cycles.
Both must admit exactly what the scheduler admits walking the full ordered queue, preemptions
included, or every replay figure drifts from what Kueue would do.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from gpuaas.cluster.kueue._admission import schedule
from gpuaas.cluster.kueue._model import PodSetInfo, WorkloadRecord
from gpuaas.cluster.kueue._quota import ClusterQueueQuota, QuotaBook, ResourceQuota
from gpuaas.cluster.quota_replay import CONFIGURATIONS, in_window, load_quotas, read_trace
from gpuaas.cluster.quota_replay._engine import QuotaReplay, ReplayRun
from gpuaas.cluster.traces import TraceJob
from gpuaas.policy import Policy, RebalancePolicy
from gpuaas.quantity import GPU

T0 = datetime(2026, 1, 1, tzinfo=UTC)
FR = ("h100", GPU)


def _book(nominal: dict[str, int], strict: bool = False) -> QuotaBook:
    book = QuotaBook()
    book.set_queues([ClusterQueueQuota(name, "c", [((GPU,), ("h100",))], {FR: ResourceQuota(gpus * 1000)},
                                       strict_fifo=strict) for name, gpus in nominal.items()], [])
    return book


def _wl(name: str, queue: str, gpus: int, seq: int) -> WorkloadRecord:
    return WorkloadRecord(namespace="ns", name=name, uid=name, queue_name=queue, priority=0,
                          created=T0 + timedelta(seconds=seq), queued_at=T0 + timedelta(seconds=seq),
                          podsets=[PodSetInfo("main", 1, {GPU: gpus * 1000}, {})], seq=seq)


def _admitted(book: QuotaBook, queues: dict[str, Iterable[WorkloadRecord | int]]) -> list[str]:
    admitted: list[str] = []

    def admit(cq: str, record: WorkloadRecord, assignment: tuple[object, dict]) -> None:
        book.add(cq, assignment[1])
        admitted.append(record.name)

    schedule(book, queues, admit, lambda cq, record, message: None)
    return admitted


def test_a_queue_whose_head_does_not_fit_puts_nothing_else_forward_that_cycle() -> None:
    """a and b each hold 2 of 4 GPUs, 2 are free. a's head (4) does not fit: a loses the cycle, so b's head,
    which borrows, takes the 2 GPUs before a's second Workload, which is within a's quota."""
    book = _book({"a": 2, "b": 2})
    book.add("b", {FR: 2000})
    queues = {"a": [_wl("a-4", "a", 4, 1), _wl("a-2", "a", 2, 2)], "b": [_wl("b-2", "b", 2, 3)]}
    assert _admitted(book, queues) == ["b-2"]


def test_within_a_cycle_heads_within_nominal_go_before_borrowers() -> None:
    book = _book({"a": 2, "b": 2})
    book.add("b", {FR: 2000})
    queues = {"a": [_wl("a-2", "a", 2, 2)], "b": [_wl("b-2", "b", 2, 1)]}
    assert _admitted(book, queues) == ["a-2"]


def test_left_out_records_cost_their_queue_one_cycle_each() -> None:
    """a's one record fits in a's own quota, b's three borrow; 3 GPUs in all. Left out two records before its
    own, a loses two cycles, in which b's first two take 2 GPUs; one record, a loses one cycle only."""
    book = _book({"a": 3, "b": 0})
    queues: dict[str, Iterable[WorkloadRecord | int]] = {
        "a": [2, _wl("a-1", "a", 1, 1)],
        "b": [_wl("b-1", "b", 1, 2), _wl("b-2", "b", 1, 3), _wl("b-3", "b", 1, 4)]}
    assert _admitted(book, queues) == ["b-1", "b-2", "a-1"]
    book = _book({"a": 3, "b": 0})
    queues = {"a": [1, _wl("a-1", "a", 1, 1)],
              "b": [_wl("b-1", "b", 1, 2), _wl("b-2", "b", 1, 3), _wl("b-3", "b", 1, 4)]}
    assert _admitted(book, queues) == ["b-1", "a-1", "b-2"]


def test_strict_fifo_head_that_does_not_fit_blocks_its_queue() -> None:
    book = _book({"a": 2}, strict=True)
    assert _admitted(book, {"a": [_wl("a-4", "a", 4, 1), _wl("a-1", "a", 1, 2)]}) == []
    assert _admitted(_book({"a": 2}, strict=True), {"a": [1, _wl("a-1", "a", 1, 2)]}) == []  # a left-out head too


class FullQueues(QuotaReplay):
    """The replay walking every pending record in order: the reference for the bucketed walk."""

    def _queues(self) -> dict[str, Iterable[WorkloadRecord | int]]:
        return {cq: pending.ordered() for cq, pending in self.pending.items() if pending.count}


def _outcome(run: ReplayRun) -> tuple[list[tuple[float | None, float | None, int, float]], int, float]:
    return [(job.started, job.finished, job.runs, job.queue_s) for job in run.jobs], run.preemptions, run.makespan_s


jobs_st = st.lists(st.builds(TraceJob, tenant=st.sampled_from(["a", "b", "c"]),
                             submit=st.integers(0, 3 * 86400).map(float),
                             duration=st.integers(60, 86400).map(float), gpus=st.integers(1, 8)),
                   min_size=1, max_size=40)


@settings(max_examples=120, derandomize=True, deadline=None)
@given(jobs=jobs_st, quotas=st.tuples(st.integers(0, 8), st.integers(1, 8), st.integers(0, 8)),
       config=st.sampled_from(CONFIGURATIONS))
@example(jobs=[TraceJob("a", 0.0, 600.0, 4), TraceJob("a", 0.0, 600.0, 8), TraceJob("a", 1.0, 600.0, 2),
               TraceJob("b", 2.0, 600.0, 2), TraceJob("c", 3.0, 600.0, 4)],
         quotas=(4, 2, 4), config=CONFIGURATIONS[1])
@example(jobs=[TraceJob("c", 0.0, 1000.0, 8), TraceJob("a", 1.0, 600.0, 2), TraceJob("b", 1.0, 600.0, 4),
               TraceJob("b", 1.0, 600.0, 4)],
         quotas=(2, 2, 4), config=CONFIGURATIONS[1])  # b's second 4 is asked again after a's admission changed the book
def test_the_bucketed_walk_admits_what_the_full_queue_admits(
        jobs: list[TraceJob], quotas: tuple[int, int, int], config: object) -> None:
    table = dict(zip("abc", quotas, strict=True))
    jobs = [job for job in jobs if job.gpus <= sum(quotas)]
    assert _outcome(QuotaReplay(jobs, table, config).run()) == _outcome(FullQueues(jobs, table, config).run())


def test_on_a_real_trace_slice_the_bucketed_walk_matches_the_full_queue(tmp_path: Path) -> None:
    """Twenty days of two ITP clusters, every configuration and lending with no margin: event for event."""
    from tests.conftest import SHARED

    itp = SHARED / "fixtures" / "traces" / "microsoft-itp-elasticflow"
    traces = [itp / "cluster10.csv", itp / "195job.csv"]
    quotas = tmp_path / "quotas.yaml"
    quotas.write_text("cluster10: 8\n195job: 16\n", encoding="utf-8")
    table = load_quotas([], "itp", traces, quotas)
    jobs = [j for j in in_window(read_trace(traces, "itp"), 20) if j.gpus <= table[j.tenant]]
    lending = Policy(rebalance=RebalancePolicy(reclaiming_lends=True, reclaiming_keep_factor=0, reclaiming_keep_gpus=0))
    preempted = 0
    for config, policy in [(c, None) for c in CONFIGURATIONS] + [(CONFIGURATIONS[3], lending)]:
        bucketed = QuotaReplay(jobs, table, config, policy=policy).run()
        assert _outcome(bucketed) == _outcome(FullQueues(jobs, table, config, policy=policy).run()), config.name
        preempted += bucketed.preemptions
    assert preempted > 0  # the cohort runs preempt, so the walk's re-count after an eviction is exercised

