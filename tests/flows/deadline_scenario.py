"""The deadline test fleet: two cohorts of 4 H100 each, RayClusters of 2 GPUs (1 h) in each.

History 2 h; the jobs are submitted 10 min before the end, so Kueue has admitted two per cohort
(running for 10 min, 50 min left) and the rest are pending.

- cohort ``fc`` (team ``forecast``): ``fc-wide`` (4 GPUs, 1 h, due in 4 h 40 min) is submitted a
  minute after the running two, then ``fc-late-0`` and ``fc-late-1`` (2 GPUs, due in 1 h 55 min).
  Kueue's own order (creation time) would give ``fc-wide`` all four GPUs when the running two end
  (+50 min) and both late ones would end at +170 min, too late. The plan starts them at +50 min
  (end +110 min) and ``fc-wide`` at +110 min: every deadline holds, 0 extra GPUs, and holding
  ``fc-wide`` is what it takes.
- cohort ``rush`` (team ``rush``): due 90 min after submission (+80 min) -> the pending two must
  start by +20 min, but the GPUs are busy until +50 min: 2 deadlines at risk; both must start now,
  next to the running two: 4 extra GPUs (2 are not enough: the second would end at +110 min).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from gpuaas.cluster.runner import EmbeddedCluster
from tests.scenarios import embedded

HISTORY = timedelta(hours=2)


def _jobs(name: str, tenant: str, deadline: str, *, copies: int = 4, gpus: int = 2,
          submit_at: str = "110m") -> dict[str, object]:
    return {"name": name, "kind": "RayCluster", "tenant": tenant, "gpus_per_pod": gpus, "copies": copies,
            "submit_at": submit_at, "duration": "1h", "expected_runtime": "1h", "deadline": deadline,
            "utilisation": {"profile": "constant", "value": 0.8}}


SCENARIO = {
    "name": "deadlines",
    "flavors": [{"name": "h100"}],
    "pools": [{"name": "h100", "count": 2, "gpus_per_node": 8, "flavor": "h100", "gpu_hourly_price": 3.0}],
    "tenants": [
        {"name": "forecast", "cohort": "fc", "quotas": [{"flavor": "h100", "gpus": 4, "borrowing_limit": 0}]},
        {"name": "rush", "cohort": "rush", "quotas": [{"flavor": "h100", "gpus": 4, "borrowing_limit": 0}]},
    ],
    "workloads": [_jobs("fc", "forecast", "235m", copies=2), _jobs("rush", "rush", "200m"),
                  _jobs("fc-wide", "forecast", "400m", copies=1, gpus=4, submit_at="111m"),
                  _jobs("fc-late", "forecast", "235m", copies=2, submit_at="112m")],
}


def deadline_cluster(data_dir: Path) -> EmbeddedCluster:
    return embedded(data_dir, SCENARIO, seed=3, history=HISTORY)
