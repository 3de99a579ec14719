"""What an audit row is about: the owner a reclaim stopped through a Workload, found up the ``refers_to`` chain."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuaas.audit_subject import REFERENT_DEPTH, owner_named, owners, subject


@dataclass(frozen=True)
class Row:
    id: int
    kind: str = "Workload"
    namespace: str | None = "team-a"
    name: str = "raycluster-ray-9cefe"
    evidence: Any = field(default_factory=dict)
    refers_to: int | None = None


def test_the_owner_comes_from_the_row_or_up_its_chain_about_the_same_object() -> None:
    decision = Row(1, evidence={"owner": "RayCluster ray", "window_minutes": 30})
    apply = Row(2, refers_to=1)
    restore = Row(3, refers_to=2)
    done = Row(4, refers_to=3)
    other = Row(5, name="another", refers_to=1)  # refers to the decision, about another object: not its owner
    by_id = {r.id: r for r in (decision, apply, restore, done, other)}
    asked: list[int] = []

    def lookup(i: int) -> Row | None:
        asked.append(i)
        return by_id.get(i)

    # only the newest row in hand (a listing's --limit 1): the chain is read through the lookup
    assert owners([done], lookup) == {4: "RayCluster ray"}
    assert asked == [3, 2, 1]
    assert owners(list(by_id.values()), lambda i: None) == {i: "RayCluster ray" for i in (1, 2, 3, 4)}


def test_the_store_is_read_only_so_far_up_a_chain() -> None:
    chain = {1: Row(1, evidence={"owner": "Notebook nb"})} | {i: Row(i, refers_to=i - 1) for i in range(2, 10)}
    asked: list[int] = []

    def lookup(i: int) -> Row | None:
        asked.append(i)
        return chain.get(i)

    assert owners([chain[REFERENT_DEPTH + 1]], lookup) == {REFERENT_DEPTH + 1: "Notebook nb"}
    assert owners([chain[REFERENT_DEPTH + 2]], lookup) == {}
    assert len(asked) == 2 * REFERENT_DEPTH
    # rows in hand are followed whatever their number: each link is read once
    assert set(owners(list(chain.values()), lambda i: None)) == set(chain)


def test_an_owner_needs_a_kind_and_a_name() -> None:
    assert owner_named(Row(1, evidence={"owner": "RayCluster ray"})) == "RayCluster ray"
    for evidence in ({"owner": "ray"}, {"owner": ""}, {"owner": None}, {}, None, ["owner"]):
        assert owner_named(Row(1, evidence=evidence)) is None, evidence


def test_the_subject_names_the_owner_first() -> None:
    assert subject("Workload", "team-a", "raycluster-ray-9cefe", "RayCluster ray") == (
        "RayCluster team-a/ray (Workload raycluster-ray-9cefe)")
    assert subject("Notebook", "team-a", "nb", None) == "Notebook team-a/nb"
    assert subject("ClusterQueue", None, "team-a-cq", None) == "ClusterQueue team-a-cq"
    assert subject("ClusterQueue", "", "team-a-cq", "") == "ClusterQueue team-a-cq"
