"""The ``additionalPrinterColumns`` of the custom resources the emulator serves, per served version.

Why a copy: a real API server prints a custom resource with the columns its CRD declares, and gpuaas does not
ship the CRDs (the schema checks in ``_schemas`` are compact for the same reason). These are the columns,
field for field, of the CRDs of the versions the real backend runs: Kueue v0.17.0 (unchanged in v0.19.2),
KubeRay ray-operator v1.6.0 and the JobSet v0.11.1, Kubeflow training-operator v1.9.3 and mpi-operator v0.8.0
that Kueue v0.17.0 pins; KServe's from ``config/crd/full/serving.kserve.io_inferenceservices.yaml``. The
Kubeflow Notebook CRD and MPIJob ``v2beta1`` declare none. The tests compare them with the real CRDs.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CRD_COLUMNS", "PrinterColumn"]


@dataclass(frozen=True)
class PrinterColumn:
    """One ``additionalPrinterColumns`` entry, with the CRD API's defaults for what it leaves out."""

    name: str
    type: str
    json_path: str
    description: str = ""
    priority: int = 0
    format: str = ""


def _c(name: str, typ: str, json_path: str, description: str = "", priority: int = 0) -> PrinterColumn:
    return PrinterColumn(name, typ, json_path, description, priority)


_PENDING = "Number of pending workloads"
_ADMITTED = "Number of admitted workloads that haven't finished yet"


def _cluster_queue(cohort_path: str) -> tuple[PrinterColumn, ...]:
    return (_c("Cohort", "string", cohort_path, "Cohort that this ClusterQueue belongs to"),
            _c("Strategy", "string", ".spec.queueingStrategy", "The queueing strategy used to prioritize workloads", 1),
            _c("Pending Workloads", "integer", ".status.pendingWorkloads", _PENDING),
            _c("Admitted Workloads", "integer", ".status.admittedWorkloads", _ADMITTED, 1))


_LOCAL_QUEUE = (_c("ClusterQueue", "string", ".spec.clusterQueue", "Backing ClusterQueue"),
                _c("Pending Workloads", "integer", ".status.pendingWorkloads", _PENDING),
                _c("Admitted Workloads", "integer", ".status.admittedWorkloads", _ADMITTED + "."))
_WORKLOAD = (
    _c("Queue", "string", ".spec.queueName", "Name of the queue this workload was submitted to"),
    _c("Reserved in", "string", ".status.admission.clusterQueue",
       "Name of the ClusterQueue where the workload is reserving quota"),
    _c("Admitted", "string", ".status.conditions[?(@.type=='Admitted')].status", "Admission status"),
    _c("Finished", "string", ".status.conditions[?(@.type=='Finished')].status", "Workload finished"),
    _c("Age", "date", ".metadata.creationTimestamp", "Time this workload was created"),
)
_PRIORITY_CLASS = (_c("Value", "integer", ".value", "Value of workloadPriorityClass's Priority"),)
_RAY_CLUSTER = (
    _c("desired workers", "integer", ".status.desiredWorkerReplicas"),
    _c("available workers", "integer", ".status.availableWorkerReplicas"),
    _c("cpus", "string", ".status.desiredCPU"),
    _c("memory", "string", ".status.desiredMemory"),
    _c("gpus", "string", ".status.desiredGPU"),
    _c("tpus", "string", ".status.desiredTPU", priority=1),
    _c("status", "string", ".status.state"),
    _c("age", "date", ".metadata.creationTimestamp"),
    _c("head pod IP", "string", ".status.head.podIP", priority=1),
    _c("head service IP", "string", ".status.head.serviceIP", priority=1),
)
_RAY_JOB = (
    _c("job status", "string", ".status.jobStatus"),
    _c("deployment status", "string", ".status.jobDeploymentStatus"),
    _c("ray cluster name", "string", ".status.rayClusterName"),
    _c("start time", "string", ".status.startTime"),
    _c("end time", "string", ".status.endTime"),
    _c("age", "date", ".metadata.creationTimestamp"),
)
_PREDICTOR = ".status.components.predictor.traffic"
_INFERENCE_SERVICE = (
    _c("URL", "string", ".status.url"),
    _c("Ready", "string", ".status.conditions[?(@.type=='Ready')].status"),
    _c("Prev", "integer", f"{_PREDICTOR}[?(@.tag=='prev')].percent", priority=1),
    _c("Latest", "integer", f"{_PREDICTOR}[?(@.latestRevision==true)].percent", priority=1),
    _c("PrevRolledoutRevision", "string", f"{_PREDICTOR}[?(@.tag=='prev')].revisionName", priority=1),
    _c("LatestReadyRevision", "string", f"{_PREDICTOR}[?(@.latestRevision==true)].revisionName", priority=1),
    _c("Age", "date", ".metadata.creationTimestamp"),
)
_JOB_SET = (
    _c("TerminalState", "string", ".status.terminalState", "Final state of JobSet"),
    _c("Restarts", "string", ".status.restarts", "Number of restarts"),
    _c("Completed", "string", '.status.conditions[?(@.type=="Completed")].status'),
    _c("Suspended", "string", ".spec.suspend", "JobSet suspended"),
    _c("Age", "date", ".metadata.creationTimestamp", "Time this JobSet was created"),
)
_TRAINING_JOB = (_c("State", "string", ".status.conditions[-1:].type"),
                 _c("Age", "date", ".metadata.creationTimestamp"))

CRD_COLUMNS: dict[tuple[str, str], tuple[PrinterColumn, ...]] = {
    ("ClusterQueue", "v1beta2"): _cluster_queue(".spec.cohortName"),
    ("ClusterQueue", "v1beta1"): _cluster_queue(".spec.cohort"),
    **{("LocalQueue", v): _LOCAL_QUEUE for v in ("v1beta2", "v1beta1")},
    **{("Workload", v): _WORKLOAD for v in ("v1beta2", "v1beta1")},
    **{("WorkloadPriorityClass", v): _PRIORITY_CLASS for v in ("v1beta2", "v1beta1")},
    ("RayCluster", "v1"): _RAY_CLUSTER,
    ("RayJob", "v1"): _RAY_JOB,
    ("InferenceService", "v1beta1"): _INFERENCE_SERVICE,
    ("JobSet", "v1alpha2"): _JOB_SET,
    ("PyTorchJob", "v1"): _TRAINING_JOB,
    ("TFJob", "v1"): _TRAINING_JOB,
}
"""(kind, version) -> the CRD's columns; a served version not listed declares none (Cohort, ResourceFlavor,
Notebook, MPIJob), and the server then prints Age, as upstream's ``serveDefaultColumnsIfEmpty`` does."""
