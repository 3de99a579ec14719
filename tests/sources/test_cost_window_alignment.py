"""The cost report never loses or shifts a day: the same report for any "now" within one sample step and
any chunking of the window, on a real Prometheus.

History: 3 days before NOW, a sample every 60 s. Pod ``steady`` (namespace team) has activity 0.5
throughout and holds 1 GPU at $2/h, 4 CPUs at $0.05/h and 16 GiB at $0.01/GiB-h (OpenCost's
metrics): every day 24 observed, 24 busy, 12 activity-weighted GPU-h, $48 of GPU and $48 + $4.8 +
$3.84 = $56.64 in all. Pod ``middle`` only runs on the middle day, at 0.9: 24/24/21.6 that day and
nothing on the others. A "now" of NOW plus a fraction of a second was rounded by the Prometheus
client differently from the report's own arithmetic, and moved every point into the next day.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuaas.cluster.prometheus import PrometheusServer
from gpuaas.policies.cost import build_cost_report
from gpuaas.policy import parse_policy
from gpuaas.settings import GpuaasSettings, MetricNames, load_settings
from gpuaas.sources.cost_window import align_end, read_cost_inputs
from tests.sources.helpers import NOW

pytestmark = pytest.mark.integration
DAYS = 3
S = (NOW - timedelta(days=DAYS)).timestamp()
ACT = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
NODE = {"node": "n1", "instance": "n1"}
POLICY = parse_policy({"tenants": [{"name": "team", "namespaces": ["team"]}]})


def _history() -> list[tuple[str, dict[str, str], float, float]]:
    out = []
    gpu = {"namespace": "team", "container": "main", "Hostname": "n1"}
    own = {"namespace": "team", "pod": "steady", "container": "main", **NODE}
    for k in range(1, DAYS * 1440 + 1):
        ts = S + 60 * k
        out.append((ACT, {**gpu, "pod": "steady", "gpu": "0", "UUID": "GPU-0"}, 0.5, ts))
        if 1440 < k <= 2880:
            out.append((ACT, {**gpu, "pod": "middle", "gpu": "1", "UUID": "GPU-1"}, 0.9, ts))
        out += [("container_gpu_allocation", own, 1.0, ts), ("container_cpu_allocation", own, 4.0, ts),
                ("container_memory_allocation_bytes", own, 16 * 2**30, ts),
                ("node_gpu_hourly_cost", NODE, 2.0, ts), ("node_cpu_hourly_cost", NODE, 0.05, ts),
                ("node_ram_hourly_cost", NODE, 0.01, ts)]
    return out


@pytest.fixture(scope="module")
def prom_settings(prometheus_factory: Callable[[Any], PrometheusServer],
                  tmp_path_factory: pytest.TempPathFactory) -> GpuaasSettings:
    prometheus = prometheus_factory(_history())
    return load_settings(prometheus_url=prometheus.url, nvml="off", data_dir=tmp_path_factory.mktemp("align"),
                         metrics=MetricNames(sample_interval_seconds=60))


def _read(settings: GpuaasSettings, fraction: float, chunks: int) -> tuple[dict[Any, Any], dict[Any, Any], Any]:
    inputs = read_cost_inputs(settings, NOW + timedelta(seconds=fraction), DAYS * 86400.0, chunks=chunks)
    gpu = {(r.pod, r.day): (round(r.observed_h, 6), round(r.busy_h, 6), round(r.active_h, 6))
           for r in inputs.gpu.itertuples()}
    assert inputs.costs is not None
    costs = {(r.pod, r.day): (round(r.gpu_hours, 6), round(r.gpu_cost, 4), round(r.total_cost, 4))
             for r in inputs.costs.itertuples()}
    return gpu, costs, build_cost_report(inputs, POLICY).tenants


def test_every_day_in_its_place(prom_settings: GpuaasSettings) -> None:
    gpu, costs, tenants = _read(prom_settings, 0.0, 3)
    assert gpu == {**{("steady", d): (24.0, 24.0, 12.0) for d in range(DAYS)}, ("middle", 1): (24.0, 24.0, 21.6)}
    assert costs == {("steady", d): (24.0, 48.0, 56.64) for d in range(DAYS)}
    [team] = tenants
    assert (team["busy_gpu_hours"], team["active_gpu_hours"], team["gpu_cost"], team["total_cost"]) == (
        96.0, 57.6, 144.0, 169.92)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fraction=st.floats(min_value=0.0, max_value=59.999), chunks=st.integers(min_value=1, max_value=DAYS))
def test_the_same_report_for_any_now_within_a_step_and_any_chunking(prom_settings: GpuaasSettings,
                                                                     fraction: float, chunks: int) -> None:
    assert align_end(NOW + timedelta(seconds=fraction), 60) == NOW
    assert _read(prom_settings, fraction, chunks) == _read(prom_settings, 0.0, DAYS)


def test_points_of_one_period_add_up(tmp_path: Path) -> None:
    """Two series of one pod and period (a GPU read through two label sets) are added, not overwritten."""
    from datetime import datetime

    from gpuaas.sources.cost_window import gpu_rows

    start = datetime.fromtimestamp(S, NOW.tzinfo)
    point = [[S + 86400, "2"]]
    rows = gpu_rows([{"metric": {"gpuaas_namespace": "team", "gpuaas_pod": "p", "gpuaas_stat": "busy_h"},
                      "values": point}] * 2, start, 86400.0, DAYS)
    assert rows["busy_h"].tolist() == [4.0]
