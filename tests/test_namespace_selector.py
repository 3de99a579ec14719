"""A ClusterQueue's ``namespaceSelector``: what Kueue never admits is said, and is never demand or a plannable deadline.

The set-up, through the real reader (the official client over HTTP against the embedded API server): cohort ``c``
with ClusterQueue ``sel-cq`` (8 GPUs, ``namespaceSelector: {matchLabels: {team: a}}``) and ``open-cq`` (8 GPUs,
``{}``); namespaces ``team-a`` (labelled ``team: a``) and ``team-x`` (not); a LocalQueue ``lq`` in each pointing at
``sel-cq``, each with a pending Workload of 6 GPUs, team-x's due in 3 hours; and ClusterQueue ``closed-cq`` (no
``namespaceSelector`` at all, which Kueue reads as no namespace) with LocalQueue ``team-a/closed`` and a pending
Workload of 2 GPUs. Kueue counts all three pending; only ``team-a/wl-a`` can ever be admitted.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuaas.cluster.apiserver import ApiServer, ObjectStore
from gpuaas.cluster.kueue import KueueController
from gpuaas.errors import MalformedResponse
from gpuaas.models import LabelSelector, Snapshot, SourceStatus
from gpuaas.operations import collect as collect_op
from gpuaas.operations.deadlines import pool_plans
from gpuaas.operations.rebalance import plan as rebalance_plan
from gpuaas.policy import Policy
from gpuaas.preflight_checks import Verdict
from gpuaas.preflight_gaps import gap_check, kube_gaps
from gpuaas.settings import GpuaasSettings
from gpuaas.snapshot import build_snapshot
from gpuaas.sources.kube import KubeState, read_kube
from reports.deadlines import pool_dicts, pool_rows

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
KUEUE = "kueue.x-k8s.io/v1beta2"
UNSELECTED = ("team-x/lq points at ClusterQueue sel-cq, whose namespaceSelector does not select namespace team-x: "
              "1 Workload (6 GPUs, 1 with a deadline) can never be admitted")
CLOSED = ("team-a/closed points at ClusterQueue closed-cq, which has no namespaceSelector, so Kueue admits "
          "Workloads from no namespace: 1 Workload (2 GPUs) can never be admitted")


def _queue(name: str, selector: dict[str, Any] | None, quota: int = 8) -> dict[str, Any]:
    spec: dict[str, Any] = {"cohortName": "c", "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
        {"name": "f", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": quota}]}]}]}
    if selector is not None:
        spec["namespaceSelector"] = selector
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def _namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name, **labels}}}


def _local(namespace: str, name: str, cluster_queue: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue}}


def _workload(namespace: str, name: str, queue: str, gpus: int, **annotations: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "Workload",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
            "spec": {"queueName": queue, "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]}}}]}}


def objects() -> list[dict[str, Any]]:
    due = (NOW + timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return [
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "f"}, "spec": {}},
        _namespace("team-a", team="a"), _namespace("team-x"),
        _queue("sel-cq", {"matchLabels": {"team": "a"}}), _queue("open-cq", {}), _queue("closed-cq", None, 2),
        _local("team-a", "lq", "sel-cq"), _local("team-x", "lq", "sel-cq"), _local("team-a", "closed", "closed-cq"),
        _workload("team-a", "wl-a", "lq", 6),
        _workload("team-x", "wl-x", "lq", 6, **{"gpuaas.io/deadline": due, "gpuaas.io/expected-runtime": "1h"}),
        _workload("team-a", "wl-closed", "closed", 2),
    ]


def _store() -> ObjectStore:
    store = ObjectStore(lambda: NOW)
    for obj in objects():
        store.create(obj)
    return store


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> KubeState:
    with ApiServer(_store()) as api:
        return read_kube(GpuaasSettings(kubeconfig=api.write_kubeconfig(tmp_path_factory.mktemp("ns") / "kubeconfig")))


def snapshot_of(kube: KubeState) -> Snapshot:
    return build_snapshot(NOW, [30], {"kube": SourceStatus("kube", True)}, kube=kube, prom=None)


def _labels() -> st.SearchStrategy[dict[str, str]]:
    return st.dictionaries(st.sampled_from(["team", "env", "tier"]), st.sampled_from(["a", "b"]), max_size=3)


@st.composite
def _selectors(draw: st.DrawFn) -> dict[str, Any]:
    keys, values = st.sampled_from(["team", "env", "tier"]), st.lists(st.sampled_from(["a", "b"]), max_size=2)
    exprs = draw(st.lists(st.fixed_dictionaries({
        "key": keys, "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]), "values": values}),
        max_size=3))
    return {"matchLabels": draw(_labels()), "matchExpressions": exprs}


def _brute_force(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """apimachinery's ``labels.Requirement.Matches``, written out per operator."""
    for key, value in selector["matchLabels"].items():
        if labels.get(key) != value:
            return False
    for e in selector["matchExpressions"]:
        present = e["key"] in labels
        if e["operator"] == "In" and not (present and labels[e["key"]] in e["values"]):
            return False
        if e["operator"] == "NotIn" and present and labels[e["key"]] in e["values"]:
            return False
        if e["operator"] == "Exists" and not present:
            return False
        if e["operator"] == "DoesNotExist" and present:
            return False
    return True


@given(_selectors(), _labels())
def test_a_selector_selects_as_kubernetes_matches_labels(selector: dict[str, Any], labels: dict[str, str]) -> None:
    assert LabelSelector.parse(selector).selects(labels) is _brute_force(selector, labels)


