"""Odd Prometheus and OpenCost answers: read with a safe meaning, or one ``MalformedResponse``.

Prometheus (a real one, backfilled): a GPU whose samples are all NaN has full coverage but no
activity (so its workload's telemetry is unknown, never idle); +Inf activity is busy, never idle; activity below 0
(which no duty cycle reads) makes the pod's window unknown, whatever its other GPUs read, and a value past the
scale (``1e308``) is read as fully active without any warning from the arithmetic; a series
without ``UUID``/``Hostname`` is kept with empty keys; no dcgm series at all is an empty frame.
What Prometheus cannot produce is fed to the parsers directly: duplicate series (the larger
value wins: never more idle than any copy says), values that are not numbers and points at times
other than those asked (``1e308``, ``+Inf``, an hour late: one error naming the field).
OpenCost: null or missing fields read as unknown (NaN, empty), wrongly typed ones are one error.
"""

from __future__ import annotations

import copy
import json
import math
import warnings
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pandas as pd
import pytest

from gpuaas.cluster.prometheus import PrometheusServer
from gpuaas.errors import MalformedResponse
from gpuaas.settings import GpuaasSettings
from gpuaas.snapshot import build_snapshot
from gpuaas.sources.failures import describe_failure
from gpuaas.sources.history import pod_history
from gpuaas.sources.opencost import parse_allocation
from gpuaas.sources.prometheus import GPU_COLUMNS, pod_activity, read_prometheus
from tests.fixed_answer import fixed_answer_server
from tests.sources.helpers import NOW, Sample, fixture_path, series

Factory = Callable[[list[Sample]], PrometheusServer]
UTIL = "DCGM_FI_DEV_GPU_UTIL"


def _gpu(i: int, pod: str, value: float, **drop: bool) -> tuple[str, dict[str, str], float]:
    labels = {"gpu": str(i), "UUID": f"GPU-{i}", "Hostname": "node-1", "modelName": "NVIDIA H100",
              "namespace": "team-a", "pod": pod, "container": "main"}
    return UTIL, {k: v for k, v in labels.items() if not drop.get(k)}, value


def test_nan_inf_and_missing_labels_from_a_real_prometheus(prometheus_factory: Factory) -> None:
    capture = [_gpu(0, "nan-pod", float("nan")), _gpu(1, "inf-pod", float("inf")), _gpu(2, "ok-pod", 0.0),
               _gpu(3, "bare-pod", 0.0, UUID=True, Hostname=True)]
    server = prometheus_factory(series(capture, minutes=35))
    reading = read_prometheus(GpuaasSettings(prometheus_url=server.url), NOW, [30])
    pods = pod_activity(reading.gpus).set_index("pod")
    # NaN samples count towards coverage but carry no activity: find_idle calls that 'unknown'
    # (tests/policies/test_idle.py), and the snapshot marks its telemetry unknown.
    assert math.isnan(pods.loc["nan-pod", "activity_max"]) and pods.loc["nan-pod", "coverage"] == pytest.approx(1.0)
    assert pods.loc["inf-pod", "activity_max"] == 1.0  # above the scale: fully active, busy over any threshold
    assert pods.loc["ok-pod", "activity_max"] == 0.0 and pods.loc["ok-pod", "coverage"] == pytest.approx(1.0)
    bare = reading.gpus[reading.gpus["pod"] == "bare-pod"]
    assert bare[["uuid", "host"]].drop_duplicates().values.tolist() == [["", ""]]


