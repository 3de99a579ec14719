"""The emulator's own compact Kueue validation, checked against the real CRD schemas.

The product does not ship Kueue's CRDs; these tests read them from the shared upstream
fixtures and prove two things:

(a) every Kueue object the emulator serves (created through HTTP, after status updates, read
    through v1beta2 and v1beta1, plus every sample from Kueue's docs) validates against the
    real CRD schema of that version;
(b) objects the CRD schema rejects are also rejected by the emulator, with a 422 whose
    causes name the same field.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from gpuaas.cluster.apiserver import RESOURCES, ApiError, ObjectStore

from .conftest import (
    KUEUE,
    Cluster,
    admitted_status,
    cluster_queue,
    local_queue,
    usage_status,
    workload,
)

KUEUE_FIXTURES = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "kueue"
Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
Validators = dict[tuple[str, str], jsonschema.protocols.Validator]


def _structural(node: Any) -> Any:
    """An OpenAPI v3 CRD schema as JSON Schema: drop ``x-kubernetes-*``, honour ``nullable``."""
    if isinstance(node, list):
        return [_structural(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _structural(v) for k, v in node.items() if not k.startswith("x-kubernetes-") and k != "nullable"}
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


@pytest.fixture(scope="module")
def crd_validators() -> Validators:
    """(kind, version) -> a validator for the real CRD schema of that version."""
    crd_dir = KUEUE_FIXTURES / "crds"
    if not crd_dir.is_dir():
        pytest.fail(f"the Kueue CRDs are missing: expected them in {crd_dir.resolve()}")
    validators: Validators = {}
    for path in sorted(crd_dir.glob("kueue.x-k8s.io_*.yaml")):
        crd = yaml.load(path.read_text(), Loader=Loader)
        for version in crd["spec"]["versions"]:
            schema = _structural(version["schema"]["openAPIV3Schema"])
            validators[(crd["spec"]["names"]["kind"], version["name"])] = jsonschema.Draft7Validator(schema)
    assert {kind for kind, _ in validators} >= {"ClusterQueue", "LocalQueue", "Workload", "Cohort",
                                                "ResourceFlavor", "WorkloadPriorityClass"}
    return validators


def _field(error: jsonschema.ValidationError) -> str:
    path = ""
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    if error.validator == "required" and (m := re.match(r"'([^']+)' is a required property", error.message)):
        path = f"{path}.{m[1]}" if path else m[1]
    return path


def crd_errors(validators: Validators, obj: dict[str, Any]) -> set[str]:
    version = obj["apiVersion"].rpartition("/")[2]
    return {_field(e) for e in validators[(obj["kind"], version)].iter_errors(obj)}


# --- (a) what the emulator serves is valid --------------------------------------------------
def _seed(c: Cluster) -> None:
    """A representative Kueue setup, written through HTTP like a user or Kueue would."""
    create = c.custom.create_cluster_custom_object
    create(KUEUE, "v1beta2", "resourceflavors", {
        "apiVersion": f"{KUEUE}/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "a100"},
        "spec": {"nodeLabels": {"gpu": "a100"}, "nodeTaints": [{"key": "gpu", "value": "a100", "effect": "NoSchedule"}],
                 "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]}})
    create(KUEUE, "v1beta2", "workloadpriorityclasses", {
        "apiVersion": f"{KUEUE}/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "high"},
        "value": 1000, "description": "production training"})
    create(KUEUE, "v1beta2", "cohorts", {
        "apiVersion": f"{KUEUE}/v1beta2", "kind": "Cohort", "metadata": {"name": "gpu-pool"},
        "spec": {"parentName": "org", "fairSharing": {"weight": "2"}}})
    create(KUEUE, "v1beta2", "clusterqueues", cluster_queue("team-a-cq"))
    borrowing = cluster_queue("team-b-cq", gpus="16")
    borrowing["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1] |= {"borrowingLimit": 8, "lendingLimit": "4"}
    create(KUEUE, "v1beta2", "clusterqueues", borrowing)
    solo = cluster_queue("solo-cq", cohort=None)
    create(KUEUE, "v1beta1", "clusterqueues", {**solo, "apiVersion": f"{KUEUE}/v1beta1"})
    for ns, cq in (("team-a", "team-a-cq"), ("team-b", "team-b-cq")):
        c.custom.create_namespaced_custom_object(KUEUE, "v1beta2", ns, "localqueues", local_queue(f"{ns}-queue", ns, cq))
        c.custom.create_namespaced_custom_object(KUEUE, "v1beta2", ns, "workloads",
                                                 workload("train-1", ns, queue=f"{ns}-queue", priority_class="high"))
        c.custom.create_namespaced_custom_object(KUEUE, "v1beta2", ns, "workloads", workload("pending-1", ns, gpus=8))
        c.custom.patch_namespaced_custom_object_status(KUEUE, "v1beta2", ns, "workloads", "train-1",
                                                       {"status": admitted_status(cq)})
        c.custom.patch_namespaced_custom_object_status(KUEUE, "v1beta2", ns, "localqueues", f"{ns}-queue",
                                                       {"status": usage_status()})
        c.custom.patch_cluster_custom_object_status(KUEUE, "v1beta2", "clusterqueues", cq, {"status": usage_status()})
    c.custom.patch_cluster_custom_object_status(KUEUE, "v1beta2", "cohorts", "gpu-pool",
                                                {"status": {"fairSharing": {"weightedShare": 250}}})


def _served(c: Cluster, version: str) -> Iterator[dict[str, Any]]:
    for res in RESOURCES.values():
        if res.group == KUEUE:
            yield from c.custom.list_cluster_custom_object(KUEUE, version, res.plural)["items"]


@pytest.mark.parametrize("version", ["v1beta2", "v1beta1"])
def test_every_served_object_validates_against_the_crd(cluster: Cluster, crd_validators: Validators,
                                                       version: str) -> None:
    _seed(cluster)
    served = list(_served(cluster, version))
    assert len(served) == 12
    assert any("status" in o and o["kind"] == "Workload" for o in served)
    for obj in served:
        assert obj["apiVersion"] == f"{KUEUE}/{version}"
        assert crd_errors(crd_validators, obj) == set(), f"{obj['kind']} {obj['metadata']['name']}"


def _doc_samples() -> list[dict[str, Any]]:
    docs = []
    for path in sorted((KUEUE_FIXTURES / "docs-extracted").glob("*.yaml")):
        for doc in yaml.load_all(path.read_text(), Loader=Loader):
            if isinstance(doc, dict) and doc.get("apiVersion", "").startswith(f"{KUEUE}/") and doc["kind"] in RESOURCES:
                docs.append(doc)
    return docs


def test_kueue_doc_samples_are_accepted_and_served_valid(crd_validators: Validators) -> None:
    samples = _doc_samples()
    assert len(samples) >= 10, "the Kueue doc samples are missing from the shared fixtures"
    store, stored = ObjectStore(), 0
    for sample in map(copy.deepcopy, samples):
        if RESOURCES[sample["kind"]].namespaced:
            sample["metadata"].setdefault("namespace", "default")
        try:
            created = store.create(sample)
        except ApiError as exc:  # the same name in two samples is fine; a rejection is not
            assert exc.reason == "AlreadyExists", f"{sample['kind']} {sample['metadata']['name']}: {exc}"
            continue
        stored += 1
        assert crd_errors(crd_validators, created) == set(), f"{sample['kind']} {sample['metadata']['name']}"
    assert stored >= 8


# --- (b) what the CRD rejects, the emulator rejects ------------------------------------------
def _cq(mutate: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    obj = cluster_queue("bad-cq")
    mutate(obj["spec"])
    return obj


def _wl(mutate: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    obj = workload("bad-wl")
    mutate(obj["spec"])
    return obj


_RG = "spec.resourceGroups[0]"
INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("quota-not-a-quantity", _cq(lambda s: s["resourceGroups"][0]["flavors"][0]["resources"][1].update(nominalQuota="lots")),
     f"{_RG}.flavors[0].resources[1].nominalQuota"),
    ("too-many-resource-groups", _cq(lambda s: s.update(resourceGroups=s["resourceGroups"] * 17)), "spec.resourceGroups"),
    ("cohort-not-dns", _cq(lambda s: s.update(cohortName="Team_A")), "spec.cohortName"),
    ("queueing-strategy-enum", _cq(lambda s: s.update(queueingStrategy="Random")), "spec.queueingStrategy"),
    ("flavor-without-resources", _cq(lambda s: s["resourceGroups"][0]["flavors"][0].pop("resources")),
     f"{_RG}.flavors[0].resources"),
    ("no-covered-resources", _cq(lambda s: s["resourceGroups"][0].update(coveredResources=[])), f"{_RG}.coveredResources"),
    ("preemption-enum", _cq(lambda s: s["preemption"].update(reclaimWithinCohort="Always")),
     "spec.preemption.reclaimWithinCohort"),
    ("no-podsets", _wl(lambda s: s.update(podSets=[])), "spec.podSets"),
    ("negative-count", _wl(lambda s: s["podSets"][0].update(count=-1)), "spec.podSets[0].count"),
    ("active-not-bool", _wl(lambda s: s.update(active="yes")), "spec.active"),
    ("podset-name-not-label", _wl(lambda s: s["podSets"][0].update(name="Main_Set")), "spec.podSets[0].name"),
    ("priority-ref-kind", _wl(lambda s: s.update(priorityClassRef={"group": KUEUE, "kind": "Foo", "name": "x"})),
     "spec.priorityClassRef.kind"),
    ("lq-cluster-queue-not-dns", {**local_queue("q", "team-a", "Bad Queue")}, "spec.clusterQueue"),
    ("wpc-without-value", {"apiVersion": f"{KUEUE}/v1beta2", "kind": "WorkloadPriorityClass",
                           "metadata": {"name": "no-value"}}, "value"),
    ("flavor-too-many-taints", {"apiVersion": f"{KUEUE}/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"},
                                "spec": {"nodeTaints": [{"key": f"k{i}", "effect": "NoSchedule"} for i in range(9)]}},
     "spec.nodeTaints"),
]


@pytest.mark.parametrize(("obj", "field"), [(o, f) for _, o, f in INVALID], ids=[i for i, _, _ in INVALID])
def test_crd_invalid_objects_are_rejected_with_the_field_named(cluster: Cluster, crd_validators: Validators,
                                                               obj: dict[str, Any], field: str) -> None:
    assert field in crd_errors(crd_validators, obj), "the real CRD schema should reject this object"
    res = RESOURCES[obj["kind"]]
    with pytest.raises(ApiException) as exc:
        if res.namespaced:
            cluster.custom.create_namespaced_custom_object(KUEUE, "v1beta2", obj["metadata"]["namespace"], res.plural, obj)
        else:
            cluster.custom.create_cluster_custom_object(KUEUE, "v1beta2", res.plural, obj)
    body = json.loads(exc.value.body or "{}")
    assert exc.value.status == 422 and body["reason"] == "Invalid"
    assert field in {c["field"] for c in body["details"]["causes"]}
    assert field in body["message"]


def test_invalid_status_update_is_rejected_like_the_crd(cluster: Cluster, crd_validators: Validators) -> None:
    cluster.store.create(workload("wl"))
    status = admitted_status("team-a-cq")
    status["conditions"][0]["status"] = "Maybe"
    obj = {**cluster.store.get("Workload", "team-a", "wl"), "status": status}
    assert "status.conditions[0].status" in crd_errors(crd_validators, obj)
    with pytest.raises(ApiException) as exc:
        cluster.custom.patch_namespaced_custom_object_status(KUEUE, "v1beta2", "team-a", "workloads", "wl",
                                                             {"status": status})
    assert exc.value.status == 422
    assert "status.conditions[0].status" in {c["field"] for c in json.loads(exc.value.body or "{}")["details"]["causes"]}
    assert "status" not in cluster.store.get("Workload", "team-a", "wl")
