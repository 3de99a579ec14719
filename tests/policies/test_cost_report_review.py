"""Cost report figures a FinOps reviewer checks, case by case, on inputs small enough to check by hand.

The inputs are ``test_cost_report``'s (tenant ``a``: serving ``chat``; tenant ``b``: batch ``etl``),
changed where a case needs it. Each test states the expected figure and how it is worked out.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pandas as pd

from gpuaas.models import COST_COLS, GPU_COLS, CostInputs, FinishedJob, RunningJob, SourceStatus
from gpuaas.operations.cost_report import CostWindows, plan
from gpuaas.policies.cost import CostReport, build_cost_report, pod_funnel
from gpuaas.policy import parse_policy
from gpuaas.sources._cost_jobs import running_jobs
from reports.cost_report import change_rows, previous_complete, summary_markdown
from tests.policies.test_cost_report import END, POLICY, START, _inputs


def _spanned(inputs: CostInputs, *covered: float, data_from: str | None = None) -> CostInputs:
    """``inputs`` with the telemetry span the reader records: seconds per period, and the first sample."""
    details = [("span_step_s", "60"), *((f"covered_s:{d}", f"{c:g}") for d, c in enumerate(covered))]
    if data_from:
        details.insert(0, ("data_from", data_from))
    return replace(inputs, sources={"prometheus": SourceStatus("prometheus", ok=True, details=tuple(details))})


# --- A: a previous $0 is data -------------------------------------------------------------------------------


def test_a_previous_zero_is_a_change_from_zero_not_no_data() -> None:
    now = build_cost_report(_spanned(_inputs(), 86400.0), POLICY)
    quiet = _inputs()
    before = build_cost_report(_spanned(replace(quiet, gpu=quiet.gpu.assign(busy_h=quiet.gpu["observed_h"])),
                                        86400.0), POLICY)
    assert [t["waste_cost"] for t in before.tenants] == [0.0, 0.0]  # every GPU busy: $0 of waste, known
    assert previous_complete(before)
    rows = {r["tenant"]: r for r in change_rows(now, before)}
    assert rows["b"]["waste change"] == "no change"  # $0 then, $0 now
    assert rows["a"]["waste change"] == "from $0 to $28.00"
    assert rows["a"]["cost change"] == "no change"  # one form: never "+0%" beside "no change"
    grown = build_cost_report(_spanned(replace(quiet, gpu=quiet.gpu.assign(busy_h=0.0)), 86400.0), POLICY)
    assert {r["tenant"]: r for r in change_rows(grown, before)}["b"]["waste change"] == "from $0 to $15.00"
    # a tenant the previous period did not have: that is no data
    alone = replace(before, tenants=[before.tenants[0]])
    assert {r["tenant"]: r for r in change_rows(now, alone)}["b"]["waste change"] == "no data before"


# --- B: a previous period with 2 minutes of data is not compared ---------------------------------------------


def test_a_previous_period_with_minutes_of_data_gives_no_percentage() -> None:
    """The previous day held 2 minutes of telemetry (its day 0 had cost, which was all the old rule asked):
    no change is shown, and the notes say why; 90 % of a day is enough."""
    current = _spanned(_inputs(), 86400.0, data_from=START.isoformat())
    early = replace(_inputs(), start=START - timedelta(days=1), end=START)
    short = _spanned(early, 120.0, data_from=(START - timedelta(minutes=2)).isoformat())
    done = plan(CostWindows(current, short), POLICY)
    assert done.previous is not None and not previous_complete(done.previous)
    assert {r["cost change"] for r in change_rows(done.report, done.previous)} == {"no data before"}
    why = ("no change against the previous period (2026-10-31 00:00 – 2026-11-01 00:00 UTC): it holds data for 0 % "
           "of its length, under the 90 % a comparison needs")
    assert any(n.startswith(why) for n in done.report.notes)
    assert any(why in line for line in summary_markdown(done.report, done.previous, None).splitlines())
    nearly = plan(CostWindows(current, _spanned(early, 0.9 * 86400, data_from=START.isoformat())), POLICY)
    assert nearly.previous is not None and previous_complete(nearly.previous)
    assert not any(n.startswith("no change against") for n in nearly.report.notes)
    assert {r["cost change"] for r in change_rows(nearly.report, nearly.previous)} == {"no change"}


# --- C: a window longer than the data -------------------------------------------------------------------------


def test_a_window_longer_than_the_data_says_how_much_it_covers() -> None:
    inputs = _spanned(_inputs(), 6 * 3600.0, data_from=(END - timedelta(hours=6)).isoformat())
    report = build_cost_report(inputs, POLICY)
    assert report.covered_s == 6 * 3600 and report.data_from == END - timedelta(hours=6)
    assert any(n.startswith("data covers 6.0 h of the 24.0 h window, from 2026-11-01 18:00 UTC")
               for n in report.notes)
    whole = build_cost_report(_spanned(_inputs(), 86400.0, data_from=START.isoformat()), POLICY)
    assert not any(n.startswith("data covers") for n in whole.notes)


def test_a_period_without_data_is_no_data_not_zero() -> None:
    """A 2-day window over one day of history: day 0 has no telemetry, no cost and no request."""
    base = _inputs()
    two = replace(base, start=START - timedelta(days=1), days=2, gpu=base.gpu.assign(day=1),
                  costs=None if base.costs is None else base.costs.assign(day=1), serving=base.serving.assign(day=1),
                  jobs=[replace(j, finished_at=j.finished_at) for j in base.jobs or []])
    report = build_cost_report(_spanned(two, 0.0, 86400.0, data_from=START.isoformat()), POLICY)
    day0 = [d for d in report.daily if d["day"] == 0]
    assert day0 and all((d["data"], d["total_cost"], d["gpu_cost"], d["verified_outcomes"], d["cost_per_outcome"])
                        == (False, None, None, None, None) for d in day0)
    chat1 = next(d for d in report.daily if d["day"] == 1 and d["service"] == "chat")
    assert (chat1["data"], chat1["total_cost"], chat1["verified_outcomes"]) == (True, 45.0, 72.0)
    assert any(n.startswith("data covers 24.0 h of the 48.0 h window") for n in report.notes)
    # the HTML report's table says so in every cell of such a period, never $0 or "unknown"
    from reports.cost_report_html import _daily_rows

    empty = [r for r in _daily_rows(report) if r["period ends (UTC)"] == START.strftime("%Y-%m-%d %H:%M")]
    assert empty and all(r[c] == "no data" for r in empty for c in ("GPU cost", "total cost", "verified outcomes",
                                                                      "cost per outcome"))


# --- E: allocated is OpenCost's GPU-hours --------------------------------------------------------------------


def test_allocated_is_opencosts_hours_not_the_larger_of_the_two() -> None:
    """A finished pod: OpenCost charged 2.0 GPU-h, DCGM's last sample step fell after OpenCost's end of it
    (2.0167 h observed). Allocated is OpenCost's 2.0, observed clamped to it; a pod OpenCost does not list
    keeps what DCGM saw."""
    pods = pd.DataFrame([
        {"namespace": "b", "pod": "done", "workload": "done", "tenant": "b", "allocated_h": 2.0,
         "observed_h": 2.0 + 1 / 60, "busy_h": 2.0 + 1 / 60, "active_h": 1.0, "gpu_cost": 6.0, "total_cost": 7.0,
         "share": 1.0, "in_progress": False},
        {"namespace": "b", "pod": "unlisted", "workload": "unlisted", "tenant": "b", "allocated_h": float("nan"),
         "observed_h": 1.5, "busy_h": 0.5, "active_h": 0.1, "gpu_cost": float("nan"), "total_cost": float("nan"),
         "share": 0.0, "in_progress": False}])
    out = pod_funnel(pods, costs_known=True)
    assert list(out["allocated_gpu_hours"]) == [2.0, 1.5]
    assert list(out["unknown_gpu_hours"]) == [0.0, 0.0]
    assert list(out["busy_gpu_hours"]) == [2.0, 0.5] and list(out["productive_gpu_hours"]) == [2.0, 0.0]
    report = build_cost_report(_inputs(), POLICY)
    assert report.cluster["allocated_gpu_hours"] == float(_inputs().costs["gpu_hours"].sum())  # type: ignore[index]


# --- F: in progress is a batch job's ------------------------------------------------------------------------


def _workload(name: str, kind: str) -> dict[str, object]:
    return {"metadata": {"namespace": "b", "name": f"wl-{name}", "creationTimestamp": START.isoformat(),
                         "ownerReferences": [{"kind": kind, "name": name, "controller": True}]},
            "status": {"conditions": [{"type": "Admitted", "status": "True"}]}}


def test_only_batch_jobs_are_in_progress() -> None:
    """A StatefulSet, a Notebook, an InferenceService and a Deployment are admitted for good: never in
    progress. Jobs, JobSets, RayJobs, RayClusters and Kubeflow training jobs are."""
    kinds = ["StatefulSet", "Notebook", "InferenceService", "Deployment", "Job", "JobSet", "RayJob", "RayCluster",
             "PyTorchJob"]
    running = running_jobs([_workload(f"etl-{k.lower()}", k) for k in kinds])
    assert [r.owner_kind for r in running] == ["Job", "JobSet", "RayJob", "RayCluster", "PyTorchJob"]
    # a permanently running StatefulSet that reached the report anyway is not the batch service's job
    base = _inputs()
    gpu = pd.concat([base.gpu, pd.DataFrame([("b", "db-0", 0, 4.0, 4.0, 2.0)], columns=GPU_COLS)], ignore_index=True)
    inputs = replace(base, gpu=gpu, running=[RunningJob("b", "StatefulSet", "db", START)])
    b = build_cost_report(inputs, POLICY).tenants[1]
    assert (b["in_progress_gpu_hours"], b["busy_gpu_hours"], b["productive_gpu_hours"]) == (0.0, 9.0, 2.0)


# --- G: a job without a deadline is not done in time --------------------------------------------------------


def test_a_job_without_a_deadline_or_service_is_no_verified_outcome() -> None:
    """etl-nightly (no gpuaas.io/deadline) and train-x (no batch service: tenant a has none) finished
    successfully: neither is a job done in time. etl counts 3 jobs, 1 in time; tenant a counts no job."""
    base = _inputs()
    jobs = [*(base.jobs or []),
            FinishedJob("b", "wl-3", "u3", "Job", "etl-nightly", START + timedelta(hours=6), "Succeeded", None),
            FinishedJob("a", "wl-4", "u4", "Job", "train-x", START + timedelta(hours=6), "Succeeded",
                        START + timedelta(hours=9))]
    gpu = pd.concat([base.gpu, pd.DataFrame([("b", "etl-nightly-abc", 0, 2.0, 2.0, 1.0),
                                             ("a", "train-x-0", 0, 3.0, 3.0, 1.0)], columns=GPU_COLS)],
                    ignore_index=True)
    costs = pd.concat([base.costs, pd.DataFrame([("b", "job", "etl-nightly", "etl-nightly-abc", 0, 2.0, 6.0, 7.0),
                                                 ("a", "job", "train-x", "train-x-0", 0, 3.0, 12.0, 13.5)],
                                                columns=COST_COLS)], ignore_index=True)
    report = build_cost_report(replace(base, jobs=jobs, gpu=gpu, costs=costs), POLICY)
    a, b = report.tenants
    etl = report.services[1]
    assert (etl["requests"], etl["verified_outcomes"]) == (3.0, 1.0)
    assert (b["verified_jobs"], b["productive_gpu_hours"], b["cost_per_outcome"]) == (1.0, 2.0, 24.5)
    assert (a["verified_jobs"], a["verified_outcomes"], a["productive_gpu_hours"]) == (0.0, 72.0, 5.76)
    assert {j["job"]: j["verdict"] for j in report.batch} == {"etl-daily": "on-time", "etl-late": "late",
                                                               "etl-nightly": "no-deadline"}
    assert report.cluster["verified_jobs"] == 1.0
    assert any(n.startswith("1 batch job finished without a gpuaas.io/deadline") for n in report.notes)


# --- H: requests and jobs apart; the SLO's true bound ---------------------------------------------------------


def test_requests_and_jobs_are_never_added_and_the_verified_range_is_honest() -> None:
    report = build_cost_report(_inputs(), POLICY)
    c = report.cluster
    assert (c["verified_requests"], c["verified_jobs"], c["verified_outcomes"]) == (72.0, 1.0, None)
    mixed = parse_policy({"tenants": [{"name": "a", "namespaces": ["a", "b"]}],
                          "services": [{"name": "chat", "namespace": "a", "model_name": "m", "latency_slo_seconds": 2},
                                       {"name": "etl", "namespace": "b", "kind": "batch"}]})
    [t] = build_cost_report(_inputs(), mixed).tenants
    assert (t["verified_requests"], t["verified_jobs"], t["verified_outcomes"], t["cost_per_outcome"]) == (
        72.0, 1.0, None, None)
    # 100 requests, 90 good, 80 within the 2 s SLO (a bucket bound, so the share's own bound is 0): the 10 bad
    # requests may all be among the 80 fast ones (70 good within) or all slow (80); 72 is the estimate
    chat = report.services[0]
    assert (chat["slo_error_bound"], chat["verified_outcomes"], chat["verified_outcomes_range"]) == (
        0.0, 72.0, [70.0, 80.0])


def test_the_verified_range_inside_a_bucket() -> None:
    """SLO 1.5 s, inside the (1, 2] bucket: 60 to 80 requests within; with 90 good of 100, 50 to 80 verified."""
    policy = parse_policy({"services": [{"name": "chat", "namespace": "a", "model_name": "m",
                                         "latency_slo_seconds": 1.5}]})
    chat = build_cost_report(_inputs(), policy).services[0]
    assert chat["verified_outcomes_range"] == [50.0, 80.0] and chat["verified_outcomes"] == 63.0


def test_reports_built_by_hand_keep_the_first_day_rule() -> None:
    report = CostReport(window_s=86400, start=START, end=END, tenants=[], services=[], cluster={}, wasters=[],
                        daily=[{"service": "s", "day": 0, "total_cost": 5.0, "verified_outcomes": 0.0}], batch=[],
                        notes=[])
    assert previous_complete(report) and not previous_complete(replace(report, covered_s=3600.0))
