"""Deadline holds and the release sweep on a cluster whose Kueue serves only ``v1beta1``.

An embedded cluster whose API server does not serve ``kueue.x-k8s.io/v1beta2`` (an older Kueue),
with one queue of 4 GPUs: ``busy`` (4 GPUs) is admitted, ``wl`` (4 GPUs) waits. The hold of ``wl``
is read and written at ``v1beta1``; the release sweep task lists the Workloads and releases the hold
at ``v1beta1`` too, from the objects alone. On the same live objects: the hold's guard refuses the
admitted ``busy`` without writing, a Workload edited since the snapshot the plan was made on is refused
as ``changed`` without writing, and one changed between the action's own read and its write gets a
real 409 from the API server, which is never overwritten.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from gpuaas.actions import KubeWriter
from gpuaas.actions.deadline_holds import apply_nudges
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.models import Outcome
from gpuaas.policies.deadlines import HOLD_ANNOTATION, Nudge
from gpuaas.policy import Mode
from gpuaas.settings import GpuaasSettings
from gpuaas.store import Store
from tasks.deadlines import release_due_holds
from tests.actions.reclaim_scenario import obj
from tests.scenarios import embedded

pytestmark = [pytest.mark.integration]

OLD_KUEUE = {
    "name": "old-kueue-holds",
    "flavors": [{"name": "h100"}],
    "pools": [{"name": "h100", "count": 1, "gpus_per_node": 4, "flavor": "h100", "gpu_hourly_price": 3.0}],
    "tenants": [{"name": "team-a", "cohort": "c", "quotas": [{"flavor": "h100", "gpus": 4}]}],
    "workloads": [{"name": "busy", "kind": "Workload", "tenant": "team-a", "gpus_per_pod": 4},
                  {"name": "wl", "kind": "Workload", "tenant": "team-a", "gpus_per_pod": 4, "submit_at": "1m"}],
}
V1BETA1 = "/apis/kueue.x-k8s.io/v1beta1"
V1BETA2 = "/apis/kueue.x-k8s.io/v1beta2"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with embedded(tmp_path_factory.mktemp("old-kueue-holds"), OLD_KUEUE, seed=3, history=timedelta(minutes=10),
                  disabled_api_versions=("kueue.x-k8s.io/v1beta2",)) as running:
        yield running


def hold(cluster: EmbeddedCluster, name: str, release_at: datetime) -> Nudge:
    """A hold planned on the Workload as it is now (the snapshot's uid and resourceVersion)."""
    meta = obj(cluster, "Workload", name)["metadata"]
    return Nudge("hold", "team-a", name, "planned start later", release_at=release_at, uid=meta["uid"],
                 resource_version=meta["resourceVersion"])


def requests(cluster: EmbeddedCluster, method: str, prefix: str) -> int:
    """Requests of ``method`` whose path starts with ``prefix``."""
    return sum(n for key, n in cluster.api.requests.items() if key.startswith(f"{method} {prefix}"))


def test_a_hold_and_its_release_sweep_go_through_v1beta1(settings: GpuaasSettings, cluster: EmbeddedCluster,
                                                         store: Store) -> None:
    release_at = datetime.now(UTC) + timedelta(minutes=30)
    with KubeWriter(settings) as writer:
        [held] = apply_nudges([hold(cluster, "wl", release_at)], store, writer, mode=Mode.apply, flow_run_id=None)
    assert held.result == Outcome.applied, held.reason
    wl = obj(cluster, "Workload", "wl")
    assert wl["spec"]["active"] is False
    assert json.loads(wl["metadata"]["annotations"][HOLD_ANNOTATION])["audit_id"] == held.audit_id

    early = release_due_holds.fn(settings, release_at - timedelta(seconds=1))
    assert early.nudges == ()
    [released] = release_due_holds.fn(settings, release_at).nudges
    assert released.result == Outcome.released, released.reason
    wl = obj(cluster, "Workload", "wl")
    assert wl["spec"]["active"] is True and HOLD_ANNOTATION not in (wl["metadata"].get("annotations") or {})
    assert cluster.api.requests[f"GET {V1BETA1}/workloads"] >= 2  # the sweep lists at the version served
    assert requests(cluster, "PATCH", f"{V1BETA1}/") == 2  # the hold, then its release
    assert requests(cluster, "PATCH", V1BETA2) == 0
    assert requests(cluster, "GET", f"{V1BETA2}/") == 0  # v1beta2 only asked for in discovery (a 404)


def test_the_guard_refuses_an_admitted_workload_on_the_live_object(settings: GpuaasSettings,
                                                                   cluster: EmbeddedCluster, store: Store) -> None:
    before = obj(cluster, "Workload", "busy")["metadata"]["resourceVersion"]
    with KubeWriter(settings) as writer:
        [result] = apply_nudges([hold(cluster, "busy", datetime.now(UTC) + timedelta(hours=1))], store, writer,
                                mode=Mode.apply, flow_run_id=None)
    assert result.result == Outcome.skipped
    assert "no longer pending (Admitted)" in result.reason  # Admitted is checked first, QuotaReserved next
    busy = obj(cluster, "Workload", "busy")
    assert busy["metadata"]["resourceVersion"] == before and busy["spec"].get("active") is not False


def test_a_workload_edited_since_the_snapshot_is_not_held(settings: GpuaasSettings, cluster: EmbeddedCluster,
                                                           store: Store) -> None:
    planned = hold(cluster, "wl", datetime.now(UTC) + timedelta(hours=1))
    cluster.store.patch("Workload", "team-a", "wl", {"spec": {"priority": 100}})  # raised by its team meanwhile
    edited = obj(cluster, "Workload", "wl")["metadata"]["resourceVersion"]
    patches = requests(cluster, "PATCH", V1BETA1)
    with KubeWriter(settings) as writer:
        [result] = apply_nudges([planned], store, writer, mode=Mode.apply, flow_run_id=None)
    assert result.result == Outcome.changed
    assert result.reason == (f"changed since the snapshot (resourceVersion {planned.resource_version} -> {edited}): "
                             "decided again next run")
    assert requests(cluster, "PATCH", V1BETA1) == patches  # nothing written
    wl = obj(cluster, "Workload", "wl")
    assert wl["metadata"]["resourceVersion"] == edited and wl["spec"].get("active") is not False
    [row] = store.audit(obj="team-a/wl", limit=None)[-1:]
    assert (row.id, row.outcome) == (result.audit_id, Outcome.changed)


class ChangedMeanwhile(KubeWriter):
    """The real writer, except that someone labels the Workload between its read and its patch."""

    def __init__(self, settings: GpuaasSettings, cluster: EmbeddedCluster) -> None:
        super().__init__(settings)
        self.cluster = cluster

    def get(self, kind: str, namespace: str, name: str, *, version: str | None = None) -> dict[str, Any]:
        read = super().get(kind, namespace, name, version=version)
        self.cluster.store.patch(kind, namespace, name, {"metadata": {"labels": {"touched": "yes"}}})
        return read


def test_a_409_from_the_api_server_is_never_overwritten(settings: GpuaasSettings, cluster: EmbeddedCluster,
                                                        store: Store) -> None:
    with ChangedMeanwhile(settings, cluster) as writer:
        [result] = apply_nudges([hold(cluster, "wl", datetime.now(UTC) + timedelta(hours=1))], store, writer,
                                mode=Mode.apply, flow_run_id=None)
    assert result.result == Outcome.skipped and "409 Conflict" in result.reason
    wl = obj(cluster, "Workload", "wl")
    assert wl["spec"]["active"] is True and HOLD_ANNOTATION not in (wl["metadata"].get("annotations") or {})
    rows = store.audit(refers_to=[int(result.audit_id or 0)])
    assert [r.outcome for r in rows] == [Outcome.skipped]
