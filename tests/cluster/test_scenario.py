"""Scenario files: the schema, errors that name file and field, the objects built, traces.

Cases: the built-in and example scenarios load; unknown keys, bad durations, unknown tenants
and flavors fail with ``ConfigError`` naming the file and the field; instances expand copies;
objects carry the upstream field names; Philly and ITP traces become scenarios.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from gpuaas.cluster._scenario_objects import DEADLINE_ANNOTATION, EXPECTED_RUNTIME_ANNOTATION, QUEUE_LABEL
from gpuaas.cluster.clock import MAX_SPEED, ManualClock, SimClock
from gpuaas.cluster.scenario import (
    WorkloadKind,
    default_scenario,
    fleet_objects,
    instances,
    load_scenario,
    parse_duration,
    workload_objects,
)
from gpuaas.cluster.traces import scenario_from_trace
from gpuaas.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
EPOCH = datetime(2026, 11, 1, tzinfo=UTC)


def test_default_scenario_shows_every_problem() -> None:
    s = default_scenario()
    kinds = {w.kind for w in s.workloads}
    assert {WorkloadKind.RAY_CLUSTER, WorkloadKind.NOTEBOOK, WorkloadKind.INFERENCE_SERVICE} <= kinds
    assert len(s.flavors) == 2 and {t.cohort for t in s.tenants} == {"research"}
    assert any(w.serving and w.serving.slo_seconds for w in s.workloads)
    assert any(w.drop_telemetry for w in s.workloads)
    deadline = [w for w in s.workloads if w.deadline is not None]
    assert deadline and deadline[0].copies == 4 and deadline[0].gpus_per_pod == 2
    assert deadline[0].deadline - deadline[0].submit_at == 2 * deadline[0].expected_runtime
    assert sum(p.count for p in s.pools) <= 40


def test_example_scenario_loads() -> None:
    s = load_scenario(ROOT / "examples" / "scenario.yaml")
    names = [i.name for i in instances(s)]
    assert "report-2" in names and len(names) == 6


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d["workloads"][0].update(gpus=2), "workloads[0].gpus"),
        (lambda d: d["workloads"][0].update(duration="soon"), "workloads[0].duration"),
        (lambda d: d["workloads"][0].update(tenant="nobody"), "workloads[0].tenant"),
        (lambda d: d["pools"][0].update(flavor="tpu"), "pools[0].flavor"),
        (lambda d: d["workloads"][0].update(utilisation={"profile": "constant", "value": -1}),
         "workloads[0].utilisation.value"),
        # no fleet has these; each would take gigabytes, or break the cost arithmetic, before anything started
        (lambda d: d["pools"][0].update(count=100_000_000), "pools[0].count"),
        (lambda d: d["pools"].extend({**d["pools"][0], "name": f"p{i}", "count": 5_000} for i in range(2)), "pools"),
        (lambda d: d["pools"][0].update(gpu_hourly_price=float("inf")), "pools[0].gpu_hourly_price"),
        (lambda d: d["pools"][0].update(cpu_hourly_price=1e300), "pools[0].cpu_hourly_price"),
        (lambda d: d["workloads"][0].update(utilisation={"profile": "constant", "value": float("nan")}),
         "workloads[0].utilisation.value"),
        (lambda d: d["tenants"][0]["quotas"][0].update(gpus=10**20), "tenants[0].quotas[0].gpus"),
        (lambda d: d["workloads"][0].update(copies=10**9), "workloads[0].copies"),
        (lambda d: d["workloads"].extend({**d["workloads"][0], "name": f"w{i}", "copies": 60_000} for i in range(2)),
         "workloads"),
    ],
    ids=["unknown-key", "bad-duration", "unknown-tenant", "unknown-flavor", "negative-level", "nodes", "nodes-in-all",
         "price-inf", "price-huge", "level-nan", "quota-huge", "copies", "copies-in-all"],
)
def test_errors_name_file_and_field(tmp_path: Path, mutate, field: str) -> None:  # type: ignore[no-untyped-def]
    data = yaml.safe_load((ROOT / "examples" / "scenario.yaml").read_text())
    mutate(data)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as err:
        load_scenario(path)
    assert str(err.value).startswith(f"{path}: {field}: "), str(err.value)


@pytest.mark.parametrize(("text", "seconds"), [(90, 90), ("90s", 90), ("30m", 1800), ("1.5h", 5400), ("2d", 172800)])
def test_durations(text: object, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize(("step", "said"), [
    (".inf", "at most 1h, got inf"),
    ("1.0e+308", "at most 1h, got 1e+308"),
    ("1" + "0" * 400, "at most 1h, got a number over 10^38"),
    ("2h", "at most 1h, got '2h'"),
    ("0", "at least 1s, got 0"),
    (".nan", "not a duration: nan (use seconds or e.g. '90s', '30m', '6h', '2d')"),
], ids=["inf", "1e308", "huge-int", "2h", "zero", "nan"])
def test_a_telemetry_step_out_of_range_names_the_file_and_field(tmp_path: Path, step: str, said: str) -> None:
    """A step the history could not be stepped by (zero, longer than any date, nan) is the file's error, not an
    OverflowError or a ZeroDivisionError once the cluster starts; an hour at most, as the sample interval."""
    text = (ROOT / "examples" / "scenario.yaml").read_text()
    path = tmp_path / "bad.yaml"
    path.write_text(text.replace("step: 60s", f"step: {step}", 1))
    with pytest.raises(ConfigError) as err:
        load_scenario(path)
    assert str(err.value) == f"{path}: telemetry.step: {said}"


@pytest.mark.parametrize("step", ["1s", "1h", 90])
def test_a_telemetry_step_in_range_is_taken(tmp_path: Path, step: object) -> None:
    data = yaml.safe_load((ROOT / "examples" / "scenario.yaml").read_text())
    data["telemetry"]["step"] = step
    path = tmp_path / "ok.yaml"
    path.write_text(yaml.safe_dump(data))
    assert load_scenario(path).telemetry.step == parse_duration(step)


@pytest.mark.parametrize(("value", "said"), [
    (float("inf"), "longer than any duration (999,999,999 days at most), got inf"),
    (10**400, "longer than any duration (999,999,999 days at most), got a number over 10^38"),
    ("99999999999999999999d", "longer than any duration (999,999,999 days at most), got '99999999999999999999d'"),
    (float("nan"), "not a duration: nan (use seconds or e.g. '90s', '30m', '6h', '2d')"),
])
def test_a_duration_past_any_date_is_a_value_error(value: object, said: str) -> None:
    """What pydantic turns into the file's error and the CLI into the flag's: never an OverflowError."""
    with pytest.raises(ValueError) as err:
        parse_duration(value)
    assert str(err.value) == said


def test_a_duration_over_its_maximum_says_the_maximum() -> None:
    assert parse_duration("60d", maximum=timedelta(days=60)) == timedelta(days=60)
    with pytest.raises(ValueError, match=r"^at most 60d, got '99999999d'$"):
        parse_duration("99999999d", maximum=timedelta(days=60))


def test_objects_use_upstream_field_names() -> None:
    s = load_scenario(ROOT / "examples" / "scenario.yaml")
    by_name = {i.name: i for i in instances(s)}
    ray = workload_objects(by_name["idle-ray"].spec, "idle-ray", by_name["idle-ray"].tenant, EPOCH)[0]
    assert ray["apiVersion"] == "ray.io/v1" and ray["metadata"]["labels"][QUEUE_LABEL] == "team-a-queue"
    worker = ray["spec"]["workerGroupSpecs"][0]
    assert worker["replicas"] == 2
    assert worker["template"]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "2"
    report = by_name["report-0"]
    ann = workload_objects(report.spec, report.name, report.tenant, EPOCH)[0]["metadata"]["annotations"]
    assert ann[DEADLINE_ANNOTATION] == "2026-11-01T03:00:00Z" and ann[EXPECTED_RUNTIME_ANNOTATION] == "3600s"
    isvc = workload_objects(by_name["chat"].spec, "chat", by_name["chat"].tenant, EPOCH)[0]
    assert isvc["spec"]["predictor"]["model"]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    cqs = [o for o in fleet_objects(s) if o["kind"] == "ClusterQueue"]
    res = cqs[0]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert cqs[0]["spec"]["cohortName"] == "shared" and res == {"name": "nvidia.com/gpu", "nominalQuota": 8,
                                                                 "borrowingLimit": 4}


def test_philly_trace_tenants_are_virtual_clusters(shared_dir: Path) -> None:
    s = scenario_from_trace(shared_dir / "fixtures/traces/philly/philly_jobs_pollux.csv", "philly",
                            compress=60, max_jobs=200)
    assert len(s.workloads) == 200 and len(s.tenants) > 1
    assert all(t.name.startswith("vc-") for t in s.tenants)
    assert min(w.submit_at for w in s.workloads) == timedelta(0)


def test_itp_trace_carries_deadlines(shared_dir: Path) -> None:
    s = scenario_from_trace(shared_dir / "fixtures/traces/microsoft-itp-elasticflow/195job.csv", "itp", compress=10)
    assert len(s.workloads) == 195
    first = s.workloads[0]
    # first row: submission 3715485, deadline 3716178, duration 1075 s; compressed 10x
    assert first.deadline == timedelta(seconds=69.3) and first.expected_runtime == timedelta(seconds=107.5)


def test_trace_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "t.csv"
    bad.write_text("timestamp,duration\n")
    with pytest.raises(ConfigError, match="t.csv: missing columns"):
        scenario_from_trace(bad, "philly")


def test_clocks() -> None:
    manual = ManualClock(EPOCH)
    manual.advance(timedelta(minutes=5))
    assert manual.now() == EPOCH + timedelta(minutes=5)
    with pytest.raises(ValueError):
        manual.advance(timedelta(seconds=-1))
    sim = SimClock(EPOCH, speed=1000, paused=True)
    sim.advance(timedelta(hours=1))
    assert sim.now() == EPOCH + timedelta(hours=1)
    sim.resume()
    assert sim.now() >= EPOCH + timedelta(hours=1)
    for speed in (0, float("nan"), MAX_SPEED * 2, 1e308):
        with pytest.raises(ValueError, match="speed must be > 0 and at most 86400"):
            SimClock(EPOCH, speed=speed)
