"""The activity scale follows the metric, never the setting that names it, against a real Prometheus.

``DCGM_FI_DEV_*_UTIL`` fields are percentages (0-100) and ``DCGM_FI_PROF_*`` ratios (0-1), whichever of
``GPU_ACTIVITY`` and ``GPU_UTIL_FALLBACK`` names them. With the two swapped (GPU_UTIL first, for a fleet
whose profiling metrics are unreliable) the fallback GR_ENGINE_ACTIVE was divided by 100, so a MIG
instance at 0.7 read 0.007 and was planned for reclaim, and GPU_UTIL was read undivided, so every GPU at
1 % or more read fully busy; the cost report's active and busy GPU-hours moved with them, and so did the
replay's history. A name whose scale gpuaas cannot know (a recording rule) needs one set, refused when
the settings load naming the variable; a scale set against a DCGM field's own is refused too.

Samples every 15 s for the 70 minutes before NOW:

* ``mig-0``: a MIG instance, GR_ENGINE_ACTIVE 0.7 only (no GPU_UTIL on MIG): reads 0.7, busy
* ``low-0``: GPU_UTIL 1 % only: reads 0.01, idle at the 5 % threshold
* ``half-0``: GPU_UTIL 45 % only: reads 0.45
* ``both-0``: GR_ENGINE_ACTIVE 0.9 and GPU_UTIL 20 %: the first-named metric wins, GPU_UTIL here: 0.2
* ``rule-0``: a recording rule ``gpu:busy:percent`` at 30 (percent): 0.3 with its scale set to 100
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuaas.cluster.prometheus import PrometheusServer
from gpuaas.errors import ConfigError
from gpuaas.settings import GpuaasSettings, MetricNames, load_settings
from gpuaas.sources.cost_window import read_cost_inputs
from gpuaas.sources.history import pod_history
from gpuaas.sources.prometheus import read_prometheus
from tests.sources.helpers import NOW

pytestmark = pytest.mark.integration
ACT, UTIL, RULE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL", "gpu:busy:percent"
SWAPPED = MetricNames(gpu_activity=UTIL, gpu_util_fallback=ACT)
EXPECTED = {"mig-0": 0.7, "low-0": 0.01, "half-0": 0.45, "both-0": 0.2}


def _gpu(pod: str, **extra: str) -> dict[str, str]:
    return {"namespace": "team", "pod": pod, "container": "main", "Hostname": "node-1", "gpu": "0",
            "UUID": f"GPU-{pod}", "modelName": "NVIDIA H100 80GB HBM3", **extra}


def _samples(metric: str, labels: dict[str, str], value: float) -> list[tuple[str, dict[str, str], float, float]]:
    return [(metric, labels, value, NOW.timestamp() - 15 * k) for k in range(70 * 4, -1, -1)]  # oldest first


@pytest.fixture(scope="module")
def prometheus(prometheus_factory: Callable[[Any], PrometheusServer]) -> PrometheusServer:
    return prometheus_factory([
        *_samples(ACT, _gpu("mig-0", GPU_I_ID="3", GPU_I_PROFILE="1g.10gb"), 0.7),
        *_samples(UTIL, _gpu("low-0"), 1.0),
        *_samples(UTIL, _gpu("half-0"), 45.0),
        *_samples(ACT, _gpu("both-0"), 0.9),
        *_samples(UTIL, _gpu("both-0"), 20.0),
        *_samples(RULE, _gpu("rule-0"), 30.0),
    ])


def test_the_live_reading_scales_each_metric_by_its_own_scale(prometheus: PrometheusServer) -> None:
    gpus = read_prometheus(GpuaasSettings(prometheus_url=prometheus.url, metrics=SWAPPED), NOW, [30]).gpus
    got = gpus.set_index("pod")
    assert {p: round(float(got.loc[p, "activity_max"]), 6) for p in EXPECTED} == EXPECTED
    assert {p: round(float(got.loc[p, "activity_avg"]), 6) for p in EXPECTED} == EXPECTED
    assert got.loc["mig-0", "signal"] == ACT and got.loc["both-0", "signal"] == UTIL


def test_a_recording_rule_is_read_at_the_scale_set_for_it(prometheus: PrometheusServer) -> None:
    metrics = MetricNames(gpu_activity=RULE, gpu_activity_scale=100)
    gpus = read_prometheus(GpuaasSettings(prometheus_url=prometheus.url, metrics=metrics), NOW, [30]).gpus
    rule = gpus.set_index("pod").loc["rule-0"]
    assert (round(float(rule["activity_max"]), 6), rule["signal"]) == (0.3, RULE)
    # GPU_UTIL, the default fallback, is still a percentage
    assert round(float(gpus.set_index("pod").loc["half-0", "activity_max"]), 6) == 0.45


def test_the_history_scales_each_metric_by_its_own_scale(prometheus: PrometheusServer) -> None:
    settings = GpuaasSettings(prometheus_url=prometheus.url, metrics=SWAPPED)
    start, end = NOW - timedelta(minutes=10), NOW
    frames = [chunk.samples for chunk in pod_history(settings, start, end, namespaces=("team",), chunk_s=600)]
    values = {str(r.pod): float(r.value) for frame in frames for r in frame.itertuples()}
    assert values == {p: round(v * 100, 6) for p, v in EXPECTED.items()}


def test_the_cost_reports_gpu_hours_scale_each_metric_by_its_own_scale(prometheus: PrometheusServer,
                                                                       tmp_path: Path) -> None:
    """An hour's GPU-hours: active is the reading at 0-1 x 1 h; busy (above 0.05) 1 h but for ``low-0``."""
    settings = load_settings(prometheus_url=prometheus.url, nvml="off", data_dir=tmp_path,
                             metrics=SWAPPED.model_copy(update={"sample_interval_seconds": 60}))
    gpu = read_cost_inputs(settings, NOW, 3600).gpu.set_index("pod")
    assert {p: round(float(gpu.loc[p, "active_h"]), 6) for p in EXPECTED} == EXPECTED
    assert {p: round(float(gpu.loc[p, "busy_h"]), 6) for p in EXPECTED} == {
        "mig-0": 1.0, "low-0": 0.0, "half-0": 1.0, "both-0": 1.0}


