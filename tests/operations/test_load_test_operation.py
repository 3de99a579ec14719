"""``gpuaas.operations.load_test``: ``plan`` as a pure function of a finished sweep (the capacity against the
config's SLO and quality floor), and ``apply`` writing the files and the audit row into a real SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuaas.errors import ActionRefused
from gpuaas.loadtest import SWEEP_COLUMNS, LoadTestConfig, SweepRun
from gpuaas.models import Outcome
from gpuaas.operations import load_test
from gpuaas.store import Store

URL = "http://127.0.0.1:8000/v1"


def run(steps: list[tuple[float, float, float]], **config: object) -> SweepRun:
    """A finished sweep: one row per (rate, p95 latency, quality), on one replica of one GPU."""
    cfg = LoadTestConfig(url=URL, model="m", rates=tuple(r for r, _, _ in steps), slo_quantile="p95",
                         slo_seconds=2.0, **config)  # type: ignore[arg-type]
    rows = []
    for rate, p95, quality in steps:
        row = dict.fromkeys(SWEEP_COLUMNS, 0.0)
        row.update(rate_rps=rate, replicas=1, gpus=1, latency_p50_s=p95 / 2, latency_p95_s=p95, latency_p99_s=p95,
                   quality=quality, success_ratio=1.0, requests=100, successes=100, offered_rps=rate,
                   achieved_rps=rate, achieved_ratio=1.0, client_limited=False)
        rows.append(row)
    return SweepRun(cfg, steps=rows)


def test_plan_stops_at_the_first_rate_that_misses_the_slo_or_the_quality_floor() -> None:
    # 4 rps meets the 2 s p95 but answers 10 % wrong (floor 0.99): the climb stops there, below the SLO's own knee.
    plan = load_test.plan(run([(1, 0.5, 1.0), (2, 1.5, 1.0), (4, 1.0, 0.9), (8, 3.0, 1.0)]))
    assert plan.capacity.met
    assert (plan.capacity.sustainable_rate_rps, plan.capacity.knee_rate_rps) == (2, 4)
    assert "quality" in plan.capacity.reason
    # The config's floor decides: without one, 4 rps holds and 8 (3 s > 2 s) stops the climb.
    relaxed = load_test.plan(run([(1, 0.5, 1.0), (2, 1.5, 1.0), (4, 1.0, 0.9), (8, 3.0, 1.0)], min_quality=0.0))
    assert (relaxed.capacity.sustainable_rate_rps, relaxed.capacity.knee_rate_rps) == (4, 8)


def test_apply_writes_the_files_then_an_audit_row_failed_when_no_rate_met_the_slo(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'gpuaas.db'}")
    missed = load_test.plan(run([(1, 2.5, 1.0)]))
    result = load_test.apply(missed, tmp_path / "out", store, flow_run_id=None)

    assert sorted(result.files) == ["plot", "requests", "summary", "sweep"]
    assert all(p.is_file() for p in result.files.values())
    row = store.get_audit(result.audit_id)
    assert row is not None and (row.action, row.outcome) == ("load-test", Outcome.failed)
    assert result.to_json()["capacity"]["met"] is False and result.to_json()["audit_id"] == result.audit_id


def test_a_remote_target_is_refused_before_a_request() -> None:
    with pytest.raises(ActionRefused, match="not a loopback address"):
        load_test.check(LoadTestConfig(url="http://10.1.2.3:8000/v1", model="m", rates=(1.0,), slo_quantile="p95",
                                       slo_seconds=1.0))
    with pytest.raises(ActionRefused, match="not a loopback address"):
        load_test.sweep(LoadTestConfig(url="http://10.1.2.3:8000/v1", model="m", rates=(1.0,), slo_quantile="p95",
                                       slo_seconds=1.0))
