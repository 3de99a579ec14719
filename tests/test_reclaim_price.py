"""The price of what reclaim stops comes from its own pods' OpenCost rows, whatever OpenCost calls their controller.

OpenCost names a pod's controller one step up: a KServe InferenceService's predictor pods belong to the
Deployment ``<name>-predictor``, a Kubeflow Notebook's to its StatefulSet. gpuaas stops the object at
the top, so the snapshot joins each running pod's owner chain to its cost rows. Built through
``build_snapshot``; no I/O.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pandas as pd

from gpuaas.models import Owner, PodGpus, Snapshot, SourceStatus
from gpuaas.snapshot import build_snapshot
from gpuaas.sources.kube import KubeState
from reports.reclaim import gpu_price

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SOURCES = {"kube": SourceStatus("kube", True, 0.1, 0.0), "opencost": SourceStatus("opencost", True, 0.1, 0.0)}


def _snapshot(*, predictor_running: bool = True) -> Snapshot:
    """InferenceService ``chat`` (its pod on an H100 at $4/GPU-hour) and Notebook ``nb`` in a fleet that averages $1.50."""
    owners = (Owner("Deployment", "team-a", "chat-predictor", "u1", "1", 1.0, 1, False, (), "InferenceService", "chat"),
              Owner("InferenceService", "team-a", "chat", "u2", "1", 1.0, 1, False, ()),
              Owner("StatefulSet", "team-b", "nb", "u3", "1", 1.0, 1, False, (), "Notebook", "nb"),
              Owner("Notebook", "team-b", "nb", "u4", "1", 1.0, 1, False, ()))
    pods = [PodGpus("team-b", "nb-0", "n2", 1.0, "StatefulSet", "nb", "Notebook", "nb")]
    if predictor_running:
        pods.append(PodGpus("team-a", "chat-predictor-7d9-x", "n1", 1.0, "Deployment", "chat-predictor",
                            "InferenceService", "chat"))
    kube = KubeState("v1beta2", (), (), (), (), (), owners, tuple(pods), (), 0)
    costs = pd.DataFrame({
        "namespace": ["team-a", "team-b", "team-c"],
        "controller_kind": ["deployment", "statefulset", "job"],
        "controller": ["chat-predictor", "nb", "train"],
        "pod": ["chat-predictor-7d9-x", "nb-0", "train-0"],
        "day": [0, 0, 0], "gpu_hours": [2.0, 1.0, 9.0], "gpu_cost": [8.0, 2.5, 7.0], "total_cost": [9.0, 3.0, 8.0]})
    return build_snapshot(NOW, [30], SOURCES, kube=kube, prom=None, costs=costs)


def test_an_inference_service_is_priced_by_its_predictor_pods() -> None:
    assert gpu_price(_snapshot(), "InferenceService", "team-a", "chat") == (4.0, "OpenCost, this workload")


def test_a_notebook_is_priced_by_its_statefulset_pods() -> None:
    assert gpu_price(_snapshot(), "Notebook", "team-b", "nb") == (2.5, "OpenCost, this workload")


def test_opencost_s_own_controller_still_prices_the_deployment() -> None:
    assert gpu_price(_snapshot(), "Deployment", "team-a", "chat-predictor") == (4.0, "OpenCost, this workload")


def test_a_pod_that_has_ended_leaves_the_fleet_average() -> None:
    price, source = gpu_price(_snapshot(predictor_running=False), "InferenceService", "team-a", "chat")
    assert (round(price, 4), source) == (round(17.5 / 12.0, 4), "OpenCost, fleet average")


def test_the_owners_survive_the_stored_snapshot() -> None:
    stored = Snapshot.from_json(_snapshot().to_json())
    assert gpu_price(stored, "InferenceService", "team-a", "chat") == (4.0, "OpenCost, this workload")


def test_a_gpu_cost_opencost_left_null_prices_nothing() -> None:
    """OpenCost writes null for a cost it could not compute: ``chat``'s pod then has no price of its own (not $0 an
    hour), and the fleet average is of the pods that have one."""
    snapshot = _snapshot()
    costs = snapshot.costs.copy()
    costs.loc[costs["pod"] == "chat-predictor-7d9-x", "gpu_cost"] = float("nan")
    price, source = gpu_price(replace(snapshot, costs=costs), "InferenceService", "team-a", "chat")
    assert (round(price, 4), source) == (round(9.5 / 10.0, 4), "OpenCost, fleet average")
    costs["gpu_cost"] = float("nan")
    price, source = gpu_price(replace(snapshot, costs=costs), "InferenceService", "team-a", "chat")
    assert price > 0 and source.startswith("assumed $")
