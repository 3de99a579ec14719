"""What OpenCost's allocation answers mean, read against its own source (``core/pkg/opencost/allocation.go``,
``pkg/costmodel/router.go``) and the real captures in ``shared/fixtures/telemetry/opencost``:

* a null ``totalCost`` stands for the sum of every part ``TotalCost()`` adds, and for unknown as soon as one of them
  is null (OpenCost writes null for NaN, and a NaN part makes its total NaN): never GPU + CPU + RAM with the rest $0;
* a ``totalCost`` below 0 is a bill where credits (negative adjustments) take it there, and refused where nothing
  does;
* an answer whose envelope says OpenCost failed (``"code": 500, "status": "error"`` under HTTP 200) is a failed
  source, as an HTTP 503 is, in one line with OpenCost's own message.
"""

from __future__ import annotations

import copy
import json
import math
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import pytest

from gpuaas.errors import MalformedResponse, SourceError, SourceUnavailable
from gpuaas.settings import GpuaasSettings
from gpuaas.sources._cost_allocation import allocation_rows, idle_periods
from gpuaas.sources.failures import describe_failure
from gpuaas.sources.opencost import TOTAL_PARTS, parse_allocation, read_opencost
from tests.fixed_answer import fixed_answer_server
from tests.sources.helpers import NOW, fixture_path

CAPTURE = "allocation-compute.aggregate-namespace.swagger-example.json"
NAME = "opencost/deployment:opencost/opencost-75dc7dcc49-xdx5t"

PRICED = {"cpuCost": 1.0, "cpuCostAdjustment": 0.25, "gpuCost": 10.0, "gpuCostAdjustment": -2.0, "ramCost": 0.5,
          "ramCostAdjustment": 0.0, "pvCost": 3.0, "pvCostAdjustment": 0.1, "networkCost": 2.0,
          "networkCostAdjustment": 0.0, "loadBalancerCost": 0.5, "loadBalancerCostAdjustment": 0.0, "sharedCost": 1.0,
          "externalCost": 4.0}
"""One pod's parts, every one of ``TotalCost()``'s: 1 + 0.25 + 10 - 2 + 0.5 + 3 + 0.1 + 2 + 0.5 + 1 + 4 = $20.35."""


def _capture() -> dict[str, Any]:
    return json.loads(fixture_path("telemetry", "opencost", CAPTURE).read_text())  # type: ignore[no-any-return]


def _answer(**fields: Any) -> dict[str, Any]:
    """The real capture's ``opencost`` pod alone, under ``aggregate=namespace,controller,pod``, with ``fields`` set
    (``None`` is OpenCost's null; ``...`` drops the field)."""
    alloc = copy.deepcopy(_capture()["data"][0]["opencost"])
    for field, value in fields.items():
        if value is ...:
            alloc.pop(field, None)
        else:
            alloc[field] = value
    return {"code": 200, "status": "success", "data": [{NAME: alloc}]}


def _start(doc: dict[str, Any]) -> datetime:
    alloc = next(iter(doc["data"][0].values()))
    return datetime.fromisoformat(alloc["window"]["start"].replace("Z", "+00:00")).astimezone(UTC)


def _total(doc: dict[str, Any]) -> float:
    """The total cost the report reads for the one pod of ``doc``."""
    rows = allocation_rows(parse_allocation(doc), _start(doc), 2 * 86400, 1)
    assert len(rows) == 1
    return float(rows["total_cost"].iloc[0])


# --- a null totalCost ----------------------------------------------------------------------------------------------

def test_every_part_totalcost_adds_adds_up_to_it_in_the_real_captures() -> None:
    """The parts gpuaas adds where ``totalCost`` is null are OpenCost's: in the captures, they add up to its total."""
    for capture in (CAPTURE, "allocation-compute.aggregate-label-app.swagger-example.json"):
        text = fixture_path("telemetry", "opencost", capture).read_text()
        doc = json.loads(text.replace(",\n}", "\n}").replace(",\n]", "\n]"))
        for alloc in doc["data"][0].values():
            assert sum(alloc[f] for f in TOTAL_PARTS) == pytest.approx(alloc["totalCost"], abs=1e-4)


