"""Server-side printing on the embedded API server: the ``meta.k8s.io`` Table kubectl asks for.

Cases: the real kubectl prints the header lines and cells a real cluster prints for ``get clusterqueues`` (and
``-o wide``), ``get workloads -A``, ``get events`` (and ``-o wide``) and ``get events.events.k8s.io``; a list's
Table (column definitions, cells, a ``PartialObjectMetadata`` per row, the list's resourceVersion, and its
``continue`` when paged) and a get's one-row Table; ``includeObject`` ``None`` and ``Object`` (in the version
read: a ClusterQueue read through v1beta1 prints its cohort from the v1beta1 field), and an unknown one is
upstream's 400, before the object is read; the Accept header decides as upstream's negotiation does (first the
Table, JSON first, a Table of another group or version passed over, ``q``, meta.k8s.io/v1beta1); a kind whose
CRD declares no columns prints Name and Age; the built-in kinds print their upstream cells; ages are read
against the store's clock. Pure parts against hand-worked values: the Kueue CRDs' columns (the shared
fixtures' real CRDs), the columns' JSONPath, the text of a value, and ``HumanDuration``.
"""

from __future__ import annotations

import re
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gpuaas.cluster.apiserver._core_printers import human_duration
from gpuaas.cluster.apiserver._crd_columns import CRD_COLUMNS, PrinterColumn
from gpuaas.cluster.apiserver._tables import _cell, _find, _text

from .conftest import FIXED_NOW, Cluster, admitted_status, cluster_queue, local_queue, usage_status, workload

KUEUE_CRDS = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "kueue" / "crds"
TABLE = ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
         "application/json")  # what kubectl get sends
CQS = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"
NS = "team-a"


def _stamp(ago: timedelta) -> str:
    return (FIXED_NOW - ago).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _seed(cluster: Cluster) -> None:
    """A queue with usage, an admitted Workload and a pending one, and two Events: one gpuaas recorded through
    events.k8s.io (seen twice, the last 5 minutes ago) and one an older recorder wrote through core/v1."""
    store = cluster.store
    store.create({**cluster_queue("team-a-cq"), "status": usage_status()})
    store.create(local_queue("team-a-queue", NS, "team-a-cq"))
    store.create({**workload("train-1"), "status": admitted_status("team-a-cq")})
    store.create(workload("train-2"))
    store.create({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "a100"}})
    regarding = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "name": "train-1", "namespace": NS}
    store.create({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "train-1.a", "namespace": NS},
                  "eventTime": _stamp(timedelta(minutes=61)), "reportingController": "gpuaas",
                  "reportingInstance": "gpuaas-0", "action": "Reclaim", "reason": "Reclaimed", "type": "Warning",
                  "note": " reclaimed 4 idle GPUs ", "regarding": regarding,
                  "series": {"count": 2, "lastObservedTime": _stamp(timedelta(minutes=5))}})
    store.create({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "train-1.b", "namespace": NS},
                  "eventTime": None, "reason": "Started", "type": "Normal", "note": "old", "regarding": regarding,
                  "deprecatedSource": {"component": "kueue", "host": "node-1"}, "deprecatedCount": 4,
                  "deprecatedFirstTimestamp": _stamp(timedelta(hours=1)),
                  "deprecatedLastTimestamp": _stamp(timedelta(minutes=30))})


@pytest.fixture
def seeded(cluster: Cluster) -> Cluster:
    _seed(cluster)
    return cluster


def _get(cluster: Cluster, path: str, accept: str | None = TABLE, **params: str) -> httpx.Response:
    headers = {"Accept": accept} if accept is not None else {}
    with httpx.Client(base_url=cluster.server.url) as http:
        return http.get(path, params=params, headers=headers)


def _table(cluster: Cluster, path: str, **params: str) -> dict[str, Any]:
    response = _get(cluster, path, **params)
    assert response.status_code == 200, response.text
    assert response.json()["kind"] == "Table"
    table: dict[str, Any] = response.json()
    return table


