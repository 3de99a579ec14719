"""Kueue semantics for the embedded cluster: quota, cohorts, admission, job integrations.

``KueueController(store, clock)`` runs Kueue's admission against an ``ObjectStore`` in explicit
passes (``reconcile()``), so tests and the simulation decide when time moves. Call ``attach()``
once so later passes only look at what clients changed (the fast path).

Emulated: per-flavor quota with cohort borrowing (``borrowingLimit``) and lending
(``lendingLimit``), Cohort objects' own quota, BestEffortFIFO by priority then FIFO, flavor
fallback in spec order, ``spec.active`` deactivation, job stop/resume (RayCluster suspend,
Notebook and InferenceService stop annotations, StatefulSet/Deployment replicas), non-elastic
restart and elastic scale-down of RayClusters, pods bound to flavor nodes with GPU indices,
ClusterQueue/LocalQueue status, and the visibility API.

Classic preemption (``spec.preemption``: ``withinClusterQueue``, ``reclaimWithinCohort``) with
Kueue's candidate order and target minimisation; preempted Workloads get ``Evicted`` (reason
``Preempted``) and ``Preempted``, are requeued, and the GPU-hours they lose are counted in
``ReconcileResult.preempted_gpu_hours``. Lowering a quota evicts nothing by itself, as in Kueue.

Not emulated: ``borrowWithinCohort``, fair sharing, admission checks, stop policies, namespace selectors, hierarchical cohorts, topology-aware
scheduling, partial admission, elastic scale-up slices, and gated Pending pods before admission
(pods exist only once admitted). Resources no resource group covers are not accounted. Client
stops are reported as ``QuotaReserved=False`` reason ``OnHold`` and resumes as ``Requeued=True``
reason ``Resumed`` (emulator names).
"""

from ...quantity import GPU
from ._controller import KueueController
from ._model import GpuAssignment, ReconcileResult, WorkloadState
from ._placement import GPU_INDICES_ANNOTATION, NodeBook, PlacedPod

__all__ = [
    "GPU",
    "GPU_INDICES_ANNOTATION",
    "GpuAssignment",
    "KueueController",
    "NodeBook",
    "PlacedPod",
    "ReconcileResult",
    "WorkloadState",
]