def test_a_null_total_is_the_sum_of_every_part_opencost_adds() -> None:
    """PV, network, load balancer, shared and external costs and every adjustment are in the bill, not only the GPU,
    CPU and RAM (which would make this pod $9.75)."""
    assert _total(_answer(**PRICED, totalCost=None)) == pytest.approx(20.35)
    assert _total(_answer(**PRICED, totalCost=...)) == pytest.approx(20.35)


@pytest.mark.parametrize("part", ["cpuCost", "ramCost", "pvCost", "networkCost", "loadBalancerCost", "sharedCost",
                                  "externalCost", "cpuCostAdjustment", "pvCostAdjustment"])
@pytest.mark.parametrize("how", ["null", "absent"])
def test_a_null_total_with_an_unknown_part_is_unknown_never_the_rest(part: str, how: str) -> None:
    """OpenCost writes null for a NaN part, and that NaN makes its ``TotalCost()`` NaN, so both come back null: the
    total is unknown (NaN, which the report says as unknown), not the other parts with this one at $0."""
    doc = _answer(**{**PRICED, part: None if how == "null" else ...}, totalCost=None)
    assert math.isnan(_total(doc))


def test_a_given_total_stands_whatever_its_parts() -> None:
    """Only a null total is rebuilt: OpenCost's own figure is the bill, even where a part beside it is null."""
    assert _total(_answer(**{**PRICED, "pvCost": None}, totalCost=20.35)) == pytest.approx(20.35)


def test_a_null_idle_total_with_an_unknown_part_is_unknown() -> None:
    """``__idle__`` rows are rebuilt by the same rule: a null CPU cost leaves the idle total unknown, not the GPU's."""
    doc = _answer(**PRICED, totalCost=None)
    idle = copy.deepcopy(doc["data"][0][NAME])
    idle.update(properties={"cluster": "cluster-one"}, cpuCost=None)
    doc["data"][0]["__idle__"] = idle
    [period] = idle_periods(parse_allocation(doc), _start(doc), 2 * 86400, 1)
    assert period.gpu_cost == pytest.approx(8.0) and math.isnan(period.total_cost)
    idle["cpuCost"] = 1.0
    [period] = idle_periods(parse_allocation(doc), _start(doc), 2 * 86400, 1)
    assert period.total_cost == pytest.approx(20.35)


# --- a negative totalCost ------------------------------------------------------------------------------------------

def test_a_credit_larger_than_the_cost_makes_a_negative_total_that_is_read() -> None:
    """A reconciliation credit of $100 more than the GPU cost: OpenCost's total is -$100, and the pod is credited."""
    doc = _answer(**{**dict.fromkeys(TOTAL_PARTS, 0.0), "gpuCost": 5.0, "gpuCostAdjustment": -105.0}, totalCost=-100.0)
    row = parse_allocation(doc, url="http://opencost:9003").iloc[0]
    assert (row["gpu_cost"], row["total_cost"]) == (-100.0, -100.0)
    assert _total(doc) == -100.0


def test_a_negative_total_within_a_cent_of_its_credited_parts_is_read() -> None:
    """OpenCost rounds each figure to 5 decimals: its parts add up to its total within far less than a cent."""
    parts = {**PRICED, "gpuCostAdjustment": -40.0}  # the parts add up to -17.65
    assert _total(_answer(**parts, totalCost=-17.655)) == pytest.approx(-17.655)


@pytest.mark.parametrize(("parts", "total", "adds"), [
    ({**dict.fromkeys(TOTAL_PARTS, 0.0), "cpuCost": 0.4, "ramCost": 0.04}, -100.0, "0.44"),  # nothing credited
    ({**PRICED, "gpuCostAdjustment": -10.0}, -100.0, "12.35"),  # a credit, but not one that reaches -100
    ({**PRICED, "gpuCostAdjustment": -40.0}, -17.7, "-17.65"),  # past the credited parts by 5 cents
], ids=["no-credit", "too-small-a-credit", "past-the-parts"])
def test_a_negative_total_nothing_explains_is_refused_naming_the_pod(parts: dict[str, float], total: float,
                                                                    adds: str) -> None:
    with pytest.raises(MalformedResponse) as caught:
        parse_allocation(_answer(**parts, totalCost=total), url="http://opencost:9003")
    line = str(caught.value)
    assert line.startswith(f"OpenCost at http://opencost:9003: field 'data[0].{NAME}': totalCost is {total:g}, "
                           "below 0,")
    assert f"add up to {adds}:" in line and "\n" not in line


