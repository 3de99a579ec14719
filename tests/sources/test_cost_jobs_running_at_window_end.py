"""The jobs in progress at a window's end are those running *then*, not when the report runs.

Why: the report reads the Kueue Workloads once, now, and the comparison window (the one before) took the jobs
running now as its own in-progress jobs: a job that ran through that window's end and has finished since was not
in progress there (its busy hours read as work without an outcome), and a job created since was. The Workloads
carry their creation and finish times, which say what ran then. A real Prometheus and the embedded API server
hold the inputs; the Workloads are Kueue's (DataDog's capture of a finished one, re-owned by Kueue's job samples).

Times: NOW = 12:00. Job ``sample-job`` (Kueue's GPU Job sample): its Workload created 10:30, finished 11:30.
PyTorchJob ``pytorch-simple``: its Workload created 11:40, admitted, running. The previous hour ends 11:00.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuaas.cluster.apiserver import ApiServer, ObjectStore
from gpuaas.cluster.prometheus import PrometheusServer
from gpuaas.settings import MetricNames, load_settings
from gpuaas.sources._cost_jobs import finished_jobs, running_at, running_jobs
from gpuaas.sources.cost_window import read_cost_inputs
from tests.sources.helpers import NOW
from tests.sources.test_cost_jobs import _finished_workload, _owned_by, _sample

pytestmark = pytest.mark.integration


def _stamp(minutes_before_now: int) -> str:
    return (NOW - timedelta(minutes=minutes_before_now)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _workloads() -> list[dict[str, Any]]:
    job, torch = _sample("job-gpu-request-sample.yaml"), _sample("kubeflow-pytorchjob-sample.yaml")
    job["metadata"]["name"] = "sample-job"  # the sample asks for a generated name
    done = _owned_by(_finished_workload(), job)
    done["apiVersion"], done["kind"] = "kueue.x-k8s.io/v1beta1", "Workload"
    done["metadata"].update(name="job-done", namespace="team-a", uid="wl-done", creationTimestamp=_stamp(90))
    for cond in done["status"]["conditions"]:
        cond["lastTransitionTime"] = _stamp(30) if cond["type"] == "Finished" else _stamp(89)
    done["status"]["conditions"] = [c for c in done["status"]["conditions"] if c["type"] not in ("Evicted", "Preempted")]
    later = _owned_by(_finished_workload(), torch)
    later["apiVersion"], later["kind"] = "kueue.x-k8s.io/v1beta1", "Workload"
    later["metadata"].update(name="torch-running", namespace="team-a", uid="wl-run", creationTimestamp=_stamp(20))
    later["status"]["conditions"] = [{**c, "lastTransitionTime": _stamp(19)} for c in copy.deepcopy(
        later["status"]["conditions"]) if c["type"] in ("QuotaReserved", "Admitted")]
    return [done, later]


def test_running_at_a_past_end_is_what_ran_then() -> None:
    objs = _workloads()
    finished, running = finished_jobs(objs), running_jobs(objs)
    assert [(r.owner_kind, r.owner_name) for r in running] == [("PyTorchJob", "pytorch-simple")]
    then = running_at(finished, running, NOW - timedelta(hours=1))
    assert [(r.owner_kind, r.owner_name, r.created_at) for r in then] == [
        ("Job", "sample-job", NOW - timedelta(minutes=90))]
    assert running_at(finished, running, NOW) == running
    # before either was created, nothing ran
    assert running_at(finished, running, NOW - timedelta(hours=2)) == []


@pytest.fixture(scope="module")
def prometheus(prometheus_factory: Callable[[Any], PrometheusServer]) -> PrometheusServer:
    labels = {"namespace": "team-a", "pod": "p", "container": "main", "Hostname": "n", "gpu": "0", "UUID": "GPU-0"}
    start = (NOW - timedelta(hours=2)).timestamp()
    return prometheus_factory([("DCGM_FI_PROF_GR_ENGINE_ACTIVE", labels, 0.5, start + 60 * k) for k in range(1, 121)])


@contextmanager
def _api_at(tmp_path: Path, objs: list[dict[str, Any]]) -> Iterator[Path]:
    """The embedded API server holding ``objs``, each created at its ``creationTimestamp`` (the server stamps
    the time of its clock on create, as a real one does); yields its kubeconfig."""
    created = [NOW]
    store = ObjectStore(clock=lambda: created[0])
    for obj in objs:
        created[0] = datetime.fromisoformat(obj["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
        store.create(obj)
    server = ApiServer(store)
    server.start()
    try:
        yield server.write_kubeconfig(tmp_path / "kubeconfig")
    finally:
        server.stop()


def test_the_previous_window_reads_the_jobs_running_at_its_own_end(prometheus: PrometheusServer,
                                                                   tmp_path: Path) -> None:
    with _api_at(tmp_path, _workloads()) as kubeconfig:
        settings = load_settings(prometheus_url=prometheus.url, nvml="off", data_dir=tmp_path / "data",
                                 kubeconfig=kubeconfig, metrics=MetricNames(sample_interval_seconds=60))
        previous = read_cost_inputs(settings, NOW - timedelta(hours=1), 3600)
        current = read_cost_inputs(settings, NOW, 3600)
    assert [r.owner_name for r in previous.running] == ["sample-job"], (previous.notes, previous.jobs)
    assert [r.owner_name for r in current.running] == ["pytorch-simple"]
