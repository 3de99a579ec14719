"""Only the exporters' series speak for a pod once ``DCGM_SELECTOR`` / ``VLLM_SELECTOR`` name them.

Any scrape target can write a series under a DCGM or vLLM metric's name. A tenant's own ``/metrics`` scraped by a
PodMonitor (``job="team-a/app"``) writes ``DCGM_FI_PROF_GR_ENGINE_ACTIVE{pod="victim-0",namespace="team-b"} 0.9``
and ``vllm:request_success_total{pod="llm-0",namespace="team-b"}``; Prometheus keeps those labels as
``exported_pod``/``exported_namespace``, which gpuaas reads as the workload's pod. Unselected, the idle victim reads
as busy (kept out of reclaim) and the serving pod gains requests it never served. Against a real Prometheus:
without the settings the forgery shows (what the settings are for); with ``job="nvidia-dcgm-exporter"`` and
``job="vllm"`` the pods read as the exporters alone say, in the collect and in the cost report's GPU hours.
A value that is no list of label matchers is refused when the settings load, in one line naming the variable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest

from gpuaas.cluster.prometheus import PrometheusServer
from gpuaas.errors import ConfigError
from gpuaas.settings import GpuaasSettings, MetricNames, load_settings
from gpuaas.sources import PromClient
from gpuaas.sources import _promql as q
from gpuaas.sources import _promql_cost as qc
from gpuaas.sources.prometheus import pod_activity, queries_per_cycle, read_prometheus
from tests.sources.helpers import NOW, series

pytestmark = pytest.mark.integration
ACT = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
GPU = {"Hostname": "node-1", "gpu": "0", "modelName": "NVIDIA H100 80GB HBM3"}
EXPORTER = {"job": "nvidia-dcgm-exporter", "instance": "10.0.0.5:9400", "namespace": "team-b", "pod": "victim-0",
            "container": "main", "UUID": "GPU-real", **GPU}
FORGER = {"job": "team-a/app", "instance": "10.1.0.7:8080", "namespace": "team-a", "pod": "attacker-0",
          "container": "app", "exported_namespace": "team-b", "exported_pod": "victim-0", "UUID": "GPU-forged", **GPU}
VLLM = {"job": "vllm", "instance": "10.0.0.6:8000", "namespace": "team-b", "pod": "llm-0", "model_name": "m",
        "finished_reason": "stop"}
VLLM_FORGED = {**VLLM, "job": "team-a/app", "instance": "10.1.0.7:8080", "namespace": "team-a", "pod": "attacker-0",
               "exported_namespace": "team-b", "exported_pod": "llm-0"}
SELECTED = {"GPUAAS_METRICS__DCGM_SELECTOR": 'job="nvidia-dcgm-exporter"', "GPUAAS_METRICS__VLLM_SELECTOR": 'job="vllm"'}


@pytest.fixture(scope="module")
def prometheus(prometheus_factory: Callable[[Any], PrometheusServer]) -> PrometheusServer:
    """40 minutes every 15 s: the victim's GPU idle, the forged copy at 0.9; 1 request per step served by ``llm-0``,
    100 per step forged."""
    gauges = [(ACT, EXPORTER, 0.0), ("DCGM_FI_DEV_FB_USED", EXPORTER, 1000.0), (ACT, FORGER, 0.9)]
    counters = [("vllm:request_success_total", VLLM, 0.0), ("vllm:request_success_total", VLLM_FORGED, 0.0)]
    per_step = {"vllm": 1.0, "team-a/app": 100.0}
    return prometheus_factory(series(gauges, minutes=40) + series(
        counters, minutes=40, value=lambda _n, labels, _v, i: per_step[labels["job"]] * i))


def _read(prometheus: PrometheusServer) -> tuple[pd.Series, float]:
    """The victim's activity per pod (``pod_activity``) and ``llm-0``'s requests over the last 30 minutes."""
    reading = read_prometheus(load_settings(prometheus_url=prometheus.url, nvml="off"), NOW, [30])
    assert reading.queries == queries_per_cycle([30])
    victim = pod_activity(reading.gpus).set_index("pod").loc["victim-0"]
    serving = reading.serving
    requests = serving[(serving["stat"] == "requests") & (serving["pod"] == "llm-0")]["value"].sum()
    return victim, float(requests)


def test_unselected_a_tenants_forged_series_speak_for_another_pod(prometheus: PrometheusServer) -> None:
    victim, requests = _read(prometheus)
    assert victim["activity_max"] == pytest.approx(0.9) and victim["gpus_observed"] == 2
    assert requests == pytest.approx(101 * 120, rel=0.02)


def test_selected_only_the_exporters_series_count(prometheus: PrometheusServer, monkeypatch: pytest.MonkeyPatch
                                                  ) -> None:
    for variable, value in SELECTED.items():
        monkeypatch.setenv(variable, value)
    victim, requests = _read(prometheus)
    assert victim["activity_max"] == 0.0 and victim["activity_avg"] == 0.0
    assert victim["gpus_observed"] == 1 and victim["coverage"] == pytest.approx(1.0)
    assert requests == pytest.approx(120, rel=0.02)


def test_selected_the_cost_reports_gpu_hours_are_the_exporters(prometheus: PrometheusServer) -> None:
    m = MetricNames(dcgm_selector='job="nvidia-dcgm-exporter"')
    client = PromClient(GpuaasSettings(prometheus_url=prometheus.url))
    try:
        hours = {}
        for query in (qc.gpu_observed_query(m, 1800, 15), qc.gpu_busy_query(m, 0.05, 1800, 15)):
            for r in client.query_range(query, NOW, NOW, 1800):
                hours[(r["metric"]["gpuaas_stat"], r["metric"]["gpuaas_pod"])] = float(r["values"][-1][1])
    finally:
        client.close()
    assert hours == pytest.approx({("observed_h", "victim-0"): 0.5})  # one GPU for 30 minutes, never busy


def test_a_selector_value_is_quoted_by_the_query_not_pasted(prometheus: PrometheusServer) -> None:
    """A value with a quote and a backslash is written back through ``quote``: valid PromQL that matches no series,
    never a selector ended early."""
    m = MetricNames(dcgm_selector=r"""job='a"}) or vector(1) or x{y="\\', instance=~`.+`""")
    assert q.dcgm_series(m, ACT) == r'DCGM_FI_PROF_GR_ENGINE_ACTIVE{job="a\"}) or vector(1) or x{y=\"\\", instance=~".+"}'
    reading = read_prometheus(GpuaasSettings(prometheus_url=prometheus.url, metrics=m), NOW, [30])
    assert reading.gpus.empty


@pytest.mark.parametrize(("variable", "value", "says"), [
    ("GPUAAS_METRICS__DCGM_SELECTOR", "job=nvidia-dcgm-exporter",
     "GPUAAS_METRICS__DCGM_SELECTOR: 'job=nvidia-dcgm-exporter' is not a list of PromQL label matchers"),
    ("GPUAAS_METRICS__DCGM_SELECTOR", 'job="dcgm"}) or vector(1',
     "GPUAAS_METRICS__DCGM_SELECTOR: 'job=\"dcgm\"}) or vector(1' is not a list of PromQL label matchers"),
    ("GPUAAS_METRICS__VLLM_SELECTOR", 'job="vllm" namespace="serving"',
     "GPUAAS_METRICS__VLLM_SELECTOR: 'job=\"vllm\" namespace=\"serving\"' is not a list of PromQL label matchers"),
    ("GPUAAS_METRICS__VLLM_SELECTOR", '__name__="vllm:x"', "GPUAAS_METRICS__VLLM_SELECTOR: '__name__=\"vllm:x\"': "
                                                            "__name__ is not matched here"),
    ("GPUAAS_METRICS__DCGM_SELECTOR", 'job="a\\qb"', "GPUAAS_METRICS__DCGM_SELECTOR: unknown escape sequence \\q"),
], ids=["unquoted", "a closing brace", "no comma", "the metric name", "a bad escape"])
def test_a_bad_selector_is_refused_in_one_line_naming_the_variable(
        monkeypatch: pytest.MonkeyPatch, variable: str, value: str, says: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    message = str(info.value)
    assert message.startswith(f"environment: {says}"), message
    assert "\n" not in message


def test_a_selector_loads_with_or_without_braces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUAAS_METRICS__DCGM_SELECTOR", ' { job="nvidia-dcgm-exporter", namespace!~"team-.*", } ')
    m = load_settings().metrics
    assert m.dcgm_matchers == (("job", "=", "nvidia-dcgm-exporter"), ("namespace", "!~", "team-.*"))
    assert q.dcgm_series(m, ACT, 'pod="p"') == (
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{job="nvidia-dcgm-exporter", namespace!~"team-.*", pod="p"}')
    assert m.vllm_matchers == () and q.vllm_series(m, "vllm:request_success_total") == "vllm:request_success_total"
