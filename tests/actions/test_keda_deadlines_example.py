"""The node-pool example in ``deployments/keda``: KEDA's shape, the series gpuaas pushes, and its
query evaluated on a real Prometheus: the GPUs the plan needs divided by 8 GPUs per node gives
the MachineSet's replicas; a stale or missing plan gives no answer (KEDA does not act on it).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from gpuaas.cluster.prometheus import PrometheusServer
from reports.deadlines import deadline_metrics
from tests.actions.keda import ROOT, assert_kedas_prometheus_trigger, instant
from tests.actions.keda import load_manifest as _load

EXAMPLE = ROOT / "deployments" / "keda" / "scaledobject-deadlines.yaml"


def test_the_scaled_object_targets_a_machineset_with_kedas_shape() -> None:
    ours = _load(EXAMPLE)
    spec = ours["spec"]
    assert spec["scaleTargetRef"]["apiVersion"] == "machine.openshift.io/v1beta1"
    assert spec["scaleTargetRef"]["kind"] == "MachineSet"
    assert 0 < spec["minReplicaCount"] < spec["maxReplicaCount"]
    assert_kedas_prometheus_trigger(ours)


def test_the_query_selects_what_gpuaas_pushes() -> None:
    query = _load(EXAMPLE)["spec"]["triggers"][0]["metadata"]["query"]
    families = {f.name: f for f in deadline_metrics([])}
    used = re.findall(r"(gpuaas_\w+)\{([^}]*)\}", query)
    assert {name for name, _ in used} == {"gpuaas_deadline_capacity_gpus", "gpuaas_extra_gpus_needed"}
    for name, selector in used:
        # ``job`` is the Pushgateway group's label (honor_labels), not one gpuaas sets itself.
        assert {k for k, _ in re.findall(r'(\w+)="([^"]*)"', selector)} - {"job"} <= set(families[name].labels)
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
        result = instant(server, query, at)
        if expected is None:
            assert result == [], i
            continue
        assert len(result) == 1, (i, result)
        assert math.ceil(float(result[0]["value"][1]) / per_node) == expected, i
