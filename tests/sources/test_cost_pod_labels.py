"""Services keyed by pod labels: the cost report's outcome attribution from a policy's ``pod_labels``.

The default scenario with labels on two services' pods (``tests/cost_fleet.py``), 2 h of history:
``llm-chat`` (2 pods, 1 GPU each, diurnal traffic) carries ``app.kubernetes.io/part-of: assistant``
and ``tier: front``; ``llm-abort`` (1 pod, 4 req/s) carries ``tier: front``. Both run in namespace
``platform`` with three other services. Keyed by labels, without any ``model_name``, each service
must get exactly the requests, GPU-hours and cost that the model-keyed default policy gives it
(before ``pod_labels``, two such services could only be told apart by model, and without one each
got every request of the namespace). Read through OpenCost's allocation API (its pod labels) and
through its Prometheus metrics with ``kube_pod_labels``: the same answer. Two selectors that both
match the abort pod (``tier: front`` and ``app: llm-abort``) are an error naming both services,
as one line from ``gpuaas cost-report``, exit 1.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.scenario import default_scenario
from gpuaas.errors import ConfigError
from gpuaas.models import CostInputs
from gpuaas.policies.cost import CostReport, build_cost_report
from gpuaas.settings import GpuaasSettings
from gpuaas.sources.cost_window import read_cost_inputs
from tests.cost_fleet import COST_HISTORY, COST_POLICY, POD_EXTRA_PER_HOUR, cost_cluster, cost_settings

pytestmark = pytest.mark.integration
WINDOW_S = COST_HISTORY.total_seconds()
LABELS = {"llm-chat": {"app.kubernetes.io/part-of": "assistant", "tier": "front"}, "llm-abort": {"tier": "front"}}
KEYED = [{"name": "chat", "namespace": "platform", "latency_slo_seconds": 2.0,
          "pod_labels": {"app.kubernetes.io/part-of": "assistant"}},
         {"name": "abort", "namespace": "platform", "latency_slo_seconds": 2.0, "pod_labels": {"app": "llm-abort"}}]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    scenario = default_scenario()
    labelled = scenario.model_copy(update={"workloads": [
        w.model_copy(update={"labels": {**w.labels, **LABELS[w.name]}}) if w.name in LABELS else w
        for w in scenario.workloads]})
    with cost_cluster(tmp_path_factory.mktemp("cost-labels"), labelled) as cluster:
        yield cluster


def _policy(tmp: Path, services: list[dict[str, Any]]) -> Path:
    """The default policy (tenants, cost) with ``services`` in place of its model-keyed ones."""
    doc = yaml.safe_load(COST_POLICY.read_text())
    doc["services"] = services
    path = tmp / "policy.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _report(settings: GpuaasSettings, fleet: EmbeddedCluster) -> tuple[CostInputs, CostReport]:
    inputs = read_cost_inputs(settings, fleet.clock.now(), WINDOW_S)
    return inputs, build_cost_report(inputs, settings.policy, str(settings.policy_file))


@pytest.fixture(scope="module")
def by_model(fleet: EmbeddedCluster) -> dict[str, dict[str, Any]]:
    """The default policy's model-keyed services on the same fleet: what the label-keyed ones must equal."""
    _, report = _report(cost_settings(fleet), fleet)
    return {s["service"]: s for s in report.services}


@pytest.fixture(scope="module")
def keyed_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _policy(tmp_path_factory.mktemp("keyed"), KEYED)


def _same(service: dict[str, Any], model: dict[str, Any]) -> None:
    for key in ("requests", "good_requests", "verified_outcomes", "gpu_cost", "total_cost", "busy_gpu_hours",
                "productive_gpu_hours", "peak_rps"):
        assert service[key] == pytest.approx(model[key], rel=1e-6, abs=1e-9), key