def test_activity_below_zero_or_past_the_scale_from_a_real_prometheus(prometheus_factory: Factory) -> None:
    """-1 on one GPU of a two-GPU pod: the pod's window is unknown, not the other GPU's 0; -Inf likewise; 1e308 is
    busy (1.0), and neither it nor a vLLM count of 1e308 raises a warning in the sums over GPUs, pods and buckets."""
    capture = [_gpu(0, "neg-pod", -1.0), _gpu(1, "neg-pod", 0.0), _gpu(2, "neginf-pod", float("-inf")),
               _gpu(3, "huge-pod", 1e308), _gpu(4, "huge-pod", 1e308),
               ("vllm:request_success_total", {"namespace": "team-a", "pod": "huge-pod", "model_name": "m",
                                               "finished_reason": "stop"}, 1e308)]
    # the counter jumps from 0 to 1e308 mid-window: an increase of 1e308 (or more, extrapolated: +Inf)
    server = prometheus_factory(series(capture, minutes=35, value=lambda n, _l, v, i: (v if i > 70 else 0.0) if n.startswith(
        "vllm") else v))
    settings = GpuaasSettings(prometheus_url=server.url)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflow in pandas' sums is a RuntimeWarning on the operator's terminal
        reading = read_prometheus(settings, NOW, [30])
        pods = pod_activity(reading.gpus).set_index("pod")
        snapshot = build_snapshot(NOW, [30], {}, kube=None, prom=reading)
    assert pods.loc["neg-pod", "activity_max"] < 0 and pods.loc["neginf-pod", "activity_max"] < 0
    assert pods.loc["neg-pod", "coverage"] == pytest.approx(1.0)  # every sample there: only the reading is wrong
    assert pods.loc["huge-pod", "activity_max"] == 1.0 and pods.loc["huge-pod", "activity_avg"] == 1.0
    assert reading.gpus["activity_max"].between(-1.0, 1.0).all()  # finite: the stored snapshot is JSON
    requests = reading.serving[reading.serving["stat"] == "requests"]["value"]
    assert not requests.empty and bool(requests.map(math.isfinite).all()) and (requests > 0).all()
    assert snapshot.gpus["activity_max"].notna().all()


def test_no_dcgm_series_is_an_empty_frame(prometheus_factory: Factory) -> None:
    server = prometheus_factory(series([("kueue_pending_workloads", {"cluster_queue": "q"}, 1.0)], minutes=5))
    reading = read_prometheus(GpuaasSettings(prometheus_url=server.url), NOW, [30])
    assert reading.gpus.empty and list(reading.gpus.columns) == GPU_COLUMNS
    assert "dcgm" not in reading.staleness


@pytest.fixture()
def answering() -> Iterator[Callable[..., str]]:
    """An HTTP endpoint giving every query the same body: for answers Prometheus itself never sends."""
    with fixed_answer_server() as fixed:
        def answer(result: Any, *, body: Any = None) -> str:
            """``result`` as the vector of a well-formed answer, or ``body`` as the whole answer."""
            whole = {"status": "success", "data": {"resultType": "vector", "result": result}} if body is None else body
            return fixed(json.dumps(whole).encode(), 200)

        yield answer


def _stat(stat: str, value: str, uuid: str = "GPU-0") -> dict[str, Any]:
    return {"metric": {"gpuaas_stat": stat, "gpuaas_signal": UTIL, "UUID": uuid, "gpuaas_host": "n",
                       "gpu": "0", "gpuaas_namespace": "team-a", "gpuaas_pod": "p"}, "value": [NOW.timestamp(), value]}


def test_duplicate_series_keep_the_larger_value(answering: Callable[[Any], str]) -> None:
    url = answering([_stat("activity_max", "0.01"), _stat("activity_max", "0.9"), _stat("coverage", "1")])
    reading = read_prometheus(GpuaasSettings(prometheus_url=url), NOW, [30])
    row = reading.gpus[reading.gpus["window_minutes"] == 30.0]
    assert row["activity_max"].tolist() == [0.9]  # one row, the busier copy


@pytest.mark.parametrize("value", [[NOW.timestamp(), "lots"], [NOW.timestamp()], "0.5", None, {"v": 1}],
                         ids=["not-a-number", "no-value", "bare-string", "null", "object"])
def test_a_value_that_is_not_a_sample_is_one_error(answering: Callable[[Any], str], value: Any) -> None:
    url = answering([{"metric": {"gpuaas_stat": "activity_max"}, "value": value}])
    with pytest.raises(MalformedResponse, match=r"Prometheus at .*: result element value .* is not \[time"):
        read_prometheus(GpuaasSettings(prometheus_url=url), NOW, [30])


