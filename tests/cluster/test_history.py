"""The replayed history: fine steps for its last span, coarse ones before (``gpuaas.cluster._history``).

Checked end to end on a real Prometheus: the activity series has a sample at every sample interval
over the idle window, so gpuaas's coverage rule judges the fleet complete; further back and for the
slow series there is one sample per coarse step, and the latest value of every series is at the end.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from prometheus_api_client import PrometheusConnect

from gpuaas.cluster._history import COARSE_GRID_SERIES, history_steps, thin
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.policies.reclaim import telemetry_complete
from gpuaas.settings import GpuaasSettings, MetricNames
from gpuaas.sources.prometheus import read_prometheus
from tests.scenarios import embedded

MIN = timedelta(minutes=1)


def test_without_a_coarse_step_every_step_is_fine_and_on_the_grid() -> None:
    assert list(history_steps(timedelta(hours=2), MIN, None, timedelta(hours=1))) == [(MIN, True)] * 120


def test_coarse_steps_then_fine_ones_with_the_grid_counted_from_the_end() -> None:
    steps = list(history_steps(timedelta(hours=3, minutes=2), MIN, 5 * MIN, timedelta(hours=1)))
    assert sum((dt for dt, _ in steps), timedelta(0)) == timedelta(hours=3, minutes=2)
    coarse = [s for s in steps if s[0] == 5 * MIN]
    fine = [s for s in steps if s[0] == MIN]
    assert len(coarse) == 24 and all(on for _, on in coarse)  # 2 h of the 2 h 2 min before the last hour
    assert len(fine) == 62 and fine[-1] == (MIN, True)
    assert [i for i, (_, on) in enumerate(fine) if on] == list(range(1, 62, 5))


def test_off_the_grid_only_the_slow_gpu_series_are_left_out() -> None:
    samples = [(name, {"gpu": "0"}, 1.0, 0.0) for name in [*sorted(COARSE_GRID_SERIES),
                                                           "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "kueue_pending_workloads"]]
    assert thin(samples, True) == samples
    assert [s[0] for s in thin(samples, False)] == ["DCGM_FI_PROF_GR_ENGINE_ACTIVE", "kueue_pending_workloads"]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with embedded(tmp_path_factory.mktemp("history"), history=timedelta(hours=3), coarse_step=5 * MIN,
                  fine_history=timedelta(hours=1)) as running:
        yield running


def _count(prom: PrometheusConnect, at: float, expr: str) -> set[float]:
    """The distinct values of ``expr`` over the held GPU 0s (one per node); never empty."""
    found = {float(r["value"][1]) for r in prom.custom_query(expr, params={"time": at})}
    assert found, expr
    return found


@pytest.mark.integration
def test_a_mixed_history_is_fine_over_the_window_and_coarse_before(mixed: EmbeddedCluster) -> None:
    prom = PrometheusConnect(url=mixed.prometheus_url)
    at = mixed.clock.now().timestamp()
    active = 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0"}'
    assert _count(prom, at, f"count_over_time({active}[30m])") <= {30.0, 31.0}
    assert _count(prom, at, f"count_over_time({active}[30m] offset 2h)") <= {6.0, 7.0}
    assert _count(prom, at, 'count_over_time(DCGM_FI_DEV_POWER_USAGE{gpu="0"}[30m])') <= {6.0, 7.0}
    assert _count(prom, at, 'time() - timestamp(DCGM_FI_DEV_POWER_USAGE{gpu="0"})') == {0.0}


@pytest.mark.integration
def test_gpuaas_judges_the_mixed_history_complete(mixed: EmbeddedCluster) -> None:
    interval = mixed.step.total_seconds()
    settings = GpuaasSettings(prometheus_url=mixed.prometheus_url,
                              metrics=MetricNames(sample_interval_seconds=interval))
    gpus = read_prometheus(settings, mixed.clock.now(), [30]).gpus
    held = gpus[gpus["pod"].astype(str) != ""]
    assert len(held) == 3  # busy (2 GPUs) and nb (1); dark drops its telemetry
    assert telemetry_complete(held["coverage"], held["longest_gap_s"], interval).all()
    assert held["power_w"].notna().all()
