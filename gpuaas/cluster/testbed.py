"""Embedded clusters ready to use now, and the reclaim fleet: shared by the tests and the benchmarks.

:func:`embedded` starts a scenario on a ManualClock whose history ends at the current minute, so that
a collect "now" sees the whole history. The reclaim fleet (:data:`RECLAIM_SCENARIO`, started by
:func:`reclaim_cluster`) holds one idle workload of every kind gpuaas can reclaim, plus the ones it
must never reclaim. The reclaim tests pin its verdicts; the overlap and store benchmarks run it.
It lives in the product, not in the test suite, because a benchmark must never import the tests.

24 GPUs at $3/GPU-hour, 90 minutes of history; default policy (window 30 m, threshold 0.05,
grace 30 m) except tenant ``team-g``, whose grace is 2 h (:func:`write_policy`).

=============  ================  ====  =====================================================
name           kind              GPUs  expected verdict
=============  ================  ====  =====================================================
ray            RayCluster        2     idle -> suspend, quota released
eray           RayCluster        1     idle, elastic -> workers to 0, reservation kept
isvc           InferenceService  1     idle (0 req/s) -> serving.kserve.io/stop
nb             Notebook          1     idle -> kubeflow-resource-stopped
dep            Deployment        2     idle (2 pods, 2 Workloads) -> replicas 0
sts            StatefulSet       1     idle -> replicas 0
wl             Workload          1     no pods, no telemetry: unknown (stopped only by hand)
chat           InferenceService  1     GPU at 0 but serving 5 req/s: busy
dark           StatefulSet       1     telemetry dropped: unknown
optout         Notebook          1     gpuaas.io/reclaim: "never": excluded, skipped (opted-out)
young          Notebook (team-g) 1     inside the 2 h grace period: excluded
*-b            copies of ray, isvc, nb, dep (1 pod), sts, for the race and crash tests
=============  ================  ====  =====================================================

It also holds one batch job of each kind gpuaas lists for deadline annotations (a Job, RayJob, JobSet,
PyTorchJob, TFJob and MPIJob, ``train-*``), each with a deadline: no queue-name label, so Kueue admits none
of them and nothing else changes; a collect lists each kind, and reclaim never acts on one.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from gpuaas.cluster.clock import ManualClock
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.scenario import parse_scenario

__all__ = ["RECLAIM_HISTORY", "RECLAIM_SCENARIO", "embedded", "reclaim_cluster", "write_policy"]

RECLAIM_HISTORY = timedelta(minutes=90)
_IDLE = {"profile": "constant", "value": 0.0}
_NO_TRAFFIC = {"model_name": "m", "requests_per_second": {"profile": "constant", "value": 0}}
_DUE = {"gpuaas.io/deadline": "2030-01-01T00:00:00Z", "gpuaas.io/expected-runtime": "1h"}
_JOB_TEMPLATE = {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}


def _batch_job(api_version: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    name = f"train-{kind.lower()}"
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "namespace": "team-a",
                                                                 "annotations": dict(_DUE)}, "spec": spec}


_BATCH_JOBS = [
    _batch_job("batch/v1", "Job", {"suspend": True, "template": _JOB_TEMPLATE}),
    _batch_job("ray.io/v1", "RayJob", {"suspend": True, "entrypoint": "python train.py"}),
    _batch_job("jobset.x-k8s.io/v1alpha2", "JobSet", {"suspend": True, "replicatedJobs": [
        {"name": "workers", "replicas": 1, "template": {"spec": {"template": _JOB_TEMPLATE}}}]}),
    *(_batch_job(f"kubeflow.org/{version}", kind, {"runPolicy": {"suspend": True}, replicas: {
        "Worker": {"replicas": 1, "template": _JOB_TEMPLATE}}})
      for version, kind, replicas in (("v1", "PyTorchJob", "pytorchReplicaSpecs"), ("v1", "TFJob", "tfReplicaSpecs"),
                                      ("v2beta1", "MPIJob", "mpiReplicaSpecs"))),
]
RECLAIM_SCENARIO: dict[str, Any] = {
    "name": "reclaim",
    "flavors": [{"name": "h100"}],
    "pools": [{"name": "h100", "count": 3, "gpus_per_node": 8, "flavor": "h100", "gpu_hourly_price": 3.0}],
    "tenants": [
        {"name": "team-a", "cohort": "c", "quotas": [{"flavor": "h100", "gpus": 20}]},
        {"name": "team-g", "cohort": "c", "quotas": [{"flavor": "h100", "gpus": 2}]},
    ],
    "workloads": [
        {"name": "ray", "kind": "RayCluster", "tenant": "team-a", "gpus_per_pod": 2, "utilisation": _IDLE},
        {"name": "eray", "kind": "RayCluster", "tenant": "team-a", "utilisation": _IDLE,
         "annotations": {"kueue.x-k8s.io/elastic-job": "true"}},
        {"name": "isvc", "kind": "InferenceService", "tenant": "team-a", "utilisation": _IDLE, "serving": _NO_TRAFFIC},
        {"name": "nb", "kind": "Notebook", "tenant": "team-a", "utilisation": _IDLE},
        {"name": "dep", "kind": "Deployment", "tenant": "team-a", "pods": 2, "utilisation": _IDLE},
        {"name": "sts", "kind": "StatefulSet", "tenant": "team-a", "utilisation": _IDLE},
        {"name": "wl", "kind": "Workload", "tenant": "team-a"},
        {"name": "chat", "kind": "InferenceService", "tenant": "team-a", "utilisation": _IDLE,
         "serving": {"model_name": "m", "requests_per_second": {"profile": "constant", "value": 5}}},
        {"name": "dark", "kind": "StatefulSet", "tenant": "team-a", "utilisation": _IDLE, "drop_telemetry": True},
        {"name": "optout", "kind": "Notebook", "tenant": "team-a", "utilisation": _IDLE,
         "annotations": {"gpuaas.io/reclaim": "never"}},
        {"name": "young", "kind": "Notebook", "tenant": "team-g", "utilisation": _IDLE},
        # Second copies for the tests of races and crashes (a restored workload restarts inside its grace period).
        {"name": "ray-b", "kind": "RayCluster", "tenant": "team-a", "utilisation": _IDLE},
        {"name": "isvc-b", "kind": "InferenceService", "tenant": "team-a", "utilisation": _IDLE,
         "serving": _NO_TRAFFIC},
        {"name": "nb-b", "kind": "Notebook", "tenant": "team-a", "utilisation": _IDLE},
        {"name": "dep-b", "kind": "Deployment", "tenant": "team-a", "utilisation": _IDLE},
        {"name": "sts-b", "kind": "StatefulSet", "tenant": "team-a", "utilisation": _IDLE},
    ],
    "objects": _BATCH_JOBS,
}


def embedded(data_dir: Path, scenario: dict[str, Any], *, seed: int = 11, history: timedelta = timedelta(hours=2),
             **options: Any) -> EmbeddedCluster:
    """An embedded cluster on a ManualClock whose history ends at the current minute (``options``: more of its arguments)."""
    start = datetime.now(UTC).replace(second=0, microsecond=0) - history
    return EmbeddedCluster(parse_scenario(scenario), data_dir, seed=seed, history=history, clock=ManualClock(start),
                           **options)


def reclaim_cluster(data_dir: Path) -> EmbeddedCluster:
    """The reclaim fleet, not yet started (use it as a context manager)."""
    return embedded(data_dir, RECLAIM_SCENARIO, seed=5, history=RECLAIM_HISTORY)


def write_policy(path: Path, **reclaim: object) -> Path:
    """A policy file for the reclaim fleet's tenants (``team-g``'s 2 h grace), with ``reclaim`` settings."""
    policy = {"reclaim": reclaim, "tenants": [
        {"name": "team-a", "namespaces": ["team-a"]},
        {"name": "team-g", "namespaces": ["team-g"], "reclaim": {"grace_minutes": 120}},
    ]}
    path.write_text(yaml.safe_dump(policy))
    return path
