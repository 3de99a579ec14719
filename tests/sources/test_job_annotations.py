"""Deadlines and reclaim opt-outs on the batch jobs Kueue admits (a batch/v1 Job, a RayJob, a JobSet, a Kubeflow
PyTorchJob), read through the embedded API server with the official client, into the snapshot, the reclaim
verdict and the cost report.

Why these inputs: teams annotate the job they submit, and Kueue creates its Workload without copying any
annotation; the jobs are Kueue's own samples, read in place from the shared fixtures (a JobSet has none
there, so it is written out), and each Workload is owned by its job as Kueue owns it (``ownerReferences``
with ``controller: true``, named ``<kind>-<job>-<hash>``). A kind whose CRD is not installed is skipped,
a refused list names the rule to apply, and each kind is one list per cycle whatever the fleet size.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from gpuaas.cluster.apiserver import ApiServer, ObjectStore, RBACRules
from gpuaas.cluster.apiserver import _http as emulator_http
from gpuaas.errors import Forbidden
from gpuaas.models import JOB_OWNERS
from gpuaas.permissions import READS, Access
from gpuaas.policies.reclaim import find_idle
from gpuaas.policy import Policy
from gpuaas.settings import GpuaasSettings
from gpuaas.snapshot import build_snapshot, failed_source
from gpuaas.sources._cost_jobs import read_jobs
from gpuaas.sources.kube import read_kube
from tests.sources.helpers import fixture_path

NOW = datetime(2026, 6, 16, 12, tzinfo=UTC)
DEADLINE, RUNTIME, OPT_OUT = "gpuaas.io/deadline", "gpuaas.io/expected-runtime", "gpuaas.io/reclaim"
MANIFEST = Path(__file__).resolve().parents[2] / "deployments" / "kubernetes" / "rbac.yaml"
JOBSET = {  # jobset.x-k8s.io/v1alpha2, as Kueue's JobSet integration takes it (no sample in the fixtures)
    "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
    "metadata": {"name": "sample-jobset", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
    "spec": {"suspend": True, "replicatedJobs": [{"name": "workers", "replicas": 1, "template": {"spec": {
        "parallelism": 1, "completions": 1, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53", "args": ["pause"]}]}}}}}]},
}


def _sample(name: str) -> dict[str, Any]:
    obj = next(d for d in yaml.safe_load_all(fixture_path("kueue", "samples", name).read_text()) if d)
    obj["metadata"].setdefault("namespace", "default")
    return dict(obj)


def _annotated(job: dict[str, Any], deadline: str, runtime: str | None = "45m") -> dict[str, Any]:
    out = copy.deepcopy(job)
    notes = out["metadata"].setdefault("annotations", {})
    notes[DEADLINE] = deadline
    if runtime is not None:
        notes[RUNTIME] = runtime
    return out


def _owned(workload: dict[str, Any], job: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """``workload`` as Kueue's job reconciler writes it for the stored ``job``: its name, namespace, owner
    reference and job-uid label; ``annotations`` are the Workload's own (Kueue writes none of the job's)."""
    out = copy.deepcopy(workload)
    meta = out["metadata"]
    name, uid = job["metadata"]["name"], job["metadata"]["uid"]
    meta.update(name=f"{job['kind'].lower()}-{name}-{uid[:5]}", namespace=job["metadata"]["namespace"])
    meta.pop("uid", None)
    meta["labels"] = {"kueue.x-k8s.io/job-uid": uid}
    meta["ownerReferences"] = [{"apiVersion": job["apiVersion"], "kind": job["kind"], "name": name, "uid": uid,
                                "controller": True, "blockOwnerDeletion": True}]
    meta["annotations"] = dict(annotations or {})
    return out


def _pending_workload() -> dict[str, Any]:
    """Kueue's docs Workload (``spec.podSets``, not yet admitted)."""
    path = fixture_path("kueue", "docs-extracted", "workload-v1beta2-spec-sample.yaml")
    return dict(next(d for d in yaml.safe_load_all(path.read_text()) if d))


