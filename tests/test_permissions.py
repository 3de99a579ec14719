"""What gpuaas asks the API for, per flow, is what the shipped roles grant: no more, no less.

``gpuaas.permissions`` is what a preflight asks the API server about; ``deployments/kubernetes/rbac.yaml``
is what an operator applies. A rule added to one and not the other would make the preflight pass a
setup whose first write is refused, or ask for a role that grants nothing.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from gpuaas.permissions import READS, ROLES, WRITES, Access

MANIFEST = Path(__file__).resolve().parents[1] / "deployments" / "kubernetes" / "rbac.yaml"


def _granted(role: str) -> set[Access]:
    documents = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d and d.get("kind") == "ClusterRole"]
    rules = next(d["rules"] for d in documents if d["metadata"]["name"] == role)
    return {Access(verb, group, resource, name) for rule in rules for group in rule["apiGroups"]
            for resource in rule["resources"] for verb in rule["verbs"] for name in rule.get("resourceNames", [""])}


def test_the_reads_are_the_reader_role() -> None:
    assert set(READS) == _granted(ROLES["reads"]) and len(READS) == len(set(READS))


def test_each_flows_writes_are_granted_by_its_role_and_each_writer_role_by_some_flow() -> None:
    for flow, accesses in WRITES.items():
        assert set(accesses) <= _granted(ROLES[flow]), flow
    for role in {ROLES[flow] for flow in WRITES}:
        assert _granted(role) == {a for flow in WRITES if ROLES[flow] == role for a in WRITES[flow]}, role


def test_an_access_reads_as_kubectl_names_it() -> None:
    assert str(Access("patch", "ray.io", "rayclusters")) == "patch rayclusters.ray.io"
    assert str(Access("list", "", "pods")) == "list pods"
    assert str(Access("get", "", "namespaces", "kube-system")) == "get namespaces/kube-system"
