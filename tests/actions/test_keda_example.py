"""The KEDA example in ``deployments/keda``: a valid ScaledObject, driven by the series gpuaas pushes.

Checked against KEDA's own ``scaledobject-prometheus`` example (the fixture), against the
metric names and labels ``reports.reclaim.idle_metrics`` publishes, and by evaluating its
query on a real Prometheus in each case that matters: idle -> 0 (scale to zero), busy -> 1,
gpuaas silent while the Deployment runs -> 1 (never scaled down on a missing signal), at
zero with pending work -> 1, at zero without -> 0; and the same idle verdict left behind for
35 minutes (over the stated 1800 s) -> ignored.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import pytest

from gpuaas.cluster.prometheus import PrometheusServer
from reports.reclaim import idle_metrics
from tests.actions.keda import ROOT, assert_kedas_prometheus_trigger, instant
from tests.actions.keda import load_manifest as _load

EXAMPLE = ROOT / "deployments" / "keda" / "scaledobject-idle.yaml"


def test_the_scaled_object_has_kedas_shape() -> None:
    ours = _load(EXAMPLE)
    spec = ours["spec"]
    assert spec["scaleTargetRef"]["name"] and spec["scaleTargetRef"]["kind"] in ("Deployment", "StatefulSet")
    assert spec["minReplicaCount"] == 0 < spec["maxReplicaCount"]
    assert_kedas_prometheus_trigger(ours)


def test_the_query_selects_what_gpuaas_pushes() -> None:
    query = _load(EXAMPLE)["spec"]["triggers"][0]["metadata"]["query"]
    families = {f.name: f for f in idle_metrics(pd.DataFrame(), evidence_at=datetime.now(UTC))}
    selected = re.findall(r"(gpuaas_\w+)\{([^}]*)\}", query)
    assert [name for name, _ in selected] == ["gpuaas_workload_idle", "gpuaas_last_success_timestamp_seconds"]
    for name, selector in selected:
        assert name in families
        # ``job`` is the Pushgateway group's label (honor_labels), not one gpuaas sets itself.
        assert {k for k, _ in re.findall(r'(\w+)="([^"]*)"', selector)} - {"job"} <= set(families[name].labels)


CASES = [
    # (idle series or None, Deployment replicas or None, pending workloads, expected value with a fresh
    # verdict, expected value once the verdict is 35 minutes old and nobody replaced it)
    (1.0, 1.0, 0.0, 0.0, 1.0),
    (0.0, 1.0, 0.0, 1.0, 1.0),
    (None, 1.0, 0.0, 1.0, 1.0),
    (None, 0.0, 2.0, 1.0, 1.0),
    (None, 0.0, 0.0, 0.0, 0.0),
    (1.0, 0.0, 0.0, 0.0, 0.0),
]
LATER = 35 * 60


@pytest.mark.integration
def test_the_query_on_a_real_prometheus(prometheus_factory: Callable[[Any], PrometheusServer]) -> None:
    """The Pushgateway keeps serving the last set: a verdict whose snapshot is over 1800 s old is ignored."""
    query = _load(EXAMPLE)["spec"]["triggers"][0]["metadata"]["query"]
    at = float(int(time.time()) // 60 * 60 - 3600)
    samples: list[tuple[str, dict[str, str], float, float]] = []
    for dt in range(-120, LATER + 1, 60):
        samples.append(("gpuaas_last_success_timestamp_seconds", {"job": "gpuaas_reclaim"}, at, at + dt))
    for i, (idle, replicas, pending, *_) in enumerate(CASES):
        ns = f"case-{i}"
        for dt in range(-120, LATER + 1, 60):
            if idle is not None:
                samples.append(("gpuaas_workload_idle", {"namespace": ns, "kind": "Deployment", "name": "llm",
                                                         "tenant": "t", "job": "gpuaas_reclaim"}, idle, at + dt))
            if replicas is not None:
                samples.append(("kube_deployment_spec_replicas", {"namespace": ns, "deployment": "llm"}, replicas,
                                at + dt))
            samples.append(("kueue_local_queue_pending_workloads", {"namespace": ns, "local_queue": "q",
                                                                    "status": "active"}, pending, at + dt))
    samples.sort(key=lambda s: (s[0], sorted(s[1].items()), s[3]))
    server = prometheus_factory(samples)
    for i, (*_, fresh, stale) in enumerate(CASES):
        for when, expected in ((at, fresh), (at + LATER, stale)):
            result = instant(server, query.replace('namespace="team-a"', f'namespace="case-{i}"'), when)
            assert len(result) == 1, (i, when - at, result)
            assert float(result[0]["value"][1]) == expected, (i, when - at)
