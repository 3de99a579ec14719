"""Kueue semantics for the embedded cluster: quota, cohorts, admission, job integrations.

``KueueController(store, clock)`` runs Kueue's admission against an ``ObjectStore`` in explicit
passes (``reconcile()``), so tests and the simulation decide when time moves. What is emulated
and what is not is listed in each module's docstring; in short, not emulated: preemption, fair
sharing, admission checks, StrictFIFO, hierarchical cohorts, topology-aware scheduling, partial
admission, elastic scale-up slices, and gated Pending pods before admission.
"""

from ...quantity import GPU
from ._controller import KueueController
from ._model import GpuAssignment, ReconcileResult, WorkloadState
from ._placement import GPU_INDICES_ANNOTATION

__all__ = [
    "GPU",
    "GPU_INDICES_ANNOTATION",
    "GpuAssignment",
    "KueueController",
    "ReconcileResult",
    "WorkloadState",
]
