"""OpenCost: the real allocation captures (flat GPU fields), the nested ``gpuAllocation`` shape,
malformed answers naming the field, and the PromQL fallback over OpenCost's own metrics."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable

import pytest
from pydantic import SecretStr

from gpuaas.cluster.prometheus import PrometheusServer
from gpuaas.errors import MalformedResponse, SourceError, SourceUnavailable
from gpuaas.settings import GpuaasSettings
from gpuaas.sources.failures import describe_failure
from gpuaas.sources.opencost import COST_COLUMNS, parse_allocation, read_opencost
from tests.fixed_answer import fixed_answer_server
from tests.sources.helpers import NOW, Sample, fixture_path, parse_exposition, series


def _fixture(name: str) -> dict:  # type: ignore[type-arg]
    return json.loads(fixture_path("telemetry", "opencost", name).read_text())


def test_flat_shape_namespace_capture() -> None:
    frame = parse_allocation(_fixture("allocation-compute.aggregate-namespace.swagger-example.json"))
    assert list(frame.columns) == COST_COLUMNS
    assert frame["name"].tolist() == ["kube-system", "opencost", "prometheus"]
    row = frame.set_index("name").loc["opencost"]
    assert row["controller"] == "opencost" and row["controller_kind"] == "deployment"
    assert row["pod"] == "opencost-75dc7dcc49-xdx5t"
    assert row["gpu_count"] == 0 and row["gpu_cost"] == 0
    assert frame.set_index("name").loc["kube-system", "total_cost"] == pytest.approx(0.425469)


def test_flat_shape_label_capture_keeps_unallocated() -> None:
    frame = parse_allocation(_fixture("allocation-compute.aggregate-label-app.swagger-example.json"))
    assert set(frame["name"]) == {"__unallocated__", "app=opencost", "app=prometheus"}


def test_nested_gpu_allocation_shape() -> None:
    """Newer OpenCost hides the top-level GPU averages and nests them in ``gpuAllocation``."""
    doc = _fixture("allocation-compute.aggregate-namespace.swagger-example.json")
    alloc = copy.deepcopy(doc["data"][0]["opencost"])
    alloc.update(gpuCount=2.0, gpuHours=96.0, gpuCost=288.0,
                 gpuAllocation={"gpuDevice": "nvidia0", "gpuModel": "NVIDIA H100 80GB HBM3", "gpuUUID": "GPU-1",
                                "isGPUShared": False, "gpuUsageAverage": 0.12, "gpuRequestAverage": 2.0})
    row = parse_allocation({"code": 200, "data": [{"opencost": alloc}]}).iloc[0]
    assert (row["gpu_count"], row["gpu_hours"], row["gpu_cost"]) == (2.0, 96.0, 288.0)
    assert row["gpu_usage_average"] == 0.12 and row["gpu_model"] == "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize(
    ("payload", "field"),
    [({"code": 200}, "'data'"), ([1, 2], "JSON object"), ({"data": [{"ns": 3}]}, r"'data\[0\]\.ns'")],
    ids=["missing-data", "not-object", "bad-allocation"],
)
def test_malformed_names_the_field(payload: object, field: str) -> None:
    with pytest.raises(MalformedResponse, match=field):
        parse_allocation(payload)


def test_fallback_to_opencost_metrics_in_prometheus(
    prometheus_factory: Callable[[list[Sample]], PrometheusServer],
) -> None:
    capture = parse_exposition(fixture_path("telemetry", "opencost", "opencost-metrics.scraper-test-data.prom"))

    def priced(name: str, labels: dict[str, str], value: float, _i: int) -> float:
        if name == "node_gpu_hourly_cost":
            return 3.0 if labels["node"] == "node1" else 2.0
        if name == "container_gpu_allocation":
            return 2.0 if labels["pod"] == "pod1" else 1.0
        return value

    server = prometheus_factory(series(capture, minutes=70, value=priced))
    frame = read_opencost(GpuaasSettings(prometheus_url=server.url), NOW, 60).set_index("pod")
    assert frame.loc["pod1", "namespace"] == "namespace1"
    assert frame.loc["pod1", "gpu_hours"] == pytest.approx(2.0)
    assert frame.loc["pod1", "gpu_cost"] == pytest.approx(6.0)
    assert frame.loc["pod2", "gpu_cost"] == pytest.approx(2.0)


def test_the_gpu_cost_is_opencosts_own_total_with_its_adjustment() -> None:
    """OpenCost's GPU total is ``gpuCost + gpuCostAdjustment`` (a reconciled bill, a discount), as its ``totalCost``
    counts it; without the adjustment a discounted GPU would cost more than everything the pod was charged."""
    doc = _fixture("allocation-compute.aggregate-namespace.swagger-example.json")
    alloc = copy.deepcopy(doc["data"][0]["opencost"])
    alloc.update(gpuCount=1.0, gpuHours=48.0, gpuCost=100.0, gpuCostAdjustment=-20.0, cpuCostAdjustment=0.5)
    alloc["totalCost"] = alloc["cpuCost"] + 0.5 + alloc["ramCost"] + 80.0
    row = parse_allocation({"code": 200, "data": [{"opencost": alloc}]}).iloc[0]
    assert row["gpu_cost"] == 80.0 and row["cpu_cost"] == pytest.approx(alloc["cpuCost"] + 0.5)
    assert row["gpu_cost"] <= row["total_cost"]
    plain = parse_allocation(_fixture("allocation-compute.aggregate-namespace.swagger-example.json"))
    assert plain.set_index("name").loc["opencost", "cpu_cost"] == doc["data"][0]["opencost"]["cpuCost"]


@pytest.mark.parametrize(("location", "said"), [
    ("https://login.example/oauth2/start?rd=%2Fallocation&state=s3cret", "HTTP 302: redirected to https://login.example"),
    ("/oauth2/sign_in?state=s3cret", "HTTP 302: redirected to this server's /oauth2/sign_in"),
    (None, "HTTP 302: a redirect without a Location"),
    ("http://[::1/login?state=s3cret", "a redirect to an unreadable Location"),
], ids=["another-server", "same-server", "no-location", "unreadable-location"])
def test_a_redirect_is_not_followed_and_names_where_it_pointed(location: str | None, said: str) -> None:
    """An auth proxy sends a request without its credentials to a login page: the failure says so, names the
    page's server (never its query), is not retried (the proxy answers the same each time), and the credentials
    are not carried there."""
    with fixed_answer_server() as answer:
        url = answer(b"<html>login</html>", 302, {"Location": location} if location is not None else {})
        settings = GpuaasSettings(opencost_url=url, opencost_token="t0ken")
        with pytest.raises(SourceError) as raised:
            read_opencost(settings, NOW, 60)
    line = describe_failure(settings, "opencost", raised.value)
    assert line == (f"OpenCost at {url}: {said}, not followed (an auth proxy asking to log in: set "
                    "GPUAAS_OPENCOST_TOKEN, or point GPUAAS_OPENCOST_URL where it sends)")
    assert not isinstance(raised.value, SourceUnavailable)
    assert "s3cret" not in line and "t0ken" not in line


def test_header_values_lose_the_blanks_around_them_as_http_reads_them() -> None:
    settings = GpuaasSettings(opencost_headers={"X-Api-Key": " k3y\t"}, prometheus_headers={"X-Scope-OrgID": "a "})
    assert settings.opencost_headers["X-Api-Key"].get_secret_value() == "k3y"
    assert settings.prometheus_headers["X-Scope-OrgID"].get_secret_value() == "a"


def test_a_header_the_client_cannot_send_is_one_failure_not_retried() -> None:
    """A value past the settings' checks (set on the object, not loaded) that the HTTP client refuses."""
    with fixed_answer_server() as answer:
        url = answer(b"{}", 200)
        settings = GpuaasSettings(opencost_url=url).model_copy(
            update={"opencost_headers": {"X-Api-Key": SecretStr("k3y ")}})
        with pytest.raises(SourceError) as raised:
            read_opencost(settings, NOW, 60)
    assert not isinstance(raised.value, SourceUnavailable)
    assert describe_failure(settings, "opencost", raised.value) == (
        f"OpenCost at {url}: a request header could not be sent: the token or a header value holds a "
        "line break or another character a header cannot carry")
