"""The emulator's server-side printing against the real kube-apiserver's: the ``meta.k8s.io`` Tables kubectl asks for.

Cases: the same ClusterQueue, Workloads and Event written to both (the emulator's Kueue and the real one decide
their status) print the same Table, column definitions and cells alike (ages excepted, as the two clocks differ):
got one at a time and listed, an Event at its core/v1 and events.k8s.io/v1 paths, with each ``includeObject``;
an ``includeObject`` upstream does not know is the same 400. Then the printers alone: for every custom resource
the real cluster has the real CRD of, the columns it prints are the emulator's, and the emulator's printers fed
the real server's own objects (the scenario's nodes, Deployment, StatefulSet, Jobs, Namespaces, Events, Kueue's
objects) give the real server's cells. Last, the columns of the kinds whose CRDs the real cluster does not
install (JobSet, PyTorchJob, TFJob, MPIJob) equal those of the CRDs in the modules Kueue pins.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import yaml

from gpuaas.cluster.apiserver import ApiServer, ObjectStore
from gpuaas.cluster.apiserver._crd_columns import CRD_COLUMNS
from gpuaas.cluster.apiserver._tables import table_of
from gpuaas.cluster.kueue import KueueController
from gpuaas.cluster.kueue import testing as t
from gpuaas.cluster.real import KubeHTTP, RealCluster, find_go, tools_dir
from gpuaas.cluster.real._build import _go_env
from gpuaas.cluster.real._manifests import _module_dir

from .conftest import is_true, wait_until

pytestmark = [pytest.mark.real]

NS = "tables"
CQ = "tables-cq"
TABLE = ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
         "application/json")  # what kubectl get sends
AGES = {"Age", "age", "Last Seen", "First Seen", "Duration"}  # read against each server's clock
DURATION = re.compile(r"^(\d+[smhdy])+$")
Client = httpx.Client


def _queue() -> dict[str, Any]:
    """4 GPUs in a cohort; the strategy written out, as the emulator does not apply the CRD's default for it."""
    queue = t.cluster_queue(CQ, {"tables-gpu": {"nvidia.com/gpu": 4}}, cohort="tables-cohort")
    queue["spec"]["queueingStrategy"] = "BestEffortFIFO"
    return queue


def _objects(event_time: datetime) -> list[dict[str, Any]]:
    """A queue of 4 GPUs, a Workload it admits and an Event about it (one that waits is written after)."""
    stamp = event_time.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        t.resource_flavor("tables-gpu"), _queue(), t.local_queue(NS, "q", CQ), t.workload(NS, "runs", "q", gpus=4),
        {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "runs.1", "namespace": NS},
         "eventTime": stamp, "reportingController": "gpuaas", "reportingInstance": "gpuaas-0", "action": "Reclaim",
         "reason": "Reclaimed", "type": "Warning", "note": "  reclaimed 4 idle GPUs  ",
         "regarding": {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "name": "runs", "namespace": NS,
                       "fieldPath": "spec.podSets[0]"},
         "series": {"count": 2, "lastObservedTime": stamp}},
    ]


WAITS = t.workload(NS, "waits", "q", gpus=2)


def _settled(status: dict[str, Any]) -> bool:
    return status.get("admittedWorkloads") == 1 and status.get("pendingWorkloads") == 1


@pytest.fixture(scope="module")
def real_client(real_cluster: RealCluster, api: KubeHTTP) -> Iterator[Client]:
    """A client of the real server with the cluster's objects of this module written and Kueue settled."""
    for obj in _objects(datetime.now(UTC)):
        api.create(obj)
    wait_until("Kueue admits the first Workload", lambda: is_true(api.get("Workload", "runs", NS), "Admitted"), 60)
    api.create(WAITS)
    wait_until("Kueue holds the second Workload",
               lambda: _settled(api.get("ClusterQueue", CQ).get("status") or {}), timeout=60)
    # the LocalQueue's status is another reconcile of Kueue's, which may come a moment after the ClusterQueue's
    wait_until("Kueue counts both Workloads in the LocalQueue",
               lambda: _settled(api.get("LocalQueue", "q", NS).get("status") or {}), timeout=60)
    with httpx.Client(base_url=real_cluster.api_url, headers={"Authorization": f"Bearer {real_cluster.token}"},
                      verify=ssl.create_default_context(cafile=str(real_cluster.pki_dir / "ca.crt"))) as client:
        yield client
    # Gone again for the modules after this one on the session's cluster, which count queues and flavors.
    for kind, name, namespace in (("Workload", "runs", NS), ("Workload", "waits", NS), ("Event", "runs.1", NS),
                                  ("LocalQueue", "q", NS), ("ClusterQueue", CQ, None),
                                  ("ResourceFlavor", "tables-gpu", None), ("Namespace", NS, None)):
        api.delete(kind, name, namespace)