# --- an error inside an HTTP 200 answer ----------------------------------------------------------------------------

def _enveloped(envelope: dict[str, Any]) -> dict[str, Any]:
    """The capture's pod under ``envelope`` alone (its ``data`` where the envelope gives none)."""
    return {"data": _answer()["data"], **envelope}


def _read(body: dict[str, Any], status: int = 200) -> tuple[str, pd.DataFrame | BaseException]:
    """The URL of a server answering ``body``, and what ``read_opencost`` made of it: its frame, or its error."""
    with fixed_answer_server() as answer:
        url = answer(json.dumps(body).encode(), status)
        try:
            return url, read_opencost(GpuaasSettings(opencost_url=url, request_timeout_seconds=5), NOW, 60)
        except SourceError as exc:
            return url, exc


@pytest.mark.parametrize(("envelope", "says"), [
    ({"code": 500, "status": "error", "message": "error querying Prometheus: partial data (1 of 3 queries failed)"},
     "code 500, status 'error': error querying Prometheus: partial data (1 of 3 queries failed)"),
    ({"code": 500, "status": "error", "message": "Error: error computing allocation: context deadline exceeded",
      "data": [{}]}, "code 500, status 'error': Error: error computing allocation: context deadline exceeded"),
    ({"code": 200, "status": "error", "message": "boom"}, "code 200, status 'error': boom"),
    ({"code": "503", "message": "upstream\nunavailable\x1b[31m"}, "code 503: upstream unavailable\\x1b[31m"),
    ({"code": 500}, "code 500: no message"),
], ids=["partial-data", "no-data", "status-error", "code-as-text-multiline", "no-message"])
def test_an_error_inside_an_http_200_answer_fails_the_source_as_a_503_does(envelope: dict[str, Any],
                                                                          says: str) -> None:
    """The data beside an error is no bill (partial at best): the source fails, transient as for an HTTP 503, in one
    line naming OpenCost, its URL and OpenCost's own message."""
    url, failed = _read(_enveloped(envelope))
    assert isinstance(failed, SourceUnavailable)
    line = describe_failure(GpuaasSettings(opencost_url=url), "opencost", failed)
    assert line == f"OpenCost at {url}: its answer says {says}"
    _, http_503 = _read(_answer(), 503)
    assert type(http_503) is type(failed)


def test_a_refusal_inside_an_http_200_answer_is_not_retried() -> None:
    url, failed = _read(_enveloped({"code": 400, "message": "Error: invalid window"}))
    assert isinstance(failed, SourceError) and not isinstance(failed, SourceUnavailable)
    assert describe_failure(GpuaasSettings(opencost_url=url), "opencost", failed) == (
        f"OpenCost at {url}: its answer says code 400: Error: invalid window")


def test_a_code_that_is_no_status_is_refused_naming_the_field() -> None:
    url, failed = _read(_enveloped({"code": "oops", "status": "success"}))
    assert isinstance(failed, MalformedResponse)
    assert describe_failure(GpuaasSettings(opencost_url=url), "opencost", failed) == (
        f"OpenCost at {url}: field 'code' is 'oops', not an HTTP status")


@pytest.mark.parametrize("envelope", [
    {"code": 200, "status": "success"},
    {"code": 200},  # OpenCost's newer ``HTTPProtocol`` envelope carries no status
    {"code": None, "status": None},
    {"code": 200, "status": "success", "warning": "some clusters were not queried", "message": "see warning"},
], ids=["wrapdata", "no-status", "nulls", "warning"])
def test_a_successful_envelope_is_read(envelope: dict[str, Any]) -> None:
    _, frame = _read(_enveloped(envelope))
    assert isinstance(frame, pd.DataFrame) and frame["pod"].tolist() == ["opencost-75dc7dcc49-xdx5t"]