def _finished_workload() -> dict[str, Any]:
    """DataDog's finished Workload (Finished=True, Succeeded, at 10:01:30Z), served as v1beta1."""
    path = fixture_path("kueue", "third_party", "datadog-integrations-core", "workload-list-evicted-finished.json")
    (obj,) = json.loads(path.read_text())
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload", **obj}


def _jobs() -> dict[str, dict[str, Any]]:
    """Each batch kind, annotated with a deadline of its own (the Job also with a run time of 45 m)."""
    return {
        "Job": _annotated(_sample("job-gpu-request-sample.yaml"), "2026-06-16T18:00:00Z"),
        "RayJob": _annotated(_sample("rayjob-queue-name-sample.yaml"), "2026-06-16T19:00:00Z", "2h"),
        "JobSet": _annotated(JOBSET, "2026-06-16T20:00:00+02:00", "1h30m"),
        "PyTorchJob": _annotated(_sample("kubeflow-pytorchjob-sample.yaml"), "2026-06-16T21:00:00Z", "90s"),
    }


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[ObjectStore, ApiServer, GpuaasSettings]]:
    store = ObjectStore()
    server = ApiServer(store)
    server.start()
    try:
        yield store, server, GpuaasSettings(kubeconfig=server.write_kubeconfig(tmp_path / "kubeconfig"))
    finally:
        server.stop()


