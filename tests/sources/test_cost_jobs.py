"""The cost report's Kueue reading (``finished_jobs``, ``running_jobs``, ``read_jobs``) on upstream objects.

Why these inputs: the finished Workload is DataDog's capture of a real Kueue Workload list, and the jobs are
Kueue's own samples (an elastic batch Job, a RayCluster), read in place from the shared fixtures; each test
changes only what its case needs, as Kueue writes it (the reason and annotation names are Kueue's own).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuaas.cluster.apiserver import ApiServer, ObjectStore
from gpuaas.policies.cost.outcomes import batch_outcomes
from gpuaas.policies.cost.services import pod_share
from gpuaas.settings import GpuaasSettings
from gpuaas.sources._cost_jobs import finished_jobs, read_jobs, running_jobs
from gpuaas.sources._kube_deadlines import DEADLINE, parse_deadline_fields
from tests.sources.helpers import fixture_path

START, END = datetime(2026, 6, 16, tzinfo=UTC), datetime(2026, 6, 17, tzinfo=UTC)
REPLACEMENT_FOR = "kueue.x-k8s.io/workload-slice-replacement-for"


def _finished_workload() -> dict[str, Any]:
    """DataDog's finished Workload ``team-a/training-job`` (Finished=True, Succeeded, at 10:01:30Z)."""
    (obj,) = json.loads(fixture_path("kueue", "third_party", "datadog-integrations-core",
                                     "workload-list-evicted-finished.json").read_text())
    return dict(obj)


def _sample(name: str) -> dict[str, Any]:
    return next(d for d in yaml.safe_load_all(fixture_path("kueue", "samples", name).read_text()) if d)


def _owned_by(obj: dict[str, Any], owner: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                           "name": owner["metadata"]["name"], "uid": "job-uid", "controller": True}]
    return out


def _elastic_slices() -> tuple[dict[str, Any], dict[str, Any]]:
    """The elastic Job sample's two Workloads after a scale-up at 11:30Z: the first slice finished with
    reason ``WorkloadSliceReplaced`` (Kueue's scheduler ``replaceWorkloadSlice``), the new one admitted and
    annotated with the slice it replaces."""
    job = _sample("job-elastic-scalable-sample.yaml")
    assert job["metadata"]["annotations"]["kueue.x-k8s.io/elastic-job"] == "true"
    old = _owned_by(_finished_workload(), job)
    old["metadata"].update(name="job-sample-elastic-job-1a2b3", namespace=job["metadata"]["namespace"])
    old["metadata"]["annotations"] = {DEADLINE: "2026-06-16T20:00:00Z"}
    finished = next(c for c in old["status"]["conditions"] if c["type"] == "Finished")
    finished.update(reason="WorkloadSliceReplaced", lastTransitionTime="2026-06-16T11:30:00Z",
                    message="Replaced to accommodate a workload due to workload slice aggregation")
    new = copy.deepcopy(old)
    new["metadata"].update(name="job-sample-elastic-job-4c5d6", uid="slice-2", creationTimestamp="2026-06-16T11:29:50Z")
    new["metadata"]["annotations"] = {REPLACEMENT_FOR: "default/job-sample-elastic-job-1a2b3"}
    new["status"]["conditions"] = [c for c in new["status"]["conditions"] if c["type"] in ("QuotaReserved", "Admitted")]
    return old, new


def test_a_replaced_elastic_slice_is_no_outcome_and_the_job_is_in_progress() -> None:
    """A scale-up is not the job's end: no failed outcome, and the job's pods (running since its first
    slice, before the new slice existed) are in progress, not an earlier attempt's."""
    old, new = _elastic_slices()
    assert finished_jobs([old, new]) == []
    (running,) = running_jobs([old, new])
    assert (running.owner_kind, running.owner_name) == ("Job", "sample-elastic-job")
    assert running.created_at == datetime(2026, 6, 16, 10, tzinfo=UTC)  # the first slice's creation
    assert batch_outcomes(finished_jobs([old, new]), START, END, ["Succeeded"], require_deadline=True) == []
    seen_before_scale_up = datetime(2026, 6, 16, 11, tzinfo=UTC).timestamp()
    assert pod_share("sample-elastic-job", "default", seen_before_scale_up, {},
                     {("default", "sample-elastic-job"): running}) == (0.0, True)


