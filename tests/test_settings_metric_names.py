"""Metric and label names in the settings are refused when the settings load, naming the variable.

They go into PromQL as written: ``GPUAAS_METRICS__GPU_ACTIVITY=dcgm-util`` (a dash), a leading blank, or a
brace failed every query of every run as a degraded source, minutes later and without the variable's name,
and an empty list of pod labels made every workload's telemetry read as missing. A problem inside a
variable's JSON value names the variable and the item, not a variable that does not exist
(``GPUAAS_METRICS__POD_LABELS__0``).
"""

from __future__ import annotations

import pytest

from gpuaas.errors import ConfigError
from gpuaas.settings import load_settings


@pytest.mark.parametrize(("variable", "value", "says"), [
    ("GPUAAS_METRICS__GPU_ACTIVITY", "dcgm-util", "GPUAAS_METRICS__GPU_ACTIVITY: 'dcgm-util' is not a Prometheus "
                                                  "metric name"),
    ("GPUAAS_METRICS__FB_USED", " DCGM_FI_DEV_FB_USED", "GPUAAS_METRICS__FB_USED: ' DCGM_FI_DEV_FB_USED' is not a "
                                                        "Prometheus metric name"),
    ("GPUAAS_METRICS__VLLM_E2E_LATENCY", 'x{a="b"}', "GPUAAS_METRICS__VLLM_E2E_LATENCY: 'x{a=\"b\"}' is not a "
                                                     "Prometheus metric name"),
    ("GPUAAS_METRICS__POD_LABELS", '["pod", "exported-pod"]', "GPUAAS_METRICS__POD_LABELS[1]: 'exported-pod' is not a "
                                                              "Prometheus label name"),
    ("GPUAAS_METRICS__NAMESPACE_LABELS", "[]", "GPUAAS_METRICS__NAMESPACE_LABELS: List should have at least 1 item"),
    ("GPUAAS_PROMETHEUS_HEADERS", '{"X-Scope-OrgID": 7}', "GPUAAS_PROMETHEUS_HEADERS['X-Scope-OrgID']: Input should "
                                                          "be a valid string"),
], ids=["a dash", "a leading blank", "a selector", "a label with a dash", "no namespace label", "a header number"])
def test_a_name_prometheus_cannot_hold_is_refused_naming_the_variable(
        monkeypatch: pytest.MonkeyPatch, variable: str, value: str, says: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert str(info.value).startswith(f"environment: {says}"), str(info.value)


def test_the_names_of_a_renamed_install_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUAAS_METRICS__GPU_ACTIVITY", "gpu:engine_active:ratio")
    monkeypatch.setenv("GPUAAS_METRICS__GPU_ACTIVITY_SCALE", "1")  # a recording rule's scale is the operator's
    monkeypatch.setenv("GPUAAS_METRICS__POD_LABELS", '["container_pod"]')
    settings = load_settings()
    assert settings.metrics.gpu_activity == "gpu:engine_active:ratio"
    assert settings.metrics.pod_labels == ["container_pod"]
    monkeypatch.setenv("GPUAAS_METRICS__GPU_ACTIVITY", "gpu:engine-active")  # beside them, one that is not a name
    with pytest.raises(ConfigError, match="GPUAAS_METRICS__GPU_ACTIVITY: 'gpu:engine-active' is not a Prometheus"):
        load_settings()