def test_a_value_that_is_not_a_sample_names_prometheus_once(answering: Callable[[Any], str]) -> None:
    url = answering([{"metric": {"gpuaas_stat": "activity_max"}, "value": [NOW.timestamp(), "abc"]}])
    settings = GpuaasSettings(prometheus_url=url)
    with pytest.raises(MalformedResponse) as info:
        read_prometheus(settings, NOW, [30])
    assert describe_failure(settings, "prometheus", info.value) == (
        f"Prometheus at {url}: result element value \"[{NOW.timestamp()}, 'abc']\" is not [time, \"number\"]")


@pytest.mark.parametrize(("body", "shape"), [
    ({"status": "success", "data": [1, 2, 3]}, "'data' is not an object"),
    ({"status": "success"}, "'data' is missing"),
    ({"status": "success", "data": {"resultType": "vector"}}, "'data.result' is missing"),
    ({"status": "success", "data": {"resultType": "vector", "result": {"a": 1}}}, "'data.result' is not a list"),
    ([1, 2, 3], "not a JSON object"),
], ids=["data-a-list", "no-data", "no-result", "result-an-object", "a-list"])
def test_an_answer_of_another_shape_names_the_field_once(
        answering: Callable[..., str], body: Any, shape: str) -> None:
    """One phrase naming the field, not Python's ``list indices must be integers``; the source and URL once, by the
    line that describes the failure (``Degraded: Prometheus at URL: query answer: ...``)."""
    url = answering(None, body=body)
    settings = GpuaasSettings(prometheus_url=url)
    with pytest.raises(MalformedResponse) as info:
        read_prometheus(settings, NOW, [30])
    assert str(info.value) == f"Prometheus at {url}: query answer: {shape}"
    assert describe_failure(settings, "prometheus", info.value) == f"Prometheus at {url}: query answer: {shape}"


def test_a_result_element_without_labels_is_one_error(answering: Callable[[Any], str]) -> None:
    url = answering([{"metric": None, "value": [NOW.timestamp(), "1"]}])
    with pytest.raises(MalformedResponse, match="lacks 'metric'/'value'"):
        read_prometheus(GpuaasSettings(prometheus_url=url), NOW, [30])


def _allocation() -> dict[str, Any]:
    path = fixture_path("telemetry", "opencost", "allocation-compute.aggregate-namespace.swagger-example.json")
    return dict(json.loads(path.read_text()))


def _with(field: str, value: Any, *, drop: bool = False) -> dict[str, Any]:
    doc = copy.deepcopy(_allocation())
    alloc = doc["data"][0]["opencost"]
    target, _, key = field.rpartition(".")
    where = alloc[target] if target else alloc
    if drop:
        where.pop(key, None)
    else:
        where[key] = value
    return doc


NULL_OR_MISSING = {
    "gpuCost null": (_with("gpuCost", None), "gpu_cost"),
    "gpuCost missing": (_with("gpuCost", None, drop=True), "gpu_cost"),
    "totalCost null": (_with("totalCost", None), "total_cost"),
    "minutes missing": (_with("minutes", None, drop=True), "minutes"),
}


@pytest.mark.parametrize(("doc", "column"), NULL_OR_MISSING.values(), ids=NULL_OR_MISSING.keys())
def test_opencost_null_or_missing_numbers_read_as_unknown(doc: dict[str, Any], column: str) -> None:
    row = parse_allocation(doc).set_index("name").loc["opencost"]
    assert pd.isna(row[column]) and row["pod"] == "opencost-75dc7dcc49-xdx5t"


def test_opencost_null_properties_read_as_absent() -> None:
    frame = parse_allocation(_with("properties.namespace", None))
    assert frame.set_index("name").loc["opencost", "namespace"] == ""
    frame = parse_allocation(_with("properties", None))
    assert frame.set_index("name").loc["opencost", "pod"] == ""