@pytest.mark.parametrize("source", ["allocation-api", "opencost-metrics"])
def test_label_keyed_services_get_their_own_pods(source: str, fleet: EmbeddedCluster, keyed_policy: Path,
                                                 by_model: dict[str, dict[str, Any]]) -> None:
    """chat = llm-chat's 2 pods: $10 of GPU (2 x 2 h x $2.5), $11.28 in all; abort = llm-abort's pod,
    28,800 requests (4/s x 7,200 s), $5 / $5.64. Requests and the p95 rate are their own pods' only,
    though no model_name tells them apart; the labels come from OpenCost's allocations (keys as
    written) or from ``kube_pod_labels`` (keys as Prometheus writes them)."""
    overrides: dict[str, Any] = {"policy_file": keyed_policy}
    if source == "opencost-metrics":
        overrides["opencost_url"] = None
    inputs, report = _report(cost_settings(fleet, **overrides), fleet)
    chat, abort = (next(s for s in report.services if s["service"] == n) for n in ("chat", "abort"))
    _same(chat, by_model["llm-chat"])
    _same(abort, by_model["llm-abort"])
    assert abort["requests"] == pytest.approx(28_800, abs=240)
    assert chat["gpu_cost"] == pytest.approx(10.0, abs=0.1)
    assert chat["total_cost"] == pytest.approx(10.0 + 2 * 2 * POD_EXTRA_PER_HOUR, abs=0.1)
    assert abort["gpu_cost"] == pytest.approx(5.0, abs=0.05)
    chat_pods = [labels for (ns, _), labels in inputs.pod_labels.items() if ns == "platform"
                 and labels.get("app") == "llm-chat"]
    key = "app.kubernetes.io/part-of" if source == "allocation-api" else "app_kubernetes_io_part_of"
    assert len(chat_pods) == 2 and all(labels[key] == "assistant" for labels in chat_pods)
    # without pod_labels the two services would have been refused (both take every series of platform)
    unkeyed = [{k: v for k, v in s.items() if k != "pod_labels"} for s in KEYED]
    with pytest.raises(ConfigError, match="select the same serving series"):
        from gpuaas.policy import parse_policy
        parse_policy({"services": unkeyed})


def test_ambiguous_selector_names_both_services(fleet: EmbeddedCluster, tmp_path: Path) -> None:
    """``front`` (``tier: front``) and ``abort`` (``app: llm-abort``) both select the abort pod: the
    report refuses to count its requests twice, in one line naming the file and both services."""
    services = [{"name": "front", "namespace": "platform", "latency_slo_seconds": 2.0, "pod_labels": {"tier": "front"}},
                KEYED[1]]
    policy = _policy(tmp_path, services)
    settings = cost_settings(fleet, policy_file=policy)
    inputs = read_cost_inputs(settings, fleet.clock.now(), WINDOW_S)
    with pytest.raises(ConfigError, match=r"services 'front' and 'abort' both select pod platform/llm-abort"):
        build_cost_report(inputs, settings.policy, str(policy))

    env = {**os.environ, **fleet.settings_env(), "GPUAAS_NVML": "off", "GPUAAS_POLICY_FILE": str(policy),
           "GPUAAS_DATA_DIR": str(tmp_path / "data"), "GPUAAS_REPORTS_DIR": str(tmp_path / "reports"),
           "PREFECT_API_URL": ""}
    env.pop("GPUAAS_PUSHGATEWAY_URL", None)
    done = subprocess.run([sys.executable, "-m", "gpuaas.cli.app", "cost-report", "--window", "2h", "--no-compare"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("error:")]  # the rest: progress
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith(f"error: {policy}: services: services 'front' and 'abort' both select pod "
                               "platform/llm-abort"), lines[0]


def test_identical_selectors_are_refused_when_the_policy_is_read() -> None:
    from gpuaas.policy import parse_policy

    same = [dict(KEYED[0], name=n) for n in ("a", "b")]
    with pytest.raises(ConfigError, match=r"services 'a' and 'b' select the same serving series .*pod_labels"):
        parse_policy({"services": same}, "policy.yaml")
    with pytest.raises(ConfigError, match=r"policy.yaml: services\[0\]\.pod_labels"):
        parse_policy({"services": [dict(KEYED[0], pod_labels={"bad key!": "x"})]}, "policy.yaml")
