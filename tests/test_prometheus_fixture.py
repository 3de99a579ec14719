"""The Prometheus fixture is real: a capture from dcgm-exporter, backfilled with promtool, queried
with prometheus-api-client exactly as the collect flow will query it."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from prometheus_api_client import PrometheusConnect
from prometheus_client.parser import text_string_to_metric_families

from gpuaas.cluster.prometheus import PrometheusServer, to_openmetrics

CAPTURE = "fixtures/telemetry/dcgm/metrics-h100x8-k8s-podmapped.aicr.prom"


def _capture_as_history(text: str, now: float, minutes: int) -> tuple[str, dict[tuple[str, str], float]]:
    """Replay each captured sample once a minute for ``minutes`` minutes ending a minute before now."""
    samples = []
    util: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            for step in range(minutes):
                samples.append((sample.name, dict(sample.labels), float(sample.value), now - 60 * (minutes - step)))
            if sample.name == "DCGM_FI_DEV_GPU_UTIL":
                util[(sample.labels["Hostname"], sample.labels["gpu"])] = float(sample.value)
    return to_openmetrics(samples), util


def test_backfilled_dcgm_capture_is_queryable(
    shared_dir: Path, prometheus_factory: Callable[[str], PrometheusServer]
) -> None:
    now = time.time()
    history, util = _capture_as_history((shared_dir / CAPTURE).read_text(), now, minutes=90)
    prom = prometheus_factory(history)
    client = PrometheusConnect(url=prom.url, disable_ssl=True)

    result = client.custom_query(
        "avg_over_time(DCGM_FI_DEV_GPU_UTIL[1h])", params={"time": now}
    )
    got = {(r["metric"]["Hostname"], r["metric"]["gpu"]): float(r["value"][1]) for r in result}
    assert got == util and len(got) == 8

    per_pod = client.custom_query(
        'sum by (namespace, pod) (count_over_time(DCGM_FI_DEV_GPU_UTIL{pod!=""}[30m]))', params={"time": now}
    )
    assert [(r["metric"]["namespace"], r["metric"]["pod"], r["value"][1]) for r in per_pod] == [
        ("dynamo-workload", "vllm-agg-0-vllmdecodeworker-s65j5", "30")
    ]