# --- through the real kubectl ------------------------------------------------------------------------------------
def _kubectl_binary() -> str:
    """The kubectl ``make real-cluster`` builds (the Kubernetes version the real backend runs), not whatever is on
    PATH: Debian packages none of it, and a test that needs it fails loudly rather than skip."""
    from gpuaas.cluster.real._build import cache_dir

    binary = cache_dir() / "bin" / "kubectl"
    assert binary.is_file(), f"{binary} missing: run 'make real-cluster' (make test does) to build kubectl"
    return str(binary)


def _kubectl(cluster: Cluster, tmp_path: Path, *args: str) -> list[list[str]]:
    """kubectl's output, each line cut into its columns (two spaces or more apart; an empty cell vanishes)."""
    kubeconfig = cluster.server.write_kubeconfig(tmp_path / "kubeconfig")
    out = subprocess.run([_kubectl_binary(), "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "cache"), *args],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return [re.split(r"\s{2,}", line.strip()) for line in out.splitlines()]


@pytest.mark.parametrize(("args", "want"), [
    (["get", "clusterqueues"], [["NAME", "COHORT", "PENDING WORKLOADS"], ["team-a-cq", "gpu-pool", "2"]]),
    (["get", "cq", "-o", "wide"], [["NAME", "COHORT", "STRATEGY", "PENDING WORKLOADS", "ADMITTED WORKLOADS"],
                                   ["team-a-cq", "gpu-pool", "BestEffortFIFO", "2", "1"]]),
    (["get", "workloads", "-A"], [["NAMESPACE", "NAME", "QUEUE", "RESERVED IN", "ADMITTED", "FINISHED", "AGE"],
                                  [NS, "train-1", "team-a-queue", "team-a-cq", "True", "0s"],
                                  [NS, "train-2", "team-a-queue", "0s"]]),
    (["get", "resourceflavors"], [["NAME", "AGE"], ["a100", "0s"]]),
    (["get", "events", "-n", NS], [["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
                                   ["5m", "Warning", "Reclaimed", "workload/train-1", "reclaimed 4 idle GPUs"],
                                   ["30m", "Normal", "Started", "workload/train-1", "old"]]),
    (["get", "events", "-n", NS, "-o", "wide"],
     [["LAST SEEN", "TYPE", "REASON", "OBJECT", "SUBOBJECT", "SOURCE", "MESSAGE", "FIRST SEEN", "COUNT", "NAME"],
      ["5m", "Warning", "Reclaimed", "workload/train-1", "gpuaas, gpuaas-0", "reclaimed 4 idle GPUs", "61m", "2",
       "train-1.a"],
      ["30m", "Normal", "Started", "workload/train-1", "kueue, node-1", "old", "60m", "4", "train-1.b"]]),
    (["get", "events.events.k8s.io", "-n", NS], [["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
                                                 ["5m", "Warning", "Reclaimed", "workload/train-1",
                                                  "reclaimed 4 idle GPUs"],
                                                 ["30m", "Normal", "Started", "workload/train-1", "old"]]),
], ids=["clusterqueues", "clusterqueues-wide", "workloads", "resourceflavors", "events", "events-wide",
        "events.k8s.io"])
def test_kubectl_prints_the_columns_a_real_cluster_prints(seeded: Cluster, tmp_path: Path, args: list[str],
                                                          want: list[list[str]]) -> None:
    assert _kubectl(seeded, tmp_path, *args) == want


# --- the Table ---------------------------------------------------------------------------------------------------
def test_a_list_is_a_table_of_the_crds_columns_with_each_objects_metadata(seeded: Cluster) -> None:
    table = _table(seeded, CQS)
    assert table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"] == {"resourceVersion": seeded.store.resource_version}
    assert [(c["name"], c["type"], c["format"], c["priority"]) for c in table["columnDefinitions"]] == [
        ("Name", "string", "name", 0), ("Cohort", "string", "", 0), ("Strategy", "string", "", 1),
        ("Pending Workloads", "integer", "", 0), ("Admitted Workloads", "integer", "", 1)]
    assert table["columnDefinitions"][1]["description"] == "Cohort that this ClusterQueue belongs to"
    [row] = table["rows"]
    assert row == {"cells": ["team-a-cq", "gpu-pool", "BestEffortFIFO", 2, 1], "object": {
        "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
        "metadata": seeded.store.get("ClusterQueue", None, "team-a-cq")["metadata"]}}


def test_a_get_is_a_one_row_table_with_the_objects_resource_version(seeded: Cluster) -> None:
    table = _table(seeded, f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads/train-1", includeObject="None")
    version = seeded.store.get("Workload", NS, "train-1")["metadata"]["resourceVersion"]
    assert table["metadata"] == {"resourceVersion": version}
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Queue", "Reserved in", "Admitted", "Finished",
                                                               "Age"]
    assert table["rows"] == [{"cells": ["train-1", "team-a-queue", "team-a-cq", "True", None, "0s"], "object": None}]


def test_v1beta1_prints_from_its_fields_and_include_object_gives_the_object_in_it(seeded: Cluster) -> None:
    table = _table(seeded, "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/team-a-cq", includeObject="Object")
    [row] = table["rows"]
    assert row["cells"][:2] == ["team-a-cq", "gpu-pool"]
    assert row["object"]["apiVersion"] == "kueue.x-k8s.io/v1beta1" and row["object"]["spec"]["cohort"] == "gpu-pool"


def test_a_paged_list_carries_continue_and_the_next_page_is_a_table_too(seeded: Cluster) -> None:
    path = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads"
    first = _table(seeded, path, limit="1")
    assert first["metadata"]["remainingItemCount"] == 1 and [r["cells"][0] for r in first["rows"]] == ["train-1"]
    second = _table(seeded, path, limit="1", **{"continue": first["metadata"]["continue"]})
    assert [r["cells"][0] for r in second["rows"]] == ["train-2"] and "continue" not in second["metadata"]


def test_an_unknown_include_object_is_upstreams_400_before_the_object_is_read(seeded: Cluster) -> None:
    for path in (CQS, f"{CQS}/no-such-queue"):
        response = _get(seeded, path, includeObject="All")
        assert response.status_code == 400 and response.json()["reason"] == "BadRequest"
        assert response.json()["message"] == ("Unable to convert to Table as requested: includeObject: Invalid value: "
                                              "\"All\": must be 'Metadata', 'Object', 'None', or empty")
    assert _get(seeded, CQS, accept="application/json", includeObject="All").json()["kind"] == "ClusterQueueList"


@pytest.mark.parametrize(("accept", "want"), [
    (None, "ClusterQueueList"),
    ("application/json", "ClusterQueueList"),
    ("application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json", "meta.k8s.io/v1beta1"),
    ("application/json;as=Table;v=v2;g=meta.k8s.io,application/json", "ClusterQueueList"),
    ("application/json;as=Table;v=v1;g=example.com,application/json;as=Table;v=v1;g=meta.k8s.io", "meta.k8s.io/v1"),
    ("application/json;as=Table;v=v1;g=meta.k8s.io;q=0.5,application/json", "ClusterQueueList"),
    ("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1;g=meta.k8s.io",
     "meta.k8s.io/v1"),
    ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json", "PartialObjectMetadataList"),
    ("*/*;as=Table;v=v1;g=meta.k8s.io", "meta.k8s.io/v1"),
], ids=["no-accept", "json", "table-v1beta1", "table-v2-passed-over", "other-group-passed-over", "json-ranked-first",
        "protobuf-passed-over", "metadata-list", "any-type"])
def test_the_accept_header_chooses_as_upstream_negotiates(seeded: Cluster, accept: str | None, want: str) -> None:
    body = _get(seeded, CQS, accept=accept).json()
    assert (body["apiVersion"] if body["kind"] == "Table" else body["kind"]) == want
    if body["kind"] == "Table":
        assert body["rows"][0]["object"]["apiVersion"] == want


def test_events_print_alike_at_both_paths_from_their_core_form(seeded: Cluster) -> None:
    core = _table(seeded, f"/api/v1/namespaces/{NS}/events")
    assert [c["name"] for c in core["columnDefinitions"] if c["priority"] == 0] == [
        "Last Seen", "Type", "Reason", "Object", "Message"]
    assert [r["cells"] for r in core["rows"]] == [
        ["5m", "Warning", "Reclaimed", "workload/train-1", "", "gpuaas, gpuaas-0", "reclaimed 4 idle GPUs", "61m", 2,
         "train-1.a"],
        ["30m", "Normal", "Started", "workload/train-1", "", "kueue, node-1", "old", "60m", 4, "train-1.b"]]
    one = _table(seeded, f"/apis/events.k8s.io/v1/namespaces/{NS}/events/train-1.a", includeObject="Object")
    assert one["rows"][0]["cells"] == core["rows"][0]["cells"]
    assert one["rows"][0]["object"]["apiVersion"] == "events.k8s.io/v1"
    got = _table(seeded, f"/api/v1/namespaces/{NS}/events/train-1.b", includeObject="Object")
    assert got["rows"][0]["object"]["apiVersion"] == "v1" and got["rows"][0]["cells"][0] == "30m"


BUILT_IN: list[tuple[str, dict[str, Any], list[Any]]] = [
    ("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1", "labels": {
        "node-role.kubernetes.io/gpu": "", "kubernetes.io/role": "worker", "node-role.kubernetes.io/a": "x"}},
        "spec": {"unschedulable": True},
        "status": {"conditions": [{"type": "Ready", "status": "False"}], "nodeInfo": {"kubeletVersion": "v1.35.4"},
                   "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}},
     ["gpu-1", "NotReady,SchedulingDisabled", "a,gpu,worker", "0s", "v1.35.4", "10.0.0.1", "<none>", "<unknown>",
      "<unknown>", "<unknown>"]),
    ("/apis/apps/v1/namespaces/team-a/deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "dep", "namespace": NS},
        "spec": {"selector": {"matchLabels": {"tier": "web", "app": "dep"}, "matchExpressions": [
            {"key": "env", "operator": "In", "values": ["prod", "dev"]}, {"key": "gone", "operator": "DoesNotExist"}]},
            "template": {"spec": {"containers": [{"name": "a", "image": "busybox"}, {"name": "b", "image": "nginx"}]}}},
        "status": {"readyReplicas": 1, "updatedReplicas": 1}},
     ["dep", "1/1", 1, 0, "0s", "a,b", "busybox,nginx", "app=dep,env in (dev,prod),!gone,tier=web"]),
    ("/apis/apps/v1/namespaces/team-a/statefulsets", {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "sts", "namespace": NS},
        "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "a", "image": "busybox"}]}}}},
     ["sts", "0/2", "0s", "a", "busybox"]),
    ("/apis/batch/v1/namespaces/team-a/jobs", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "job", "namespace": NS},
        "spec": {"parallelism": 3, "template": {"spec": {"containers": [{"name": "a", "image": "busybox"}]}}},
        "status": {"startTime": _stamp(timedelta(minutes=7)), "succeeded": 1,
                   "conditions": [{"type": "Suspended", "status": "True"}]}},
     ["job", "Suspended", "1/1 of 3", "7m", "0s", "a", "busybox", "<none>"]),
    ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns-1"}},
     ["ns-1", "Active", "0s"]),
    ("/api/v1/namespaces/team-a/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": NS},
                                        "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
     ["p", "0s"]),
]


