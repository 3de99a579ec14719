"""A pod's serving counters held twice by an HA pair are counted once, against a real Prometheus.

Two Prometheus servers scraping the same vLLM pod (``prometheus_replica`` r1/r2) behind an endpoint that does not
deduplicate them (Thanos without ``--query.replica-label``, Mimir without its HA tracker, federation) hold every
counter twice. Summed as they were, the pod's requests doubled, which halved its cost per outcome, and its p95
request rate doubled, which doubled the replicas it was sized at. Each namespace holds one pod ``llm-0`` serving
model ``m``, 1 request per 15 s (``stop``), every request within 1 s, for 40 minutes; the window is the last 30:

* ``ns-single``: one copy of each series (what every other namespace must read as);
* ``ns-pair``: two copies, ``prometheus_replica`` r1 and r2;
* ``ns-engines``: two data-parallel engines (``engine`` 0 and 1) of one pod, each serving as much: twice the
  requests, not folded into one;
* ``ns-moved``: a StatefulSet pod recreated under its name 20 minutes ago, at a new address (``instance``) and with
  new counters from 0: its two servers' requests add up to one pod's.

Both readers are checked: the collect's ``vllm_query`` and the cost report's ``serving_window_query`` (requests,
latency buckets, the rate quantile per namespace and per label-keyed service, and the quality-gated requests).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gpuaas.cluster.prometheus import PrometheusServer
from gpuaas.policy import parse_policy
from gpuaas.settings import GpuaasSettings
from gpuaas.sources import PromClient
from gpuaas.sources import _promql_cost as qc
from gpuaas.sources.prometheus import queries_per_cycle, read_prometheus
from tests.sources.helpers import NOW

pytestmark = pytest.mark.integration
STEP_S = 15.0
SPAN_S = 40 * 60.0
MOVED_AT = NOW.timestamp() - 20 * 60
WINDOW_S = 1800.0
NAMESPACES = ("ns-single", "ns-pair", "ns-engines", "ns-moved")
Sample = tuple[str, dict[str, str], float, float]


def _server(namespace: str, instance: str = "10.0.0.1:8000", since: float = NOW.timestamp() - SPAN_S,
            **extra: str) -> list[Sample]:
    """One vLLM server's counters from ``since`` to NOW: a ``stop`` request per step, a ``length`` counter that
    stays 0, and the e2e latency histogram with every request in the 1 s bucket."""
    base = {"namespace": namespace, "pod": "llm-0", "model_name": "m", "engine": "0", "job": "vllm",
            "instance": instance, **extra}
    out: list[Sample] = []
    steps = int((NOW.timestamp() - since) // STEP_S)
    for i in range(steps + 1):
        t = since + i * STEP_S
        out += [("vllm:request_success_total", {**base, "finished_reason": "stop"}, float(i), t),
                ("vllm:request_success_total", {**base, "finished_reason": "length"}, 0.0, t),
                ("eval_score", {k: v for k, v in base.items() if k != "engine"}, 1.0, t)]
        for le, count in (("0.5", 0.0), ("1.0", float(i)), ("+Inf", float(i))):
            out.append(("vllm:e2e_request_latency_seconds_bucket", {**base, "le": le}, count, t))
    return out


@pytest.fixture(scope="module")
def prometheus(prometheus_factory: Callable[[Any], PrometheusServer]) -> PrometheusServer:
    return prometheus_factory([
        *_server("ns-single"),
        *_server("ns-pair", prometheus_replica="r1"),
        *_server("ns-pair", prometheus_replica="r2"),
        *_server("ns-engines", engine="0"),
        *_server("ns-engines", engine="1"),
        *[s for s in _server("ns-moved", "10.0.0.1:8000") if s[3] < MOVED_AT],
        *_server("ns-moved", "10.0.0.9:8000", since=MOVED_AT),
    ])


def test_the_collect_counts_an_ha_pairs_requests_once(prometheus: PrometheusServer) -> None:
    reading = read_prometheus(GpuaasSettings(prometheus_url=prometheus.url), NOW, [30])
    assert reading.queries == queries_per_cycle([30])
    serving = reading.serving
    stop = serving[(serving["stat"] == "requests") & (serving["finished_reason"] == "stop")]
    requests = stop.set_index("namespace")["value"]
    assert requests["ns-single"] == pytest.approx(120, rel=0.02)
    assert requests["ns-pair"] == pytest.approx(requests["ns-single"])
    assert requests["ns-engines"] == pytest.approx(2 * requests["ns-single"])
    assert requests["ns-moved"] == pytest.approx(requests["ns-single"], rel=0.1)
    buckets = serving[serving["stat"] == "latency_bucket"].pivot_table(index="le", columns="namespace",
                                                                       values="value")
    assert buckets["ns-pair"].to_dict() == pytest.approx(buckets["ns-single"].to_dict())


def _cost_answer(prometheus: PrometheusServer) -> dict[tuple[str, ...], float]:
    """The serving query of a 30-minute period ending at NOW, one service per namespace keyed by its pod's labels
    and gated on ``eval_score``: ``(stat, namespace or service, finished_reason or le) -> value``."""
    services = [{"name": f"svc-{ns}", "namespace": ns, "model_name": "m", "latency_slo_seconds": 2.0,
                 "pod_labels": {"app": "llm"}, "quality": {"metric": "eval_score", "threshold": 0.5}}
                for ns in NAMESPACES]
    policy = parse_policy({"services": services})
    pods = {f"svc-{ns}": [(ns, "llm-0")] for ns in NAMESPACES}
    settings = GpuaasSettings(prometheus_url=prometheus.url)
    client = PromClient(settings)
    try:
        expr = qc.serving_window_query(settings.metrics, policy.services, WINDOW_S, 0.95, pods, NOW.timestamp())
        results = client.query_range(expr, NOW, NOW, WINDOW_S)
    finally:
        client.close()
    answer: dict[tuple[str, ...], float] = {}
    for r in results:
        labels = r["metric"]
        who = labels.get("gpuaas_service") or labels.get("gpuaas_namespace", "")
        key = (labels["gpuaas_stat"], who, labels.get("finished_reason") or labels.get("le", ""))
        answer[key] = answer.get(key, 0.0) + float(r["values"][-1][1])
    return answer


def test_the_cost_report_counts_an_ha_pairs_requests_and_rate_once(prometheus: PrometheusServer) -> None:
    answer = _cost_answer(prometheus)

    def of(namespace: str) -> dict[tuple[str, str], float]:
        """Its rows: ``(stat, finished_reason or le)``, the service's rate quantile as ``(rate_quantile, service)``."""
        rows = {(stat, what): v for (stat, who, what), v in answer.items() if who == namespace}
        return rows | {(stat, "service"): v for (stat, who, _), v in answer.items() if who == f"svc-{namespace}"}

    single = of("ns-single")
    assert single[("requests", "stop")] == pytest.approx(120, rel=0.02)
    assert single[("rate_quantile", "")] == single[("rate_quantile", "service")] == pytest.approx(1 / STEP_S)
    assert {"latency_bucket", "quality_ok:eval_score", "quality_span:eval_score"} <= {s for s, _ in single}
    assert of("ns-pair") == pytest.approx(single)
    engines = of("ns-engines")
    for key in (("requests", "stop"), ("rate_quantile", ""), ("rate_quantile", "service")):
        assert engines[key] == pytest.approx(2 * single[key]), key
    assert of("ns-moved")[("requests", "stop")] == pytest.approx(single[("requests", "stop")], rel=0.1)
