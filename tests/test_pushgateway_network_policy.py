"""deployments/keda/networkpolicy-pushgateway.yaml is a valid NetworkPolicy that lets what it says in, and no more.

Valid: it deserialises into the Kubernetes client's ``V1NetworkPolicy`` and serialises back to the same
document (a misspelt field would be dropped on the way: ``namespaceSelctor`` would let every namespace in).
Selects what it says: its rules are evaluated as the API documents them (a ``from`` entry with a
``namespaceSelector`` alone admits every pod of the matching namespaces; a ``podSelector`` alone the
matching pods of the policy's own namespace; an ingress rule admits a peer on the listed ports). The
gpuaas flow runs (the namespace of deployments/kubernetes) and Prometheus reach the Pushgateway; a pod of
a tenant namespace, another pod of the monitoring namespace, and gpuaas on another port do not. And the
ScaledObjects read only what the gpuaas push jobs pushed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import ApiClient, V1NetworkPolicy

ROOT = Path(__file__).resolve().parents[1]
KEDA = ROOT / "deployments" / "keda"
POLICY = KEDA / "networkpolicy-pushgateway.yaml"
GPUAAS_NAMESPACE = yaml.safe_load((ROOT / "deployments" / "kubernetes" / "namespace.yaml").read_text())
PUSHGATEWAY = {"app.kubernetes.io/name": "prometheus-pushgateway", "app.kubernetes.io/instance": "pgw"}
PROMETHEUS = {"app.kubernetes.io/name": "prometheus", "prometheus": "k8s"}


def _policy() -> dict[str, Any]:
    if not POLICY.is_file():
        pytest.fail(f"missing: {POLICY}")
    document: dict[str, Any] = yaml.safe_load(POLICY.read_text())
    return document


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, "only matchLabels is evaluated here"
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def _namespace_labels(name: str, labels: dict[str, str] | None = None) -> dict[str, str]:
    return {**(labels or {}), "kubernetes.io/metadata.name": name}  # set by the API server on every namespace


def admits(policy: dict[str, Any], pod: dict[str, str], namespace: str, namespace_labels: dict[str, str],
           port: int) -> bool:
    """Whether ``policy`` lets a connection from ``pod`` (its labels) in ``namespace`` to ``port`` in."""
    spec = policy["spec"]
    for rule in spec.get("ingress") or []:
        if rule.get("ports") and not any(p.get("port") == port and p.get("protocol", "TCP") == "TCP"
                                         for p in rule["ports"]):
            continue
        for peer in rule.get("from") or [{}]:
            assert "ipBlock" not in peer
            if "namespaceSelector" in peer:
                in_namespace = _matches(peer["namespaceSelector"], namespace_labels)
            else:
                in_namespace = namespace == policy["metadata"]["namespace"]
            if in_namespace and _matches(peer.get("podSelector") or {}, pod):
                return True
    return False


def test_it_is_a_valid_network_policy() -> None:
    document = _policy()
    assert (document["apiVersion"], document["kind"]) == ("networking.k8s.io/v1", "NetworkPolicy")
    client = ApiClient()
    parsed = client.deserialize(json.dumps(document), "V1NetworkPolicy", "application/json")
    assert isinstance(parsed, V1NetworkPolicy)
    assert client.sanitize_for_serialization(parsed) == document  # nothing dropped as an unknown field


def test_it_selects_the_pushgateway_and_lets_only_gpuaas_and_prometheus_in() -> None:
    policy = _policy()
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress"]
    assert _matches(spec["podSelector"], PUSHGATEWAY) and not _matches(spec["podSelector"], PROMETHEUS)
    monitoring = policy["metadata"]["namespace"]
    gpuaas = GPUAAS_NAMESPACE["metadata"]["name"]
    gpuaas_labels = _namespace_labels(gpuaas, GPUAAS_NAMESPACE["metadata"].get("labels"))
    flow_run = {"job-name": "reclaim-abc12", "app.kubernetes.io/name": "gpuaas"}
    assert admits(policy, flow_run, gpuaas, gpuaas_labels, 9091)
    assert admits(policy, {"unrelated": "pod"}, gpuaas, gpuaas_labels, 9091)  # any pod of the gpuaas namespace
    assert admits(policy, PROMETHEUS, monitoring, _namespace_labels(monitoring), 9091)
    assert not admits(policy, flow_run, gpuaas, gpuaas_labels, 8080)
    assert not admits(policy, flow_run, "team-b", _namespace_labels("team-b"), 9091)
    assert not admits(policy, PROMETHEUS, "team-b", _namespace_labels("team-b"), 9091)  # a look-alike elsewhere
    assert not admits(policy, {"app": "grafana"}, monitoring, _namespace_labels(monitoring), 9091)
    assert not admits(policy, {}, "team-b", _namespace_labels("team-b", {"name": "gpuaas"}), 9091)


def test_it_stands_in_the_namespace_the_scaled_objects_read_prometheus_from() -> None:
    for path in sorted(KEDA.glob("scaledobject-*.yaml")):
        address = yaml.safe_load(path.read_text())["spec"]["triggers"][0]["metadata"]["serverAddress"]
        assert f".{_policy()['metadata']['namespace']}.svc:" in address, path.name


@pytest.mark.parametrize(("file", "task", "job"), [("scaledobject-idle.yaml", "reclaim", "gpuaas_reclaim"),
                                                   ("scaledobject-deadlines.yaml", "deadlines", "gpuaas_deadlines")])
def test_every_gpuaas_series_a_scaled_object_reads_is_pinned_to_its_push_job(file: str, task: str, job: str) -> None:
    assert f'"{job}"' in (ROOT / "tasks" / f"{task}.py").read_text()  # the job name the task pushes under
    query = yaml.safe_load((KEDA / file).read_text())["spec"]["triggers"][0]["metadata"]["query"]
    selectors = re.findall(r"\b(gpuaas_\w+|push_time_seconds)\{([^}]*)\}", query)
    assert selectors
    for name, selector in selectors:
        assert f'job="{job}"' in selector, (file, name)