@pytest.fixture(scope="module")
def emulated_client() -> Iterator[Client]:
    """A client of the emulator with the same objects, its Kueue run until it has decided."""
    clock = t.FakeClock(datetime.now(UTC).replace(microsecond=0))
    store = ObjectStore(clock)
    kueue = KueueController(store, clock)
    for obj in [*_objects(clock.now), WAITS]:
        if obj["kind"] != "Namespace":
            store.create(obj)
        for _ in range(3):
            kueue.reconcile()
            clock.advance(1)
    assert _settled(store.get("ClusterQueue", None, CQ)["status"])
    with ApiServer(store) as server, httpx.Client(base_url=server.url) as client:
        yield client


def _table(client: Client, path: str, **params: str) -> dict[str, Any]:
    response = client.get(path, params=params, headers={"Accept": TABLE})
    assert response.status_code == 200, response.text
    table: dict[str, Any] = response.json()
    return table


def _comparable(table: dict[str, Any]) -> dict[str, Any]:
    """A Table less what differs between two servers by nature: ages, uids, resourceVersions, managed fields."""
    ages = [i for i, c in enumerate(table["columnDefinitions"]) if c["name"] in AGES or c["type"] == "date"]
    rows = []
    for row in table["rows"]:
        assert all(DURATION.match(row["cells"][i]) for i in ages), row["cells"]
        obj = row["object"]
        meta = obj and {k: obj["metadata"].get(k) for k in ("name", "namespace")}
        rows.append({"cells": [c for i, c in enumerate(row["cells"]) if i not in ages],
                     "object": obj and {"kind": obj["kind"], "apiVersion": obj["apiVersion"], "metadata": meta}})
    return {"kind": table["kind"], "apiVersion": table["apiVersion"], "columnDefinitions": table["columnDefinitions"],
            "rows": rows}


