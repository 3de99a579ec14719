"""Text from the cluster never changes a PromQL query: one quoting helper, checked on a real Prometheus.

* a namespace ``a"}) or vector(1) or ({x="`` selected with ``matcher`` returns its one series
  and nothing else, where the same text pasted into the query unquoted adds a series of its own;
* backslashes, quotes, newlines, ``$1``, braces and non-ASCII text select exactly their series;
* ``any_of`` matches its values literally (``nvidia.com/gpu`` does not match ``nvidiaXcom/gpu``);
* the collect path (``read_prometheus``) reports a hostile namespace as data, one GPU row each;
* property: any text quoted by ``quote`` is one string literal (no unescaped quote inside).
"""

from __future__ import annotations

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuaas.cluster.prometheus import PrometheusServer
from gpuaas.settings import GpuaasSettings
from gpuaas.sources._promql import any_of, matcher, quote
from gpuaas.sources.prometheus import read_prometheus
from tests.sources.helpers import NOW, series

HOSTILE = 'a"}) or vector(1) or ({x="'
INJECTS = 'a"} or vector(1) or up{x="'
TRICKY = [HOSTILE, INJECTS, "back\\slash", 'quo"te', "new\nline", "$1", "{}", "été ☃", "a|b", ".*"]
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"


def _gpu(i: int, namespace: str) -> tuple[str, dict[str, str], float]:
    return (GPU_UTIL, {"gpu": str(i), "UUID": f"GPU-{i}", "Hostname": "node-1", "modelName": "NVIDIA H100",
                       "namespace": namespace, "pod": f"p{i}", "container": "main"}, 10.0 * i)


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> PrometheusServer:
    from gpuaas.cluster.prometheus import to_openmetrics

    capture = [_gpu(i, ns) for i, ns in enumerate([*TRICKY, "a"])]
    capture += [("kueue_cluster_queue_nominal_quota", {"cluster_queue": "q", "resource": r}, v)
                for r, v in (("nvidia.com/gpu", 8.0), ("nvidiaXcom/gpu", 99.0))]
    server = PrometheusServer(tmp_path_factory.mktemp("prom-escaping"))
    server.backfill(to_openmetrics(series(capture, minutes=35)))
    server.start()
    yield server  # type: ignore[misc]
    server.stop()


def _query(server: PrometheusServer, expr: str) -> dict[str, object]:
    resp = httpx.post(f"{server.url}/api/v1/query", data={"query": expr, "time": f"{NOW.timestamp():.3f}"},
                      timeout=10)
    return dict(resp.json())


def _result(server: PrometheusServer, expr: str) -> list[dict[str, object]]:
    answer = _query(server, expr)
    assert answer["status"] == "success", answer
    data = answer["data"]
    assert isinstance(data, dict)
    return list(data["result"])


def test_hostile_namespace_selects_its_series_and_nothing_else(prom: PrometheusServer) -> None:
    rows = _result(prom, f"{GPU_UTIL}{{{matcher('namespace', HOSTILE)}}}")
    assert [r["metric"]["namespace"] for r in rows] == [HOSTILE]  # type: ignore[index]
    # Pasted in unquoted, the reported text breaks the query, and a variant of it adds a series.
    assert _query(prom, f'sum by (namespace) ({GPU_UTIL}{{namespace="{HOSTILE}"}})')["status"] == "error"
    rows = _result(prom, f"{GPU_UTIL}{{{matcher('namespace', INJECTS)}}}")
    assert [r["metric"]["namespace"] for r in rows] == [INJECTS]  # type: ignore[index]
    pasted = _result(prom, f'{GPU_UTIL}{{namespace="{INJECTS}"}}')
    assert {"metric": {}, "value": [NOW.timestamp(), "1"]} in pasted
    assert [r["metric"].get("namespace") for r in pasted] == ["a", None]  # type: ignore[attr-defined]


@pytest.mark.parametrize("namespace", TRICKY, ids=[repr(t) for t in TRICKY])
def test_each_tricky_value_selects_exactly_its_series(prom: PrometheusServer, namespace: str) -> None:
    rows = _result(prom, f"{GPU_UTIL}{{{matcher('namespace', namespace)}}}")
    assert [r["metric"]["namespace"] for r in rows] == [namespace]  # type: ignore[index]


def test_any_of_matches_values_literally(prom: PrometheusServer) -> None:
    rows = _result(prom, f"kueue_cluster_queue_nominal_quota{{{any_of('resource', ['nvidia.com/gpu'])}}}")
    assert [r["metric"]["resource"] for r in rows] == ["nvidia.com/gpu"]  # type: ignore[index]
    rows = _result(prom, f"{GPU_UTIL}{{{any_of('namespace', ['a|b', '.*'])}}}")
    assert sorted(r["metric"]["namespace"] for r in rows) == [".*", "a|b"]  # type: ignore[index]


def test_collect_reports_a_hostile_namespace_as_data(prom: PrometheusServer) -> None:
    reading = read_prometheus(GpuaasSettings(prometheus_url=prom.url), NOW, [30])
    gpus = reading.gpus[reading.gpus["window_minutes"] == 30.0]
    assert sorted(gpus["namespace"]) == sorted([*TRICKY, "a"])
    assert gpus[gpus["namespace"] == HOSTILE]["pod"].tolist() == ["p0"]


@given(st.text())
def test_quote_is_always_one_string_literal(value: str) -> None:
    quoted = quote(value)
    inner = quoted[1:-1]
    assert quoted[0] == quoted[-1] == '"'
    i = 0
    while i < len(inner):  # every quote inside is escaped; every backslash starts an escape
        if inner[i] == "\\":
            assert inner[i + 1] in '\\"nrtx'
            i += 4 if inner[i + 1] == "x" else 2
            continue
        assert inner[i] != '"' and ord(inner[i]) >= 0x20
        i += 1