def test_null_selects_no_namespace_and_empty_every_one() -> None:
    assert not LabelSelector.parse(None).selects({"kubernetes.io/metadata.name": "team-a"})
    assert LabelSelector.parse({}).selects({}) and LabelSelector.parse({"matchLabels": {}}).selects({"a": "b"})
    assert LabelSelector.parse({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["a"]}]}).selects({})


def test_a_selector_that_is_not_one_fails_the_read_naming_the_queue(tmp_path: Path) -> None:
    store = ObjectStore(lambda: NOW)
    store.create(_queue("bad-cq", {"matchExpressions": [{"key": "team", "operator": "Near"}]}))
    with ApiServer(store) as api, pytest.raises(MalformedResponse) as failed:
        read_kube(GpuaasSettings(kubeconfig=api.write_kubeconfig(tmp_path / "kubeconfig")))
    assert "ClusterQueue bad-cq: namespaceSelector: not a label selector requirement" in str(failed.value)


def test_the_snapshot_names_the_local_queues_kueue_never_admits_from(kube: KubeState) -> None:
    snap = snapshot_of(kube)
    rows = {(r.kind, r.namespace, r.name): (r.value, r.problem) for r in snap.data_quality.itertuples()}
    assert rows == {
        ("LocalQueue", "team-x", "lq"): ("sel-cq", "is in a namespace its ClusterQueue's namespaceSelector does not "
                                                   "select"),
        ("LocalQueue", "team-a", "closed"): ("closed-cq", "points at a ClusterQueue without a namespaceSelector, "
                                                          "which selects no namespace")}
    back = Snapshot.from_json(snap.to_json())  # a stored snapshot keeps them
    assert collect_op.plan(back, Policy(), full_due=False).summary["notes"] == [UNSELECTED, CLOSED]
    assert gap_check(kube_gaps(kube, NOW)).verdict is Verdict.warning


def test_their_work_is_not_backlog(kube: KubeState) -> None:
    queues = snapshot_of(kube).queues.set_index("name")
    assert queues.loc["sel-cq", "pending_gpus"] == 6.0 and queues.loc["sel-cq", "pending_workloads"] == 1
    assert queues.loc["closed-cq", "pending_gpus"] == 0.0


def test_the_rebalance_ignores_what_kueue_counts_pending_from_unselected_namespaces(kube: KubeState) -> None:
    """Kueue's pending metric holds team-x's 6 GPUs all window long; the demand is team-a's 6 alone."""
    history = pd.DataFrame([
        {"cluster_queue": "sel-cq", "flavor": "", "stat": "pending_median", "value": 12.0},
        {"cluster_queue": "sel-cq", "flavor": "", "stat": "pending_max", "value": 12.0},
        *({"cluster_queue": q, "flavor": "f", "stat": s, "value": v}
          for q in ("sel-cq", "open-cq") for s, v in (("usage_p", 0.0), ("reservation_p", 0.0),
                                                        ("history_seconds", 14 * 86400.0))),
    ])
    plan = rebalance_plan(snapshot_of(kube), history, Policy())
    [cohort] = [c for c in plan.cohorts if c.cohort == "c"]
    sel = next(q for q in cohort.demand.queues if q.name == "sel-cq")
    assert sel.demand["f"] == 6.0
    assert "6 pending GPUs from namespaces its namespaceSelector does not select, ignored" in sel.evidence["f"]


def test_their_deadlines_are_missed_not_planned(kube: KubeState) -> None:
    pools = pool_dicts(pool_plans(snapshot_of(kube)))
    [pool] = [p for p in pools if "team-x/wl-x" in p["missed"]]
    assert UNSELECTED in pool["notes"]
    assert [u["no_place"] for u in pool["unscheduled"] if u["name"] == "team-x/wl-x"] == [
        "its ClusterQueue does not admit from its namespace"]
    assert ["team-x/wl-x", "missed: its ClusterQueue does not admit from its namespace"] == [
        [row[1], row[-1]] for row in pool_rows(pool, {}) if row[1] == "team-x/wl-x"][0]


def test_a_role_that_may_not_list_namespaces_leaves_the_selectors_unchecked_and_says_so(kube: KubeState) -> None:
    from dataclasses import replace

    snap = snapshot_of(replace(kube, namespace_labels=None))
    notes = collect_op.plan(snap, Policy(), full_due=False).summary["notes"]
    assert CLOSED in notes  # a null selector needs no labels
    assert not any("team-x/lq" in n for n in notes)
    assert ("Namespaces could not be listed: the ClusterQueues' namespaceSelectors are not checked (grant the gpuaas "
            "role list on namespaces)") in notes


def test_the_embedded_kueue_admits_only_from_selected_namespaces() -> None:
    store = _store()
    KueueController(store, lambda: NOW).reconcile()
    state = {o["metadata"]["name"]: o for o in store.list("Workload")}

    def reserved(name: str) -> tuple[str, str]:
        cond = next(c for c in state[name]["status"]["conditions"] if c["type"] == "QuotaReserved")
        return cond["status"], cond.get("message", "")

    assert reserved("wl-a")[0] == "True"
    assert reserved("wl-x") == ("False", "Workload namespace doesn't match ClusterQueue selector")
    assert reserved("wl-closed") == ("False", "Workload namespace doesn't match ClusterQueue selector")