def _seed(store: ObjectStore, workload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each job and its Workload (``workload``'s shape); the Job has a second Workload carrying its own
    deadline (a requeued attempt a team re-annotated). Returns the stored Workloads by job kind."""
    out = {}
    for kind, job in _jobs().items():
        stored = store.create(job)
        out[kind] = store.create(_owned(workload, stored))
        if kind == "Job":
            own = _owned(workload, stored, {DEADLINE: "2026-06-16T15:00:00Z"})
            own["metadata"]["name"] += "-2"
            out["own"] = store.create(own)
    return out


def test_a_jobs_deadline_reaches_the_snapshot_and_the_workloads_own_wins(api: tuple[ObjectStore, ApiServer,
                                                                                    GpuaasSettings]) -> None:
    store, _server, settings = api
    stored = _seed(store, _pending_workload())
    kube = read_kube(settings)
    snapshot = build_snapshot(NOW, [30.0], {}, kube=kube, prom=None)
    rows = snapshot.workloads.set_index("name")
    at = {kind: rows.loc[wl["metadata"]["name"]] for kind, wl in stored.items()}
    assert at["Job"]["deadline_at"] == pd.Timestamp("2026-06-16T18:00:00Z")
    assert (at["Job"]["runtime_seconds"], at["Job"]["runtime_source"]) == (2700, "expected-runtime")
    assert (at["RayJob"]["deadline_at"], at["RayJob"]["runtime_seconds"]) == (pd.Timestamp("2026-06-16T19:00:00Z"), 7200)
    assert (at["JobSet"]["deadline_at"], at["JobSet"]["runtime_seconds"]) == (pd.Timestamp("2026-06-16T18:00:00Z"), 5400)
    assert (at["PyTorchJob"]["deadline_at"], at["PyTorchJob"]["runtime_seconds"]) == (
        pd.Timestamp("2026-06-16T21:00:00Z"), 90)
    # The Workload's own deadline wins; the run time it lacks is still its Job's.
    assert (at["own"]["deadline_at"], at["own"]["runtime_seconds"]) == (pd.Timestamp("2026-06-16T15:00:00Z"), 2700)
    assert snapshot.data_quality.empty
    # Deadline-only owners: never an object reclaim acts on, and the Workload stays the target of a stop.
    assert {o.kind for o in kube.owners} == set() and set(rows["kind"]) == {"Workload"}
    assert set(rows["owner_kind"]) == {"Job", "RayJob", "JobSet", "PyTorchJob"}


def test_a_jobs_deadline_reaches_the_cost_reports_finished_jobs(api: tuple[ObjectStore, ApiServer,
                                                                           GpuaasSettings]) -> None:
    store, _server, settings = api
    stored = _seed(store, _finished_workload())
    jobs = read_jobs(settings)
    assert jobs.why is None and jobs.finished is not None and jobs.notes == []
    by_workload = {j.workload: j for j in jobs.finished}
    deadline = {kind: by_workload[wl["metadata"]["name"]].deadline for kind, wl in stored.items()}
    assert deadline == {"Job": datetime(2026, 6, 16, 18, tzinfo=UTC), "RayJob": datetime(2026, 6, 16, 19, tzinfo=UTC),
                        "JobSet": datetime(2026, 6, 16, 18, tzinfo=UTC), "PyTorchJob": datetime(2026, 6, 16, 21, tzinfo=UTC),
                        "own": datetime(2026, 6, 16, 15, tzinfo=UTC)}
    assert {(j.owner_kind, j.owner_name) for j in jobs.finished} >= {
        ("Job", stored["Job"]["metadata"]["ownerReferences"][0]["name"]), ("PyTorchJob", "pytorch-simple")}


def test_a_kind_whose_crd_is_not_installed_is_skipped(api: tuple[ObjectStore, ApiServer, GpuaasSettings],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """No JobSet or Kubeflow operator on the cluster (404 on their lists): nothing said, the others read."""
    store, _server, settings = api
    stored = _seed(store, _finished_workload())
    real = emulator_http.resource_for_plural

    def served(group: str, version: str, plural: str):  # noqa: ANN202
        return None if group in ("jobset.x-k8s.io", "kubeflow.org") else real(group, version, plural)

    monkeypatch.setattr(emulator_http, "resource_for_plural", served)
    kube = read_kube(settings)
    assert kube.not_installed == ("notebooks.kubeflow.org/v1",)  # a reclaim kind is still reported
    deadlines = build_snapshot(NOW, [30.0], {}, kube=kube, prom=None).workloads.set_index("name")["deadline_at"]
    assert deadlines[stored["Job"]["metadata"]["name"]] == pd.Timestamp("2026-06-16T18:00:00Z")
    assert pd.isna(deadlines[stored["JobSet"]["metadata"]["name"]])
    jobs = read_jobs(settings)
    assert jobs.why is None and jobs.finished is not None
    assert {j.owner_kind: j.deadline for j in jobs.finished if j.owner_kind in ("RayJob", "PyTorchJob")} == {
        "RayJob": datetime(2026, 6, 16, 19, tzinfo=UTC), "PyTorchJob": None}


def test_each_kind_is_one_list_per_cycle_whatever_the_fleet_size(api: tuple[ObjectStore, ApiServer,
                                                                            GpuaasSettings]) -> None:
    store, server, settings = api
    _seed(store, _pending_workload())
    few = read_kube(settings).requests
    job = _jobs()["Job"]
    for i in range(60):
        stored = store.create({**job, "metadata": {**job["metadata"], "name": f"bulk-{i:02d}"}})
        store.create(_owned(_pending_workload(), stored))
    server.requests.clear()
    many = read_kube(settings)
    assert len(many.workloads) == 65 and many.requests == few
    lists = {path: n for path, n in server.requests.items() if path.startswith("GET /apis/")}
    for path in ("/apis/batch/v1/jobs", "/apis/ray.io/v1/rayjobs", "/apis/jobset.x-k8s.io/v1alpha2/jobsets",
                 "/apis/kubeflow.org/v1/pytorchjobs"):
        assert lists[f"GET {path}"] == 1, path
    server.requests.clear()
    assert read_jobs(settings).requests == sum(server.requests.values())
    assert server.requests["GET /apis/batch/v1/jobs"] == 1


def test_a_refused_list_names_the_rule_to_apply(tmp_path: Path) -> None:
    """A reader role from before the batch kinds were read: the Kubernetes source fails (the snapshot is
    degraded), in one line that names the missing rule and the file that grants it; never a traceback."""
    rules = RBACRules.from_manifest(MANIFEST, ["gpuaas-reader"])
    rules.rules = [r for r in rules.rules if "batch" not in r[0]]
    server = ApiServer(ObjectStore(), rbac=rules)
    server.start()
    try:
        settings = GpuaasSettings(kubeconfig=server.write_kubeconfig(tmp_path / "kc"))
        with pytest.raises(Forbidden) as refused:
            read_kube(settings)
        status = failed_source(settings, "kube", refused.value)
        jobs = read_jobs(settings)
    finally:
        server.stop()
    said = "list jobs.batch is refused: bind gpuaas-reader (kubectl apply -f deployments/kubernetes/rbac.yaml)"
    assert not status.ok and "HTTP 403" in (status.error or "") and said in (status.error or "")
    assert jobs.finished is None and said in (jobs.failure or "")


def test_every_kind_read_is_a_read_the_preflight_asks_about() -> None:
    """The reader role (``READS``, held to ``rbac.yaml`` by ``tests/test_permissions.py``) lists each kind read."""
    assert {Access("list", k.group, k.plural) for k in JOB_OWNERS} <= set(READS)
    assert {k.kind for k in JOB_OWNERS} >= {"Job", "RayJob", "JobSet", "PyTorchJob"}


def _admitted_workload(job: dict[str, Any]) -> dict[str, Any]:
    """Kueue's docs Workload asking for ``job``'s GPU, admitted (QuotaReserved and Admitted) with one pod."""
    out = _pending_workload()
    pod_set = out["spec"]["podSets"][0]
    pod_set["template"]["spec"]["containers"][0]["resources"] = job["spec"]["template"]["spec"]["containers"][0][
        "resources"]
    conditions = [{"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": "2026-06-16T08:00:00Z"}
                  for t in ("QuotaReserved", "Admitted")]
    out["status"] = {"conditions": conditions, "admission": {"clusterQueue": "team-a-cq", "podSetAssignments": [
        {"name": pod_set["name"], "count": 1, "flavors": {"nvidia.com/gpu": "default"},
         "resourceUsage": {"nvidia.com/gpu": "1"}}]}}
    return out


@pytest.mark.parametrize("said", ["never", " Never\n", "NEVER"])
def test_a_jobs_opt_out_keeps_its_workloads_out_of_reclaim(api: tuple[ObjectStore, ApiServer, GpuaasSettings],
                                                           said: str) -> None:
    """A team annotates the Job it submits, not the Workload Kueue makes of it: the opt-out is heard, however
    typed, and wins over a Workload's own value that is not one; a job's other value opts nothing out."""
    store, _server, settings = api
    sample = _sample("job-gpu-request-sample.yaml")
    jobs = {name: store.create({**sample, "metadata": {**sample["metadata"], "name": name,
                                                        "annotations": {OPT_OUT: value}}})
            for name, value in (("kept", said), ("allowed", "sometimes"))}
    names = {}
    for label, (job, own) in {"kept": ("kept", {}), "kept-own": ("kept", {OPT_OUT: "always"}),
                              "allowed": ("allowed", {})}.items():
        workload = _owned(_admitted_workload(sample), jobs[job], own)
        workload["metadata"]["name"] += f"-{label}"
        names[label] = store.create(workload)["metadata"]["name"]
    snapshot = build_snapshot(NOW, [30.0], {}, kube=read_kube(settings), prom=None)
    verdicts = find_idle(snapshot.workloads, Policy(), NOW).set_index("name")
    reclaim = snapshot.workloads.set_index("name")["reclaim"]
    assert [reclaim[names[k]] for k in ("kept", "kept-own")] == ["never", "never"]
    assert pd.isna(reclaim[names["allowed"]])
    for label in ("kept", "kept-own"):
        assert "opted out" in verdicts.loc[names[label], "reason"], label
    assert "opted out" not in verdicts.loc[names["allowed"], "reason"]
    assert (snapshot.workloads["gpus"] == 1.0).all()