@pytest.mark.parametrize(("path", "obj", "cells"), BUILT_IN, ids=[o["kind"] for _, o, _ in BUILT_IN])
def test_a_built_in_kind_prints_upstreams_cells(cluster: Cluster, path: str, obj: dict[str, Any],
                                                cells: list[Any]) -> None:
    cluster.store.create(obj)
    assert _table(cluster, path)["rows"][0]["cells"] == cells


# --- the pure parts ----------------------------------------------------------------------------------------------
def test_the_kueue_columns_are_the_real_crds() -> None:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crds = [yaml.load(p.read_text(), Loader=loader) for p in sorted(KUEUE_CRDS.glob("kueue.x-k8s.io_*.yaml"))]
    assert len(crds) == 6, f"the Kueue CRDs are missing: expected them in {KUEUE_CRDS.resolve()}"
    for crd in crds:
        kind = crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            declared = [PrinterColumn(c["name"], c["type"], c["jsonPath"], c.get("description", ""),
                                      c.get("priority", 0), c.get("format", ""))
                        for c in version.get("additionalPrinterColumns") or []]
            assert list(CRD_COLUMNS.get((kind, version["name"]), ())) == declared, (kind, version["name"])


CONDITIONS = {"status": {"conditions": [{"type": "QuotaReserved", "status": "True"},
                                        {"type": "Admitted", "status": "False"}],
                         "traffic": [{"tag": "prev", "latestRevision": 1}, {"latestRevision": True, "percent": 90}]}}


