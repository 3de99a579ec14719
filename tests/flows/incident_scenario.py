"""The incident-review test fleet, and the incident it lives through.

16 H100 GPUs (2 nodes x 8), cohort ``c``, 45 minutes of history, ManualClock; policy tenants
team-a, team-b, team-c (namespace ``team-x`` -> ClusterQueue ``team-x-cq``), rebalance steps of up
to 100 %.

=======  =======  ===================================================================
queue    nominal  what runs
=======  =======  ===================================================================
team-a   10       ``a-busy`` 2 GPUs at 0.6; ``nb`` Notebook 1 GPU idle; ``dep`` Deployment
                  1 GPU idle (lendingLimit 8)
team-b   2        ``b-run`` 2 GPUs at 0.9; ``b-big`` 2 pods x 2 GPUs pending from minute 1
                  (borrowingLimit 0: it waits for quota of its own)
team-c   4        nothing
=======  =======  ===================================================================

The incident (``live_through_incident``), T = the cluster's clock after the history:
reclaim dry-run at T-8m, reclaim apply at T-5m (``nb`` and ``dep`` stopped), rebalance apply at
T-2m (team-b's quota raised), collect at T. Each run collects first, so four collects are stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from gpuaas.cluster.runner import EmbeddedCluster
from tests.scenarios import embedded

HISTORY = timedelta(minutes=45)
IDLE = {"profile": "constant", "value": 0.0}
SCENARIO: dict[str, Any] = {
    "name": "incident",
    "flavors": [{"name": "h100"}],
    "pools": [{"name": "h100", "count": 2, "gpus_per_node": 8, "flavor": "h100", "gpu_hourly_price": 3.0}],
    "tenants": [
        {"name": "team-a", "cohort": "c", "quotas": [{"flavor": "h100", "gpus": 10, "lending_limit": 8}]},
        {"name": "team-b", "cohort": "c", "quotas": [{"flavor": "h100", "gpus": 2, "borrowing_limit": 0}]},
        {"name": "team-c", "cohort": "c", "quotas": [{"flavor": "h100", "gpus": 4}]},
    ],
    "workloads": [
        {"name": "a-busy", "kind": "RayCluster", "tenant": "team-a", "gpus_per_pod": 2,
         "utilisation": {"profile": "constant", "value": 0.6}},
        {"name": "nb", "kind": "Notebook", "tenant": "team-a", "utilisation": IDLE},
        {"name": "dep", "kind": "Deployment", "tenant": "team-a", "utilisation": IDLE},
        {"name": "b-run", "kind": "RayCluster", "tenant": "team-b", "gpus_per_pod": 2,
         "utilisation": {"profile": "constant", "value": 0.9}},
        {"name": "b-big", "kind": "RayCluster", "tenant": "team-b", "pods": 2, "gpus_per_pod": 2,
         "utilisation": {"profile": "constant", "value": 0.6}, "submit_at": "1m"},
    ],
}
TEAMS = ("team-a", "team-b", "team-c")


def incident_cluster(data_dir: Path) -> EmbeddedCluster:
    return embedded(data_dir, SCENARIO, seed=5, history=HISTORY)


def write_policy(path: Path) -> Path:
    path.write_text(yaml.safe_dump({
        # 45 minutes of history: min_history_days 0 lets the quiet team-c lend on it, and a cap of 2 GPUs keeps
        # the plan to one step, two patches, as the review expects.
        "rebalance": {"max_step_percent": 100, "max_step_gpus": 2, "max_total_moved_gpus": 2, "min_history_days": 0},
        "tenants": [{"name": t, "namespaces": [t], "cluster_queues": [f"{t}-cq"]} for t in TEAMS],
    }))
    return path


@dataclass(frozen=True)
class Incident:
    """What the incident left: the instants of the four collects and the results of each run."""

    collects: list[datetime]
    dry_run: dict[str, Any]
    applied: dict[str, Any]
    rebalanced: dict[str, Any]
    started: datetime
    """Wall-clock instant before the first run (audit rows are stamped with the wall clock)."""


def _ok(state: Any) -> Any:
    assert state.is_completed(), state.message
    return state.result()


def live_through_incident(cluster: EmbeddedCluster) -> Incident:
    from datetime import UTC

    from flows.collect import collect
    from flows.rebalance import rebalance
    from flows.reclaim import reclaim

    started = datetime.now(UTC)
    t = cluster.clock.now()
    at = [t - timedelta(minutes=8), t - timedelta(minutes=5), t - timedelta(minutes=2), t]
    dry_run = _ok(reclaim(at=at[0], return_state=True))
    applied = _ok(reclaim(apply=True, at=at[1], return_state=True))
    rebalanced = _ok(rebalance(apply=True, at=at[2], return_state=True))
    _ok(collect(at=at[3], return_state=True))
    return Incident(at, dry_run, applied, rebalanced, started)
