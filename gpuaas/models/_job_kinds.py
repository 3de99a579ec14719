"""The batch job kinds Kueue admits, named once for the source that lists them and the role that allows it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["JOB_OWNERS", "OwnerKind"]


@dataclass(frozen=True)
class OwnerKind:
    """A kind that owns Kueue Workloads, where the API serves it."""

    kind: str
    group: str
    version: str
    plural: str

    @property
    def resource(self) -> str:
        """``jobs.batch/v1``: how the lister names the list (and its errors)."""
        return f"{self.plural}.{self.group}/{self.version}"


JOB_OWNERS: tuple[OwnerKind, ...] = (
    OwnerKind("Job", "batch", "v1", "jobs"),
    OwnerKind("RayJob", "ray.io", "v1", "rayjobs"),
    OwnerKind("JobSet", "jobset.x-k8s.io", "v1alpha2", "jobsets"),
    OwnerKind("PyTorchJob", "kubeflow.org", "v1", "pytorchjobs"),
    OwnerKind("TFJob", "kubeflow.org", "v1", "tfjobs"),
    OwnerKind("MPIJob", "kubeflow.org", "v2beta1", "mpijobs"),
)
"""The batch jobs Kueue admits, at the version its integrations serve (MPIJob: mpi-operator's ``v2beta1``),
read for their deadline annotations only: the reader role lists each, and nothing re-reads or writes them."""