def test_the_last_slice_finishing_is_the_jobs_one_outcome() -> None:
    """The slice that finishes the job gives the verdict, and its attempt began with the first slice."""
    old, new = _elastic_slices()
    done = copy.deepcopy(new)
    done["metadata"]["annotations"][DEADLINE] = "2026-06-16T20:00:00Z"
    done["status"]["conditions"].append({"type": "Finished", "status": "True", "reason": "Succeeded",
                                         "lastTransitionTime": "2026-06-16T14:00:00Z", "message": ""})
    (outcome,) = batch_outcomes(finished_jobs([old, done]), START, END, ["Succeeded"], require_deadline=True)
    assert (outcome.job, outcome.verdict) == ("sample-elastic-job", "on-time")
    assert outcome.attempt_created_at == datetime(2026, 6, 16, 10, tzinfo=UTC)
    assert running_jobs([old, done]) == []


@pytest.mark.parametrize("value", ["2030-12-01T18:00:00", "2030-12-01", "2030-12-01T18:00:00+0100",
                                   "2030-12-01T18:00:00Z", "2030-12-01T19:00:00+01:00", "tomorrow", "", " "])
def test_the_deadline_is_parsed_as_the_snapshot_parses_it(value: str) -> None:
    """One rule for both readers: a value the snapshot reports as a problem is no deadline here, with a note
    naming the Workload and the annotation; one it accepts is the same instant."""
    obj = _finished_workload()
    obj["metadata"]["annotations"] = {DEADLINE: value}
    snapshot = parse_deadline_fields(value, "1h", None)
    (job,) = finished_jobs([obj])
    assert job.deadline == snapshot.deadline
    notes: list[str] = []
    (job,) = finished_jobs([obj], notes=notes)
    if snapshot.problems:
        assert job.deadline is None
        assert notes == [f"Workload team-a/training-job: annotation {DEADLINE}={value!r} ignored "
                         f"({snapshot.problems[0][2]}); the job is counted as one without a deadline"]
    else:
        assert job.deadline is not None and job.deadline.tzinfo is not None and notes == []


def test_a_deadline_without_a_zone_does_not_crash_the_outcomes() -> None:
    """Compared with Kueue's aware Finished time, a naive deadline raised TypeError for the whole report;
    it is now a success without a deadline."""
    obj = _finished_workload()
    obj["metadata"]["annotations"] = {DEADLINE: "2030-12-01T18:00:00"}
    (outcome,) = batch_outcomes(finished_jobs([obj]), START, END, ["Succeeded"], require_deadline=True)
    assert (outcome.job, outcome.verdict, outcome.deadline) == ("training-job", "no-deadline", None)


def test_a_bad_owner_deadline_is_noted_once_naming_the_raycluster(tmp_path: Path) -> None:
    """Read through the API: the RayCluster sample carries the zone-less deadline and owns two finished
    Workloads (a requeued attempt); one note names the RayCluster, and both are jobs without a deadline."""
    cluster = _sample("raycluster-queue-name-sample.yaml")
    cluster["metadata"].setdefault("namespace", "default")
    cluster["metadata"].setdefault("annotations", {})[DEADLINE] = "2026-06-16T18:00:00"
    ns, name = cluster["metadata"]["namespace"], cluster["metadata"]["name"]
    attempts = []
    for i, at in enumerate(("2026-06-16T09:00:00Z", "2026-06-16T11:00:00Z")):
        wl = _owned_by(_finished_workload(), cluster)
        wl["apiVersion"], wl["kind"] = "kueue.x-k8s.io/v1beta1", "Workload"
        wl["metadata"].update(name=f"raycluster-{name}-{i}", namespace=ns, uid=f"wl-{i}")
        next(c for c in wl["status"]["conditions"] if c["type"] == "Finished")["lastTransitionTime"] = at
        attempts.append(wl)
    with _api(tmp_path, cluster, *attempts) as settings:
        jobs = read_jobs(settings)
    assert jobs.why is None and jobs.finished is not None
    assert [(j.owner_kind, j.owner_name, j.deadline) for j in jobs.finished] == [("RayCluster", name, None)] * 2
    assert jobs.notes == [f"RayCluster {ns}/{name}: annotation {DEADLINE}='2026-06-16T18:00:00' ignored "
                          "(not an RFC 3339 time with a zone, e.g. 2026-12-01T18:00:00Z); "
                          "the job is counted as one without a deadline"]


