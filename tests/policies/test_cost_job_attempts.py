"""Each attempt of a batch job keeps its own GPU-hours and outcome in the cost report.

Why these inputs: a batch Job whose first attempt failed and whose retry (a new Workload of the re-created Job) is
admitted and running at the window's end. The Workloads are DataDog's capture of a real finished Kueue Workload,
owned by Kueue's own GPU Job sample (read in place from the shared fixtures), and read by the report's own readers
(``finished_jobs``, ``running_jobs``); only the names, times and the ``Finished`` reason (Kueue's ``Failed``)
change. An API server would stamp its own creation times, and the attempts are told apart by them.
"""

from __future__ import annotations

import copy
from datetime import datetime, timedelta
from typing import Any

import pandas as pd

from gpuaas.models import GPU_COLS, SERVING_COLS, CostInputs, FinishedJob, RunningJob
from gpuaas.policies.cost import build_cost_report
from gpuaas.sources._cost_jobs import finished_jobs, running_jobs
from tests.policies.test_cost_report import END, POLICY, START
from tests.sources.test_cost_jobs import _finished_workload, _owned_by, _sample


def _iso(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _failed_then_retried() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Kueue's GPU Job sample as ``b/etl-nightly`` (a job of the batch service ``etl``): its first Workload,
    created at +1 h, finished ``Failed`` at +3 h; the re-created Job's Workload, created at +4 h, is admitted
    and not finished at the end of the window."""
    job = _sample("job-gpu-request-sample.yaml")
    job["metadata"].pop("generateName")
    job["metadata"].update(name="etl-nightly", namespace="b", uid="job-uid-2")  # the first Job's was job-uid
    failed = _owned_by(_finished_workload(), job)
    failed["apiVersion"], failed["kind"] = "kueue.x-k8s.io/v1beta1", "Workload"
    failed["metadata"].update(name="job-etl-nightly-3f1a2", namespace="b", uid="wl-1",
                              creationTimestamp=_iso(START + timedelta(hours=1)))
    for cond in failed["status"]["conditions"]:
        cond["lastTransitionTime"] = _iso(START + timedelta(hours=1, minutes=1))
    failed["status"]["conditions"] = [c for c in failed["status"]["conditions"]
                                      if c["type"] not in ("Evicted", "Preempted")]
    finished = next(c for c in failed["status"]["conditions"] if c["type"] == "Finished")
    finished.update(reason="Failed", message="Job has reached the specified backoff limit",
                    lastTransitionTime=_iso(START + timedelta(hours=3)))
    retry = copy.deepcopy(failed)
    retry["metadata"].update(name="job-etl-nightly-8c9d0", uid="wl-2",
                             creationTimestamp=_iso(START + timedelta(hours=4)))
    retry["metadata"]["ownerReferences"][0]["uid"] = job["metadata"]["uid"]  # the re-created Job's
    retry["status"]["conditions"] = [c for c in retry["status"]["conditions"]
                                     if c["type"] in ("QuotaReserved", "Admitted")]
    return job, failed, retry


def _inputs(jobs: list[FinishedJob], running: list[RunningJob],
            last_seen: dict[tuple[str, str], float] | None = None) -> CostInputs:
    """The failed attempt's pod ran 4 busy GPU-hours, last seen at +2.9 h; the retry's pod 3, seen to the end."""
    gpu = pd.DataFrame([("b", "etl-nightly-x7k2p", 0, 4.0, 4.0, 3.5), ("b", "etl-nightly-q9w8e", 0, 3.0, 3.0, 2.5)],
                       columns=GPU_COLS)
    seen = {("b", "etl-nightly-x7k2p"): (START + timedelta(hours=2.9)).timestamp(),
            ("b", "etl-nightly-q9w8e"): END.timestamp(), **(last_seen or {})}
    return CostInputs(START, END, 1, gpu, None, pd.DataFrame(columns=SERVING_COLS), jobs, running=running,
                      last_seen=seen)


def test_a_running_retry_after_a_failed_attempt_is_in_progress() -> None:
    """The retry's 3 busy GPU-hours are in progress (its outcome is still to come), the failed attempt's 4 are
    busy without an outcome; the job is listed both as failed (its first attempt) and in progress."""
    _, *workloads = _failed_then_retried()
    finished, running = finished_jobs(workloads), running_jobs(workloads)
    assert [(j.owner_name, j.reason, j.created_at) for j in finished] == [
        ("etl-nightly", "Failed", START + timedelta(hours=1))]
    assert [(r.owner_name, r.created_at) for r in running] == [("etl-nightly", START + timedelta(hours=4))]
    report = build_cost_report(_inputs(finished, running), POLICY)
    etl = next(s for s in report.services if s["service"] == "etl")
    assert (etl["busy_gpu_hours"], etl["productive_gpu_hours"], etl["in_progress_gpu_hours"]) == (7.0, 0.0, 3.0)
    b = next(t for t in report.tenants if t["tenant"] == "b")
    assert (b["busy_gpu_hours"], b["productive_gpu_hours"], b["in_progress_gpu_hours"]) == (7.0, 0.0, 3.0)
    assert [(r["job"], r["verdict"]) for r in report.batch] == [("etl-nightly", "failed"),
                                                                ("etl-nightly", "in progress")]
    assert (etl["requests"], etl["verified_outcomes"]) == (1.0, 0.0)  # the retry is no job done yet
    # Where no pod's last sample is known, nothing tells the attempts apart: the finished attempt's verdict
    # decides for every pod of the job (a failure: no productive hour), as for a job of one attempt.
    blind = _inputs(finished, running)
    blind = CostInputs(blind.start, blind.end, 1, blind.gpu, None, blind.serving, blind.jobs, running=blind.running)
    etl = next(s for s in build_cost_report(blind, POLICY).services if s["service"] == "etl")
    assert (etl["busy_gpu_hours"], etl["productive_gpu_hours"], etl["in_progress_gpu_hours"]) == (7.0, 0.0, 0.0)


def test_a_failed_rerun_after_an_on_time_attempt_is_not_productive() -> None:
    """The attempt created at +1 h succeeded by its deadline at +3 h (its pod, 4 busy GPU-hours, is productive);
    the job ran again from +4 h and failed at +6 h: that attempt's pod (3 busy GPU-hours) bought no outcome."""
    done = FinishedJob("b", "job-etl-nightly-3f1a2", "wl-1", "Job", "etl-nightly", START + timedelta(hours=3),
                       "Succeeded", START + timedelta(hours=5), created_at=START + timedelta(hours=1))
    rerun = FinishedJob("b", "job-etl-nightly-8c9d0", "wl-2", "Job", "etl-nightly", START + timedelta(hours=6),
                        "Failed", START + timedelta(hours=5), created_at=START + timedelta(hours=4))
    report = build_cost_report(_inputs([done, rerun], [], last_seen={
        ("b", "etl-nightly-q9w8e"): (START + timedelta(hours=5.9)).timestamp()}), POLICY)
    etl = next(s for s in report.services if s["service"] == "etl")
    assert (etl["busy_gpu_hours"], etl["productive_gpu_hours"], etl["verified_outcomes"]) == (7.0, 4.0, 1.0)
