"""The node-pool example in ``deployments/keda``: KEDA's shape, the series gpuaas pushes, and its
query evaluated on a real Prometheus: the GPUs the plan needs divided by 8 GPUs per node gives
the MachineSet's replicas; a stale or missing plan gives no answer (KEDA does not act on it).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gpuaas.cluster.prometheus import PrometheusServer
from reports.deadlines import deadline_metrics

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "deployments" / "keda" / "scaledobject-deadlines.yaml"
KEDA_DOC = ROOT / ".." / "shared" / "fixtures" / "telemetry" / "keda" / "scaledobject-prometheus.keda-docs-2.21.yaml"


def _load(path: Path) -> dict[str, Any]:
    if not path.is_file():
        pytest.fail(f"missing: {path}")
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


def test_the_scaled_object_targets_a_machineset_with_kedas_shape() -> None:
    ours, theirs = _load(EXAMPLE), _load(KEDA_DOC)
    assert (ours["apiVersion"], ours["kind"]) == (theirs["apiVersion"], theirs["kind"])
    spec = ours["spec"]
    assert spec["scaleTargetRef"]["apiVersion"] == "machine.openshift.io/v1beta1"
    assert spec["scaleTargetRef"]["kind"] == "MachineSet"
    assert 0 < spec["minReplicaCount"] < spec["maxReplicaCount"]
    [trigger] = spec["triggers"]
    [doc_trigger] = theirs["spec"]["triggers"]
    assert trigger["type"] == doc_trigger["type"] == "prometheus"
    assert set(doc_trigger["metadata"]) <= set(trigger["metadata"])
    assert all(isinstance(v, str) for v in trigger["metadata"].values())
    assert trigger["metadata"]["ignoreNullValues"] == "false"


def test_the_query_selects_what_gpuaas_pushes() -> None:
    query = _load(EXAMPLE)["spec"]["triggers"][0]["metadata"]["query"]
    families = {f.name: f for f in deadline_metrics([])}
    used = re.findall(r"(gpuaas_\w+)\{([^}]*)\}", query)
    assert {name for name, _ in used} == {"gpuaas_deadline_capacity_gpus", "gpuaas_extra_gpus_needed"}
    for name, selector in used:
        assert {k for k, _ in re.findall(r'(\w+)="([^"]*)"', selector)} <= set(families[name].labels)
    assert 'job="gpuaas_deadlines"' in query  # the job name tasks.deadlines pushes under


CASES = [
    # (capacity, extra GPUs, age of the last push in s, expected replicas; None: no answer)
    (32, 0, 60, 4),
    (32, 4, 60, 5),
    (32, 12, 60, 6),
    (32, 12, 7200, None),   # stale plan: never act on it
    (None, None, 60, None),  # gpuaas published nothing for this pool
]


@pytest.mark.integration
def test_the_query_on_a_real_prometheus(prometheus_factory: Callable[[Any], PrometheusServer]) -> None:
    metadata = _load(EXAMPLE)["spec"]["triggers"][0]["metadata"]
    per_node = float(metadata["threshold"])
    at = float(int(time.time()) // 60 * 60 - 600)
    samples: list[tuple[str, dict[str, str], float, float]] = []
    for i, (cap, extra, age, _) in enumerate(CASES):  # one Prometheus: each case is its own cohort and job
        labels = {"job": f"case-{i}", "cohort": f"case-{i}", "flavor": "h100"}
        for dt in (-120.0, -60.0, 0.0):
            if cap is not None and extra is not None:
                samples.append(("gpuaas_deadline_capacity_gpus", labels, float(cap), at + dt))
                samples.append(("gpuaas_extra_gpus_needed", labels, float(extra), at + dt))
            samples.append(("push_time_seconds", {"job": f"case-{i}"}, at - age, at + dt))
    samples.sort(key=lambda s: (s[0], sorted(s[1].items()), s[3]))
    server = prometheus_factory(samples)
    for i, (*_, expected) in enumerate(CASES):
        query = metadata["query"].replace('cohort="research"', f'cohort="case-{i}"').replace(
            'job="gpuaas_deadlines"', f'job="case-{i}"')
        resp = httpx.get(f"{server.url}/api/v1/query", params={"query": query, "time": at})
        resp.raise_for_status()
        result = resp.json()["data"]["result"]
        if expected is None:
            assert result == [], i
            continue
        assert len(result) == 1, (i, result)
        assert math.ceil(float(result[0]["value"][1]) / per_node) == expected, i
