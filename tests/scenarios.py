"""Hand-checked scenarios shared by the integration tests, and a way to start them.

HAND_CHECKED (2 nodes x 4 H100 at $3/GPU-hour, cohort ``c``, team-a and team-b with 4 GPUs each):

* ``busy`` RayCluster, team-a, 1 pod x 2 GPUs at activity 0.6   -> admitted, 2 x 2 h x $3 = $12
* ``nb``   Notebook,   team-b, 1 GPU at 0.0                      -> admitted, 1 x 2 h x $3 = $6
* ``dark`` StatefulSet, team-b, 1 GPU, telemetry dropped         -> admitted, $6, no dcgm series
* ``big``  RayCluster, team-b, 2 pods x 3 GPUs, submitted at 10m -> 6 GPUs > the 4 left: pending
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuaas.cluster import testbed
from gpuaas.cluster.runner import EmbeddedCluster

__all__ = ["HAND_CHECKED", "HISTORY", "embedded", "point_at"]

HAND_CHECKED: dict[str, Any] = {
    "name": "hand-checked",
    "flavors": [{"name": "h100"}],
    "pools": [{"name": "h100", "count": 2, "gpus_per_node": 4, "flavor": "h100", "gpu_hourly_price": 3.0}],
    "tenants": [
        {"name": "team-a", "cohort": "c", "quotas": [{"flavor": "h100", "gpus": 4}]},
        {"name": "team-b", "cohort": "c", "quotas": [{"flavor": "h100", "gpus": 4}]},
    ],
    "workloads": [
        {"name": "busy", "kind": "RayCluster", "tenant": "team-a", "gpus_per_pod": 2,
         "utilisation": {"profile": "constant", "value": 0.6}},
        {"name": "nb", "kind": "Notebook", "tenant": "team-b", "utilisation": {"profile": "constant", "value": 0.0}},
        {"name": "dark", "kind": "StatefulSet", "tenant": "team-b", "drop_telemetry": True},
        {"name": "big", "kind": "RayCluster", "tenant": "team-b", "pods": 2, "gpus_per_pod": 3, "submit_at": "10m"},
    ],
}
HISTORY = timedelta(hours=2)


def embedded(data_dir: Path, scenario: dict[str, Any] = HAND_CHECKED, **options: Any) -> EmbeddedCluster:
    """``gpuaas.cluster.testbed.embedded`` with the hand-checked scenario unless given another."""
    return testbed.embedded(data_dir, scenario, **options)


def point_at(cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch, **settings: str | Path) -> EmbeddedCluster:
    """Point gpuaas's settings at ``cluster`` (NVML off), plus ``GPUAAS_<NAME>`` overrides, for one test."""
    env = {**cluster.settings_env(), "GPUAAS_NVML": "off"}
    env.update({f"GPUAAS_{name.upper()}": str(value) for name, value in settings.items()})
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return cluster