MALFORMED = {
    "cost not a number": (_with("gpuCost", "expensive"), "data[0].opencost"),
    "properties not an object": (_with("properties", "x"), "data[0].opencost"),
    "data not a list": ({"code": 200, "data": {"a": 1}}, "missing field 'data'"),
    "allocation not an object": ({"code": 200, "data": [{"opencost": 3}]}, "data[0].opencost' is not an object"),
    "answer not an object": ([1, 2], "answer is not a JSON object"),
}


@pytest.mark.parametrize(("doc", "message"), MALFORMED.values(), ids=MALFORMED.keys())
def test_opencost_wrong_shapes_are_one_error(doc: Any, message: str) -> None:
    with pytest.raises(MalformedResponse) as caught:
        parse_allocation(doc, url="http://opencost:9003")
    assert message in str(caught.value) and str(caught.value).startswith("OpenCost at http://opencost:9003: ")


REFUSED = {
    "negative cost": (_with("gpuCost", -1000.0), "gpuCost is -1000, below 0"),
    "negative hours": (_with("gpuHours", -1.5), "gpuHours is -1.5, below 0"),
    "negative minutes": (_with("minutes", -5), "minutes is -5, below 0"),
    "infinite total": (_with("totalCost", float("inf")), "totalCost is inf, not a finite number"),
    "-infinite adjustment": (_with("gpuCostAdjustment", float("-inf")), "gpuCostAdjustment is -inf, not a finite"),
    "huge cost": (_with("gpuCost", 1e308), "gpuCost is 1e+308, past 10,000,000"),
    "huge hours": (_with("gpuHours", 10_000_001.0), "gpuHours is 1e+07, past 10,000,000"),
}


@pytest.mark.parametrize(("doc", "says"), REFUSED.values(), ids=REFUSED.keys())
def test_opencost_figures_no_bill_holds_are_one_error_naming_field_and_allocation(doc: dict[str, Any],
                                                                                 says: str) -> None:
    """Refused before anything adds them: a negative amount, a value that is not finite, one past the bound."""
    with pytest.raises(MalformedResponse) as caught:
        parse_allocation(doc, url="http://opencost:9003")
    assert str(caught.value).startswith("OpenCost at http://opencost:9003: field 'data[0].opencost': " + says)


def test_opencost_adjustments_may_be_credits_and_names_are_escaped() -> None:
    """A reconciled bill's credit is a negative adjustment, within the bound; an allocation's name with an escape
    character is written out in the error line, not sent to the terminal."""
    row = parse_allocation(_with("gpuCostAdjustment", -0.25)).set_index("name").loc["opencost"]
    assert row["gpu_cost"] == pytest.approx(-0.25)  # the fixture's gpuCost is 0
    doc = _with("gpuCost", -1.0)
    doc["data"][0]["evil\x1b[31m"] = doc["data"][0].pop("opencost")
    with pytest.raises(MalformedResponse) as caught:
        parse_allocation(doc)
    assert "\x1b" not in str(caught.value) and "evil\\x1b[31m" in str(caught.value)


# --- range answers (``/api/v1/query_range``): the history pull, the cost report -------------------------------
POD = {"gpuaas_namespace": "team-a", "gpuaas_pod": "p"}
BAD_RANGES = {
    "not-a-number": {"metric": POD, "values": [[NOW.timestamp(), "lots"]]},
    "no-value": {"metric": POD, "values": [[NOW.timestamp()]]},
    "null-point": {"metric": POD, "values": [None]},
    "metric-a-list": {"metric": ["gpuaas_pod"], "values": [[NOW.timestamp(), "0.5"]]},
}


def _matrix(result: list[Any]) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


@pytest.mark.parametrize("row", BAD_RANGES.values(), ids=BAD_RANGES.keys())
def test_a_range_answer_of_another_shape_is_one_error_naming_prometheus(answering: Callable[..., str],
                                                                       row: dict[str, Any]) -> None:
    """Each element must be ``{"metric": {...}, "values": [[time, "number"], ...]}``, as an instant answer's
    are checked: never a ``ValueError`` or an ``AssertionError`` from a reader that trusted it."""
    settings = GpuaasSettings(prometheus_url=answering(None, body=_matrix([row])))
    with pytest.raises(MalformedResponse, match=r"result element") as info:
        list(pod_history(settings, NOW - timedelta(minutes=10), NOW))
    assert describe_failure(settings, "prometheus", info.value).startswith(f"Prometheus at {settings.prometheus_url}: ")