@pytest.mark.parametrize(("path", "params"), [
    (f"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{CQ}", {}),
    (f"/apis/kueue.x-k8s.io/v1beta1/clusterqueues/{CQ}", {"includeObject": "Object"}),
    (f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads", {}),
    (f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads/runs", {"includeObject": "None"}),
    (f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/localqueues", {"includeObject": "Metadata"}),
    (f"/api/v1/namespaces/{NS}/events/runs.1", {}),
    (f"/apis/events.k8s.io/v1/namespaces/{NS}/events/runs.1", {"includeObject": "Object"}),
], ids=["cq-get", "cq-v1beta1-object", "workloads-list", "workload-get-none", "localqueues", "event-core",
        "event-events.k8s.io"])
def test_the_emulator_prints_what_the_real_server_prints(real_client: Client, emulated_client: Client, path: str,
                                                          params: dict[str, str]) -> None:
    real, mine = _table(real_client, path, **params), _table(emulated_client, path, **params)
    assert _comparable(mine) == _comparable(real)
    if params.get("includeObject") == "Object":
        assert mine["rows"][0]["object"]["apiVersion"] == real["rows"][0]["object"]["apiVersion"]


def test_an_unknown_include_object_is_the_same_400(real_client: Client, emulated_client: Client) -> None:
    path = f"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{CQ}"
    answers = [c.get(path, params={"includeObject": "Everything"}, headers={"Accept": TABLE})
               for c in (real_client, emulated_client)]
    assert [a.status_code for a in answers] == [400, 400]
    real, mine = (a.json() for a in answers)
    assert (mine["reason"], mine["message"]) == (real["reason"], real["message"])


# (kind, version, path) of every kind the emulator serves whose real printer the real cluster has (v1beta1 of the
# kinds it gives the conversion webhook)
_KUEUE = (("ClusterQueue", "clusterqueues"), ("LocalQueue", "localqueues"), ("Workload", "workloads"),
          ("Cohort", "cohorts"), ("ResourceFlavor", "resourceflavors"),
          ("WorkloadPriorityClass", "workloadpriorityclasses"))
PRINTED = [
    *[(kind, "v1beta2", f"/apis/kueue.x-k8s.io/v1beta2/{plural}") for kind, plural in _KUEUE],
    *[(kind, "v1beta1", f"/apis/kueue.x-k8s.io/v1beta1/{plural}") for kind, plural in _KUEUE[:3]],
    ("RayCluster", "v1", "/apis/ray.io/v1/rayclusters"), ("RayJob", "v1", "/apis/ray.io/v1/rayjobs"),
    ("Namespace", "v1", "/api/v1/namespaces"), ("Node", "v1", "/api/v1/nodes"),
    ("Deployment", "v1", "/apis/apps/v1/deployments"), ("StatefulSet", "v1", "/apis/apps/v1/statefulsets"),
    ("Job", "v1", "/apis/batch/v1/jobs"), ("Event", "v1", "/api/v1/events"),
    ("Event", "v1", "/apis/events.k8s.io/v1/events"),
]


@pytest.mark.parametrize(("kind", "version", "path"), PRINTED, ids=[p for *_, p in PRINTED])
def test_the_printers_given_the_real_servers_objects_print_its_cells(real_client: Client, kind: str, version: str,
                                                                     path: str) -> None:
    real = _table(real_client, path, includeObject="Object")
    printer = table_of({"accept": TABLE}, {"includeObject": "Object"}, kind, version, lambda: datetime.now(UTC))
    assert printer is not None
    mine = printer([row["object"] for row in real["rows"]], real["metadata"])
    assert mine["columnDefinitions"] == real["columnDefinitions"]
    ages = [i for i, c in enumerate(real["columnDefinitions"]) if c["name"] in AGES or c["type"] == "date"]
    for got, want in zip(mine["rows"], real["rows"], strict=True):
        assert [c for i, c in enumerate(got["cells"]) if i not in ages] == [
            c for i, c in enumerate(want["cells"]) if i not in ages]


# (kind, version, module, version, CRD file in it) of the jobs Kueue admits whose CRDs the real cluster lacks
PINNED = [
    ("JobSet", "v1alpha2", "sigs.k8s.io/jobset", "v0.11.1",
     "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"),
    ("PyTorchJob", "v1", "github.com/kubeflow/training-operator", "v1.9.3",
     "manifests/base/crds/kubeflow.org_pytorchjobs.yaml"),
    ("TFJob", "v1", "github.com/kubeflow/training-operator", "v1.9.3", "manifests/base/crds/kubeflow.org_tfjobs.yaml"),
    ("MPIJob", "v2beta1", "github.com/kubeflow/mpi-operator", "v0.8.0", "manifests/base/kubeflow.org_mpijobs.yaml"),
]


@pytest.mark.parametrize(("kind", "version", "module", "module_version", "file"), PINNED, ids=[p[0] for p in PINNED])
def test_the_columns_of_the_other_jobs_are_their_crds(kind: str, version: str, module: str, module_version: str,
                                                      file: str) -> None:
    go = find_go(lambda message: None)
    crd = yaml.safe_load((_module_dir(go, _go_env(go), tools_dir() / "kueue", module, module_version) / file)
                         .read_text())
    [served] = [v for v in crd["spec"]["versions"] if v["name"] == version]
    assert [(c.name, c.type, c.json_path, c.description, c.priority) for c in CRD_COLUMNS.get((kind, version), ())] == [
        (c["name"], c["type"], c["jsonPath"], c.get("description", ""), c.get("priority", 0))
        for c in served.get("additionalPrinterColumns") or []]