@pytest.mark.parametrize(("path", "want"), [
    (".status.conditions[?(@.type=='Admitted')].status", ["False"]),
    ('.status.conditions[?(@.type=="QuotaReserved")].status', ["True"]),
    (".status.conditions[?(@.type=='Finished')].status", []),
    (".status.conditions[-1:].type", ["Admitted"]),
    (".status.conditions[0].type", ["QuotaReserved"]),
    (".status.traffic[?(@.latestRevision==true)].percent", [90]),
    (".status.missing.deeper", []),
    (".status.conditions.type", []),
], ids=["filter", "filter-double-quotes", "filter-none", "slice", "index", "filter-bool", "missing", "field-of-list"])
def test_the_column_jsonpath_finds_what_upstreams_finds(path: str, want: list[Any]) -> None:
    assert _find(path, CONDITIONS) == want


@pytest.mark.parametrize(("value", "text"), [
    ("x", "x"), (True, "true"), (3, "3"), (1e6, "1e+06"), (123456.0, "123456"), (0.5, "0.5"), (1e-05, "1e-05"),
    (0.0001, "0.0001"), (-2.5e-7, "-2.5e-07"), (None, "<no value>"),
    ({"b": 1, "a": "<&>"}, '{"a":"\\u003c\\u0026\\u003e","b":1}'),
], ids=["str", "bool", "int", "float-exp", "float-plain", "half", "small-exp", "small-plain", "negative", "null",
        "map"])
