"""Forged ``gpuaas.io/deadline-hold`` marks on the embedded cluster: the release sweep writes none of them.

One queue of 4 GPUs: ``busy`` (4 GPUs) is admitted; ``wl``, ``theirs`` and ``prio`` (4 GPUs each) wait. gpuaas
holds ``wl`` (a real hold, its mark naming its audit row). Someone else deactivates ``theirs`` and writes the mark
``x`` on it; the team of ``prio`` (priority 100) writes ``{"before": {"priority": 101}}`` on its own Workload. At
the hold's release time the sweep task (``release_due_holds``: the Workloads listed from the API server, as the
flow runs it) releases ``wl`` and sends no request that writes ``theirs`` or ``prio``: the one stays deactivated,
the other at its priority, and each forged mark is on record once however many sweeps find it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from gpuaas.actions import KubeWriter
from gpuaas.actions.deadline_holds import RELEASE_ACTION, apply_nudges
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

SCENARIO = {
    "name": "forged-hold-marks",
    "flavors": [{"name": "h100"}],
    "pools": [{"name": "h100", "count": 1, "gpus_per_node": 4, "flavor": "h100", "gpu_hourly_price": 3.0}],
    "tenants": [{"name": "team-a", "cohort": "c", "quotas": [{"flavor": "h100", "gpus": 4}]}],
    "workloads": [{"name": "busy", "kind": "Workload", "tenant": "team-a", "gpus_per_pod": 4},
                  *({"name": name, "kind": "Workload", "tenant": "team-a", "gpus_per_pod": 4, "submit_at": "1m"}
                    for name in ("wl", "theirs", "prio"))],
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with embedded(tmp_path_factory.mktemp("forged-hold-marks"), SCENARIO, seed=3,
                  history=timedelta(minutes=10)) as running:
        yield running


def _workload_writes(cluster: EmbeddedCluster) -> int:
    """Requests to the API server that change a Workload (PATCH, PUT, DELETE), whatever version they name."""
    return sum(n for key, n in cluster.api.requests.items()
               if key.split(" ")[0] in ("PATCH", "PUT", "DELETE") and "/workloads/" in key)


def _forge(cluster: EmbeddedCluster, name: str, mark: str, spec: dict[str, object]) -> None:
    cluster.store.patch("Workload", "team-a", name, {"metadata": {"annotations": {HOLD_ANNOTATION: mark}},
                                                    "spec": spec})


def test_a_forged_mark_is_never_released_and_a_real_hold_still_is(settings: GpuaasSettings, cluster: EmbeddedCluster,
                                                                  store: Store) -> None:
    release_at = datetime.now(UTC) + timedelta(minutes=30)
    meta = obj(cluster, "Workload", "wl")["metadata"]
    hold = Nudge("hold", "team-a", "wl", "planned start later", release_at=release_at, uid=meta["uid"],
                 resource_version=meta["resourceVersion"])
    with KubeWriter(settings) as writer:
        [held] = apply_nudges([hold], store, writer, mode=Mode.apply, flow_run_id=None)
    assert held.result == Outcome.applied, held.reason
    _forge(cluster, "theirs", "x", {"active": False})  # deactivated by an admin, a mark written beside it
    _forge(cluster, "prio", json.dumps({"before": {"priority": 101}}), {"priority": 100})  # by its own team
    writes = _workload_writes(cluster)  # the hold's patch (the forgeries went to the store, not through the API)
    assert writes == 1

    results = {r.nudge.name: r for r in release_due_holds.fn(settings, release_at).nudges}
    assert results["wl"].result == Outcome.released, results["wl"].reason
    wl = obj(cluster, "Workload", "wl")
    assert wl["spec"]["active"] is True and HOLD_ANNOTATION not in (wl["metadata"].get("annotations") or {})
    for name in ("theirs", "prio"):
        assert results[name].result == Outcome.skipped
        assert "mark is not one gpuaas recorded (it names no audit row)" in results[name].reason
    assert _workload_writes(cluster) == writes + 1  # the release of wl, and nothing else
    theirs, prio = obj(cluster, "Workload", "theirs"), obj(cluster, "Workload", "prio")
    assert theirs["spec"]["active"] is False and prio["spec"]["priority"] == 100
    assert theirs["metadata"]["annotations"][HOLD_ANNOTATION] == "x"

    later = release_due_holds.fn(settings, release_at + timedelta(minutes=15)).nudges  # the next run
    assert {r.nudge.name: r.result for r in later} == {"theirs": Outcome.skipped, "prio": Outcome.skipped}
    skips = [r for r in store.audit(flow="deadlines", limit=None)
             if r.action == RELEASE_ACTION and r.outcome == Outcome.skipped]
    assert sorted(r.name for r in skips) == ["prio", "theirs"]  # on record once each
    assert {r.evidence["cause"] for r in skips} == {"unnamed"}
    assert _workload_writes(cluster) == writes + 1