@pytest.mark.parametrize(("env", "says"), [
    ({"GPUAAS_METRICS__GPU_ACTIVITY": RULE},
     f"GPUAAS_METRICS__GPU_ACTIVITY_SCALE: {RULE} is not a DCGM field whose scale is known (DCGM_FI_PROF_* 0-1, "
     "DCGM_FI_DEV_*_UTIL 0-100): set the reading that means fully busy, 1 for a ratio or 100 for a percentage"),
    ({"GPUAAS_METRICS__GPU_UTIL_FALLBACK": "DCGM_RENAMED_UTIL"},
     "GPUAAS_METRICS__GPU_UTIL_FALLBACK_SCALE: DCGM_RENAMED_UTIL is not a DCGM field whose scale is known"),
    ({"GPUAAS_METRICS__GPU_ACTIVITY": UTIL, "GPUAAS_METRICS__GPU_ACTIVITY_SCALE": "1"},
     f"GPUAAS_METRICS__GPU_ACTIVITY_SCALE: {UTIL} reads 0-100, not 0-1: leave the scale unset"),
    ({"GPUAAS_METRICS__GPU_ACTIVITY_SCALE": "0"},
     "GPUAAS_METRICS__GPU_ACTIVITY_SCALE: Input should be greater than 0"),
], ids=["recording-rule-without-scale", "renamed-fallback-without-scale", "scale-against-dcgm", "zero"])
def test_a_scale_missing_or_wrong_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch,
                                                                 env: dict[str, str], says: str) -> None:
    for variable, value in env.items():
        monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert str(info.value).startswith(f"environment: {says}"), str(info.value)
    assert "\n" not in str(info.value)


def test_dcgm_fields_need_no_scale_and_a_rule_takes_the_one_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUAAS_METRICS__GPU_ACTIVITY", "DCGM_FI_PROF_SM_ACTIVE")
    monkeypatch.setenv("GPUAAS_METRICS__GPU_UTIL_FALLBACK", "DCGM_FI_DEV_MEM_COPY_UTIL")
    m = load_settings().metrics
    assert (m.gpu_activity_full_scale, m.gpu_util_fallback_full_scale) == (1.0, 100.0)
    monkeypatch.setenv("GPUAAS_METRICS__GPU_UTIL_FALLBACK", RULE)
    monkeypatch.setenv("GPUAAS_METRICS__GPU_UTIL_FALLBACK_SCALE", "100")
    assert load_settings().metrics.gpu_util_fallback_full_scale == 100.0
