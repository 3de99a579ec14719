"""An elastic RayCluster asked to free compute is stopped by taking its workers to zero: once they are at zero,
there is nothing left to stop.

Upstream KubeRay's ``ray-cluster.verl.yaml`` (``/work/shared/fixtures/telemetry/kuberay``) gives the head
4 ``nvidia.com/gpu``: after the shrink the Workload still holds the head's GPUs, which read idle the next run.
Scaling zero workers to zero frees nothing, yet it would be planned every run (a new window, a new key),
ranked by the head's GPUs under the cap, and announced as a stop.
"""

from __future__ import annotations

from gpuaas.models import Outcome
from tests.policies.test_idle import workload
from tests.policies.test_reclaim import owner, plan, snapshot


def test_an_elastic_raycluster_whose_workers_are_already_at_zero_is_not_stopped_again() -> None:
    head_only = [workload("wl-verl", owner_name="verl", gpus=4.0, gpus_observed=4.0)]
    [d] = plan(snapshot(head_only, [owner("verl", elastic=True, replicas=0, gpus=4.0)]))
    assert (d.kind, d.name) == ("RayCluster", "verl")
    assert d.outcome == Outcome.skipped and "already stopped" in d.reason


def test_an_elastic_raycluster_with_workers_is_still_shrunk() -> None:
    rows = [workload("wl-verl", owner_name="verl", gpus=8.0, gpus_observed=8.0)]
    [d] = plan(snapshot(rows, [owner("verl", elastic=True, replicas=1, gpus=8.0)]))
    assert (d.kind, d.name, d.outcome) == ("RayCluster", "verl", Outcome.planned)
    # Not elastic: the Workload is deactivated whatever the worker count (that frees the head too).
    [d] = plan(snapshot(rows, [owner("verl", elastic=False, replicas=0, gpus=8.0)]))
    assert (d.kind, d.outcome) == ("Workload", Outcome.planned)