def test_a_string_column_prints_a_value_as_go_does(value: Any, text: str) -> None:
    assert _text(value) == text


@pytest.mark.parametrize(("typ", "value", "cell"), [
    ("integer", 2.7, 2), ("integer", "2", None), ("number", 2, 2.0), ("boolean", "true", None),
    ("boolean", False, False),
    ("integer", True, None), ("date", "", "<unknown>"), ("date", "yesterday", "<invalid>"), ("date", 5, None),
    ("date", _stamp(timedelta(hours=50)), "2d2h"),
], ids=["int-of-float", "int-of-str", "number", "bool-of-str", "bool", "int-of-bool", "date-empty", "date-invalid",
        "date-of-int", "date"])
def test_a_cell_is_the_value_as_its_columns_type(typ: str, value: Any, cell: Any) -> None:
    assert _cell(PrinterColumn("c", typ, ".v"), {"v": value}, FIXED_NOW) == cell


@pytest.mark.parametrize(("seconds", "text"), [
    (-2, "<invalid>"), (-1, "0s"), (0, "0s"), (119, "119s"), (120, "2m"), (125, "2m5s"), (600, "10m"),
    (179 * 60 + 59, "179m"), (3 * 3600, "3h"), (3 * 3600 + 15 * 60, "3h15m"), (8 * 3600, "8h"), (47 * 3600, "47h"),
    (48 * 3600, "2d"), (50 * 3600, "2d2h"), (8 * 86400, "8d"), (730 * 86400, "2y"), (731 * 86400, "2y1d"),
    (8 * 365 * 86400, "8y"),
], ids=lambda v: str(v))
def test_human_duration_is_upstreams(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text
