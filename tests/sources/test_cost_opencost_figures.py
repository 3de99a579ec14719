"""OpenCost answers that hold no bill, through the cost report on the embedded cluster.

A relay in front of the fleet's OpenCost rewrites its ``/allocation`` answer (``tests/cost_fleet.py``: 2 h of
history, every tenant's GPUs priced). What each answer must give:

* no allocation at all (``[]``, ``[null]``, ``[{}]``) for a window the fleet held GPUs in: the source failed, named
  with the window; the money comes from OpenCost's metrics, never $0;
* a null ``gpuCost`` (OpenCost's word for a figure it could not compute): that cost unknown for the pod's tenant
  and the cluster, and the waste with it, never $0; the other tenants keep theirs;
* a negative, infinite or absurd figure (past ten million): the source failed, naming the field and the
  allocation; nothing is summed from it, and no warning reaches the terminal.
"""

from __future__ import annotations

import json
import threading
import urllib.request
import warnings
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.models import CostInputs
from gpuaas.policies.cost import CostReport, build_cost_report
from gpuaas.sources.cost_window import read_cost_inputs
from reports.cost_report import cost_first_line
from tests.cost_fleet import COST_HISTORY, cost_cluster, cost_settings

pytestmark = pytest.mark.integration
Rewrite = Callable[[dict[str, Any]], Any]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with cost_cluster(tmp_path_factory.mktemp("cost-figures")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def relay(fleet: EmbeddedCluster) -> Iterator[Callable[[Rewrite], str]]:
    """``relay(rewrite)``: the URL of an OpenCost whose answers are the fleet's, passed through ``rewrite``."""
    upstream = str(fleet.opencost_url).rstrip("/")
    current: dict[str, Rewrite] = {"rewrite": lambda doc: doc}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server dispatches on this name
            with urllib.request.urlopen(upstream + self.path, timeout=30) as answer:
                doc = json.loads(answer.read())
            body = json.dumps(current["rewrite"](doc)).encode()  # NaN and Infinity as Python writes them
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()

    def point(rewrite: Rewrite) -> str:
        current["rewrite"] = rewrite
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    yield point
    httpd.shutdown()
    httpd.server_close()


def _report(fleet: EmbeddedCluster, url: str) -> tuple[CostInputs, CostReport]:
    settings = cost_settings(fleet, opencost_url=url)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's overflow warnings would reach the operator's terminal
        inputs = read_cost_inputs(settings, fleet.clock.now(), COST_HISTORY.total_seconds())
        return inputs, build_cost_report(inputs, settings.policy)


def _each_allocation(doc: dict[str, Any], change: Callable[[str, dict[str, Any]], None]) -> dict[str, Any]:
    for step in doc["data"]:
        for name, alloc in (step or {}).items():
            change(name, alloc)
    return doc


@pytest.mark.parametrize("data", [[], [None], [{}]], ids=["empty-list", "null-set", "empty-set"])
def test_no_allocation_for_a_window_gpus_ran_in_is_a_failed_source(
        fleet: EmbeddedCluster, relay: Callable[[Rewrite], str], data: list[Any]) -> None:
    url = relay(lambda doc: {**doc, "data": data})
    inputs, report = _report(fleet, url)
    status = inputs.sources["opencost"]
    assert not status.ok and status.error is not None
    assert status.error.startswith(f"OpenCost at {url}: no allocation for the window ")
    assert "GPU-hours in it: its cost is unknown, not $0" in status.error
    assert report.cluster["total_cost"] > 0 and report.cluster["gpu_cost"] > 0  # OpenCost's metrics, not $0


def test_a_null_gpu_cost_is_unknown_for_its_tenant_and_the_cluster(fleet: EmbeddedCluster,
                                                                    relay: Callable[[Rewrite], str]) -> None:
    """The platform tenant's pods have no ``gpuCost``: its GPU cost, its waste and the cluster's are unknown (not
    $0); the forecast tenant keeps its GPU cost, and every total cost is OpenCost's ``totalCost`` as before."""
    def null_platform(name: str, alloc: dict[str, Any]) -> None:
        if name.startswith("platform/"):
            alloc["gpuCost"] = None

    clean, before = _report(fleet, relay(lambda doc: doc))
    inputs, report = _report(fleet, relay(lambda doc: _each_allocation(doc, null_platform)))
    assert inputs.sources["opencost"].ok  # an unknown figure is no failure: it is said, not guessed
    tenants = {t["tenant"]: t for t in report.tenants}
    was = {t["tenant"]: t for t in before.tenants}
    assert (tenants["platform"]["gpu_cost"], tenants["platform"]["waste_cost"]) == (None, None)
    assert tenants["platform"]["total_cost"] == was["platform"]["total_cost"]
    assert tenants["forecast"]["gpu_cost"] == was["forecast"]["gpu_cost"] > 0
    assert (report.cluster["gpu_cost"], report.cluster["waste_cost"]) == (None, None)
    assert report.cluster["total_cost"] == before.cluster["total_cost"]
    assert any(n.startswith("OpenCost gave no gpuCost (null) for ") and "platform" in n for n in report.notes)
    line = cost_first_line(report)
    assert "GPU spend unknown" in line and "idle-GPU waste unknown (the GPU cost is unknown)" in line
    assert "$0.00" not in line


@pytest.mark.parametrize(("field", "value", "says"), [
    ("gpuCost", -1000.0, "gpuCost is -1000, below 0"),
    ("gpuHours", -2.0, "gpuHours is -2, below 0"),
    ("totalCost", float("inf"), "totalCost is inf, not a finite number"),
    ("gpuCost", 1e308, "gpuCost is 1e+308, past 10,000,000"),
    ("gpuHours", 1e308, "gpuHours is 1e+308, past 10,000,000"),
], ids=["negative-cost", "negative-hours", "infinite-total", "huge-cost", "huge-hours"])
def test_a_figure_no_bill_holds_is_refused_naming_the_field_and_allocation(
        fleet: EmbeddedCluster, relay: Callable[[Rewrite], str], field: str, value: float, says: str) -> None:
    def corrupt(name: str, alloc: dict[str, Any]) -> None:
        if name.startswith("forecast/"):
            alloc[field] = value

    url = relay(lambda doc: _each_allocation(doc, corrupt))
    inputs, report = _report(fleet, url)
    status = inputs.sources["opencost"]
    assert not status.ok and status.error is not None and "\n" not in status.error
    assert status.error.startswith(f"OpenCost at {url}: field 'data[0].forecast/") and says in status.error
    forecast = next(t for t in report.tenants if t["tenant"] == "forecast")
    assert 0 < forecast["gpu_cost"] < 1e6 and 0 < forecast["total_cost"] < 1e6  # OpenCost's metrics, not the figure


def test_null_gpu_hours_are_the_telemetry_s_hours_not_zero(fleet: EmbeddedCluster,
                                                           relay: Callable[[Rewrite], str]) -> None:
    """Every ``gpuHours`` null: the allocated GPU-hours are those DCGM saw (as for a pod OpenCost does not list), not
    0, which would clamp every busy and idle hour to nothing; a note says so."""
    def null_hours(_name: str, alloc: dict[str, Any]) -> None:
        alloc["gpuHours"] = None

    _, before = _report(fleet, relay(lambda doc: doc))
    inputs, report = _report(fleet, relay(lambda doc: _each_allocation(doc, null_hours)))
    assert inputs.sources["opencost"].ok
    assert report.cluster["allocated_gpu_hours"] == pytest.approx(before.cluster["allocated_gpu_hours"], rel=0.05)
    assert report.cluster["idle_gpu_hours"] == pytest.approx(before.cluster["idle_gpu_hours"], rel=0.05)
    assert any(n.startswith("OpenCost gave no gpuHours (null) for ") for n in report.notes)


def _one_platform_pod(change: Callable[[dict[str, Any]], None]) -> Rewrite:
    """A rewrite that changes the allocations of the platform tenant's notebook pod ``nb-alice-0`` alone."""
    def rewrite(doc: dict[str, Any]) -> dict[str, Any]:
        def each(_name: str, alloc: dict[str, Any]) -> None:
            if (alloc.get("properties") or {}).get("pod") == "nb-alice-0":
                change(alloc)
        return _each_allocation(doc, each)
    return rewrite


def test_a_null_total_with_a_null_part_is_unknown_for_its_tenant_not_the_other_parts(
        fleet: EmbeddedCluster, relay: Callable[[Rewrite], str]) -> None:
    """OpenCost writes null for a NaN PV cost, and its total, NaN with it, is null too: the platform tenant's total
    cost is unknown, as the cluster's is, never its GPU, CPU and RAM with the volume at $0; its GPU cost stands."""
    _, before = _report(fleet, relay(lambda doc: doc))
    inputs, report = _report(fleet, relay(_one_platform_pod(lambda a: a.update(pvCost=None, totalCost=None))))
    assert inputs.sources["opencost"].ok
    tenants = {t["tenant"]: t for t in report.tenants}
    was = {t["tenant"]: t for t in before.tenants}
    assert tenants["platform"]["total_cost"] is None and report.cluster["total_cost"] is None
    assert tenants["platform"]["gpu_cost"] == was["platform"]["gpu_cost"] > 0
    assert tenants["forecast"]["total_cost"] == was["forecast"]["total_cost"] > 0
    assert any(n.startswith("OpenCost gave no totalCost (null) for ") and "nb-alice-0" in n for n in report.notes)


def test_a_null_total_is_every_part_opencost_adds(fleet: EmbeddedCluster, relay: Callable[[Rewrite], str]) -> None:
    """The pod's $3 volume, $2 of traffic and $4 of external cost are in its tenant's total where OpenCost left the
    total null and every part known."""
    _, before = _report(fleet, relay(lambda doc: doc))
    inputs, report = _report(fleet, relay(_one_platform_pod(
        lambda a: a.update(pvCost=3.0, networkCost=2.0, externalCost=4.0, totalCost=None))))
    assert inputs.sources["opencost"].ok
    platform = next(t for t in report.tenants if t["tenant"] == "platform")
    was = next(t for t in before.tenants if t["tenant"] == "platform")
    assert platform["total_cost"] == pytest.approx(was["total_cost"] + 9.0, abs=0.011)


def test_a_credit_that_makes_a_pod_s_total_negative_is_the_api_s_answer(
        fleet: EmbeddedCluster, relay: Callable[[Rewrite], str]) -> None:
    """A reconciliation credit $100 larger than the notebook pod's GPU cost: OpenCost's total for it is below 0, and
    the answer is read (not refused for OpenCost's undiscounted metrics); the cluster's total is $100 + that GPU cost
    lower."""
    credited: list[float] = []

    def credit(alloc: dict[str, Any]) -> None:
        credited.append(alloc["gpuCost"] + 100.0)
        alloc["gpuCostAdjustment"] = -(alloc["gpuCost"] + 100.0)
        alloc["totalCost"] = alloc["totalCost"] - credited[-1]

    _, before = _report(fleet, relay(lambda doc: doc))
    inputs, report = _report(fleet, relay(_one_platform_pod(credit)))
    assert inputs.sources["opencost"].ok and report.cost_source == "opencost-allocation-api"
    assert credited and report.cluster["total_cost"] == pytest.approx(before.cluster["total_cost"] - sum(credited),
                                                                      abs=0.011)


def test_an_error_inside_an_http_200_answer_is_a_failed_source(fleet: EmbeddedCluster,
                                                               relay: Callable[[Rewrite], str]) -> None:
    """OpenCost's ``WrapData`` on an error: HTTP 200, ``"code": 500, "status": "error"``, its message, and what data
    it had. The source failed as under an HTTP 503, in one line with OpenCost's message; the money is its metrics'."""
    message = "error querying Prometheus: partial data (1 of 3 queries failed)"
    url = relay(lambda doc: {**doc, "code": 500, "status": "error", "message": message})
    inputs, report = _report(fleet, url)
    status = inputs.sources["opencost"]
    assert not status.ok
    assert status.error == f"OpenCost at {url}: its answer says code 500, status 'error': {message}"
    assert report.cost_source == "opencost-prometheus-metrics"
    assert report.cluster["total_cost"] > 0 and report.cluster["gpu_cost"] > 0
    assert f"{status.error}; the costs are read from OpenCost's metrics in Prometheus instead" in report.notes
