"""A degraded rebalance run names each failure once in its line.

The line is led by the snapshot's failed sources (``Degraded: Prometheus at …: connection refused.``), and the
plan's own reason repeated them: "Degraded: <error>. Degraded snapshot (prometheus: <error>; history: …): …" named
Prometheus's failure twice, three times with the history's. What is left after the lead is the history's failure,
where it failed, else nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime

from flows.rebalance import _not_led
from gpuaas.models import Snapshot, SourceStatus
from gpuaas.operations.rebalance import CohortOutcome, degraded_reason
from gpuaas.policies.quotas import CohortDemand, QueueDemand, QuotaLimits, plan_quotas
from reports import source_errors, with_failures
from reports.rebalance import first_line

DOWN = "Prometheus at http://127.0.0.1:9: connection refused"


def _snapshot(prometheus_ok: bool) -> Snapshot:
    return Snapshot(datetime(2026, 12, 6, tzinfo=UTC), (30.0,), {
        "kube": SourceStatus("kube", True), "prometheus": SourceStatus("prometheus", prometheus_ok,
                                                                       error=None if prometheus_ok else DOWN)})


def _line(snapshot: Snapshot, history_error: str | None) -> str:
    queues = [QueueDemand("team-a-cq", {"h100": 12}, {"h100": 2}), QueueDemand("team-b-cq", {"h100": 4}, {"h100": 12})]
    limits = QuotaLimits(8, 100, 32, 1)
    outcomes = [CohortOutcome("c", CohortDemand("c", queues, limits, 86400.0, False), plan_quotas(queues, limits))]
    degraded, errors = degraded_reason(snapshot, history_error), source_errors(snapshot.sources)
    return with_failures(first_line(outcomes, "dry-run", _not_led(degraded, snapshot, errors)), errors)


def test_a_failed_source_is_named_once() -> None:
    line = _line(_snapshot(False), None)
    assert line.count(DOWN) == 1, line
    assert line.startswith(f"Degraded: {DOWN}. Degraded snapshot: 4 GPUs of quota planned in 1 cohort"), line


def test_the_history_s_failure_is_kept_beside_the_sources_named_before() -> None:
    line = _line(_snapshot(False), "prometheus (query_range): connection refused")
    assert line.count(DOWN) == 1 and "Degraded snapshot (history: prometheus (query_range): connection refused)" in line


def test_a_history_failure_alone_is_named_where_no_source_leads() -> None:
    line = _line(_snapshot(True), "prometheus (query_range): timed out")
    assert line.startswith("Degraded snapshot (history: prometheus (query_range): timed out): 4 GPUs"), line