def test_a_well_formed_range_answer_is_read(answering: Callable[..., str]) -> None:
    url = answering(None, body=_matrix([{"metric": POD, "values": [[NOW.timestamp() - 60, "NaN"],
                                                                   [NOW.timestamp(), "0.5"]]}]))
    (chunk,) = list(pod_history(GpuaasSettings(prometheus_url=url), NOW - timedelta(minutes=10), NOW))
    assert chunk.samples[["pod", "value"]].values.tolist() == [["p", 50.0]]


# --- times no Prometheus answers: a proxy's rewrite, at the client, for every reader -----------------------------
BAD_TIMES = {  # (the point's time, how the line words it)
    "1e308": (1e308, "time 1e+308 is not within"),
    "inf": ("+Inf", "time inf is not a finite number"),
    "nan": ("NaN", "time nan is not a finite number"),
    "-1e308": (-1e308, "time -1e+308 is not within"),
    "an-hour-late": (NOW.timestamp() + 3600, f"time {NOW.timestamp() + 3600:g} is not within"),
}


@pytest.mark.parametrize(("at", "says"), BAD_TIMES.values(), ids=BAD_TIMES.keys())
def test_a_range_point_at_a_time_not_asked_is_one_error_naming_the_field(answering: Callable[..., str], at: Any,
                                                                        says: str) -> None:
    """A range is answered at its steps, within the range asked: any other time, read as a date, ends a reader in
    Python's ``timestamp out of range``, or, within the calendar, puts the point in another period. One line names
    Prometheus, the field and the range asked."""
    url = answering(None, body=_matrix([{"metric": POD, "values": [[NOW.timestamp(), "0.5"], [at, "0.5"]]}]))
    settings = GpuaasSettings(prometheus_url=url)
    with pytest.raises(MalformedResponse) as info:
        list(pod_history(settings, NOW - timedelta(minutes=10), NOW))
    line = describe_failure(settings, "prometheus", info.value)
    assert line.startswith(f"Prometheus at {url}: field 'data.result[0].values[1]': {says}")
    if "within" in says:
        assert line.endswith("of the range asked, 2026-03-10 11:50:00 UTC – 2026-03-10 12:00:00 UTC")


@pytest.mark.parametrize(("at", "says"), BAD_TIMES.values(), ids=BAD_TIMES.keys())
def test_an_instant_answer_at_a_time_not_asked_is_one_error_naming_the_field(answering: Callable[..., str], at: Any,
                                                                            says: str) -> None:
    url = answering([_stat("coverage", "1"), {**_stat("activity_max", "0.5"), "value": [at, "0.5"]}])
    settings = GpuaasSettings(prometheus_url=url)
    with pytest.raises(MalformedResponse) as info:
        read_prometheus(settings, NOW, [30])
    line = describe_failure(settings, "prometheus", info.value)
    assert line.startswith(f"Prometheus at {url}: field 'data.result[1].value': {says}")


def test_a_range_answer_off_its_step_grid_fails_naming_a_query_frontend(answering: Callable[..., str]) -> None:
    """A query frontend that aligns a range to its step moves every point off ``start + k * step``: read as asked,
    a day-step cost query's days would shift or merge. One line says so, and names the likely cause."""
    url = answering(None, body=_matrix([{"metric": POD, "values": [[NOW.timestamp() - 570, "0.5"]]}]))
    settings = GpuaasSettings(prometheus_url=url)
    with pytest.raises(MalformedResponse) as info:
        list(pod_history(settings, NOW - timedelta(minutes=10), NOW))
    line = describe_failure(settings, "prometheus", info.value)
    assert line.startswith(f"Prometheus at {url}: field 'data.result[0].values[0]': time 2026-03-10 11:50:30 UTC is "
                           "not on the step grid asked (2026-03-10 11:50:00 UTC + k x 60s): a query frontend aligning "
                           "queries to the step?"), line