def test_an_empty_deadline_is_noted_naming_its_object_as_the_snapshot_reports_it() -> None:
    """``gpuaas.io/deadline: ""`` is a data-quality row in the snapshot; here it is a note naming the object
    that carries it (the Workload, else the job it takes it from), and the job is one without a deadline.
    The Workload's own empty value wins over its job's, as it does in the snapshot."""
    cluster = _sample("raycluster-queue-name-sample.yaml")
    key = ("team-a", "RayCluster", cluster["metadata"]["name"])
    why = parse_deadline_fields("", "1h", None).problems[0][2]
    owned = _owned_by(_finished_workload(), cluster)
    notes: list[str] = []
    (job,) = finished_jobs([owned], {key: {DEADLINE: ""}}, notes)
    assert job.deadline is None
    assert notes == [f"RayCluster team-a/{key[2]}: annotation {DEADLINE}='' ignored ({why}); "
                     "the job is counted as one without a deadline"]
    owned["metadata"]["annotations"] = {DEADLINE: ""}
    notes = []
    (job,) = finished_jobs([owned], {key: {DEADLINE: "2026-06-16T10:00:00Z"}}, notes)
    assert job.deadline is None
    assert notes == [f"Workload team-a/training-job: annotation {DEADLINE}='' ignored ({why}); "
                     "the job is counted as one without a deadline"]


def test_a_good_owner_deadline_is_read() -> None:
    """The RayCluster's deadline (the Workload has none) decides lateness; no note."""
    cluster = _sample("raycluster-queue-name-sample.yaml")
    wl = _owned_by(_finished_workload(), cluster)
    notes: list[str] = []
    key = ("team-a", "RayCluster", cluster["metadata"]["name"])
    (job,) = finished_jobs([wl], {key: {DEADLINE: "2026-06-16T10:00:00Z"}}, notes)
    assert job.deadline == datetime(2026, 6, 16, 10, tzinfo=UTC) and notes == []
    (outcome,) = batch_outcomes([job], START, END, ["Succeeded"])
    assert outcome.verdict == "late" and job.finished_at - job.deadline == timedelta(seconds=90)


@contextmanager
def _api(tmp_path: Path, *objs: dict[str, Any]) -> Iterator[GpuaasSettings]:
    """The embedded API server holding ``objs``, as settings that point at it."""
    store = ObjectStore()
    for obj in objs:
        store.create(obj)
    server = ApiServer(store)
    server.start()
    try:
        yield GpuaasSettings(kubeconfig=server.write_kubeconfig(tmp_path / "kubeconfig"))
    finally:
        server.stop()


def test_an_unreachable_api_is_named_once_in_the_reports_note(tmp_path: Path) -> None:
    """The note read "Kubernetes API: Kubernetes API at URL: …" once a source's error named its source itself."""
    from gpuaas.cluster.prometheus import free_port
    from gpuaas.settings import GpuaasSettings
    from gpuaas.sources._cost_jobs import read_jobs
    from tests.fixed_answer import token_kubeconfig

    dead = f"http://127.0.0.1:{free_port()}"
    jobs = read_jobs(GpuaasSettings(kubeconfig=token_kubeconfig(tmp_path / "kc", dead), request_timeout_seconds=2,
                                    retries=0))
    assert jobs.why is not None and jobs.why.startswith(f"Kubernetes API at {dead}: ") and jobs.why.count("Kubernetes") == 1
