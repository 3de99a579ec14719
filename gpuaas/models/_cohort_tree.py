"""Kueue's cohort tree as a snapshot shows it: who shares quota with whom, and what a ClusterQueue can reach.

Why a model of its own: Kueue does not share quota only among the ClusterQueues of one cohort. A Cohort
object adds its own ``nominalQuota`` on top of its members' (a pool its subtree shares), and
``spec.parentName`` makes cohorts a tree whose root pools whatever its subtree lends. The most of one
flavor/resource a ClusterQueue can ever be admitted is Kueue's ``potentialAvailable``
(``pkg/cache/scheduler/resource_node.go``), computed here the same way::

    subtree(queue)  = its nominalQuota
    subtree(cohort) = its own nominalQuota + sum over its children of (subtree(child) - local(child))
    local(node)     = max(0, subtree(node) - lendingLimit) with a lendingLimit, else 0 (never lent upwards)
    reach(node)     = subtree(node) at a root, else local(node) + reach(parent),
                      capped at subtree(node) + borrowingLimit where the node has a borrowingLimit

Without limits every ClusterQueue of a tree reaches all of the tree's quota: one pool. A cohort that a
ClusterQueue or a Cohort names without a Cohort object existing is implicit: no quota and no parent, as
Kueue makes it. A cycle of parents disables the whole tree in Kueue (its ClusterQueues admit nothing);
``cycle`` says so, and nothing else here is computed for such a tree.

Pure: the snapshot's ``quotas`` and ``cohorts`` frames in.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pandas as pd

from gpuaas.models._snapshot import Snapshot

__all__ = ["CohortTree", "FlavorResource", "Quota", "inactive_queues"]

FlavorResource = tuple[str, str]
Node = tuple[bool, str]
"""``(is_cohort, name)``: a ClusterQueue and a Cohort may share a name."""


@dataclass(frozen=True)
class Quota:
    """One flavor/resource of a ClusterQueue or Cohort spec."""

    nominal: float
    borrowing_limit: float | None = None
    lending_limit: float | None = None


def _number(value: object) -> float | None:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return None
    return float(value)  # type: ignore[arg-type]


def _name(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _quota_rows(frame: pd.DataFrame, key: str) -> Iterable[tuple[str, FlavorResource, Quota]]:
    if frame.empty or key not in frame.columns:
        return
    cols = set(frame.columns)
    for row in frame.itertuples(index=False):
        flavor, resource, nominal = (getattr(row, c, None) for c in ("flavor", "resource", "nominal"))
        if _name(flavor) is None or _name(resource) is None or _number(nominal) is None:
            continue
        yield str(getattr(row, key)), (str(flavor), str(resource)), Quota(
            float(nominal),  # type: ignore[arg-type]
            _number(row.borrowing_limit) if "borrowing_limit" in cols else None,
            _number(row.lending_limit) if "lending_limit" in cols else None)


class CohortTree:
    """ClusterQueues, Cohorts (explicit and implicit), their parents and quotas; ``reach`` as Kueue computes it."""

    def __init__(self, queue_cohort: Mapping[str, str | None], cohort_parent: Mapping[str, str | None],
                 quotas: Mapping[Node, Mapping[FlavorResource, Quota]], explicit: Iterable[str] = ()) -> None:
        self.queue_cohort = dict(queue_cohort)
        parents = dict(cohort_parent)
        for name in [*self.queue_cohort.values(), *cohort_parent.values()]:
            if name is not None:
                parents.setdefault(name, None)  # implicit: no object, no quota, no parent
        self.cohort_parent = parents
        self.explicit = frozenset(explicit)
        self.quotas = {node: dict(q) for node, q in quotas.items()}
        self._children: dict[str, list[Node]] = {}
        for queue, cohort in self.queue_cohort.items():
            if cohort is not None:
                self._children.setdefault(cohort, []).append((False, queue))
        for cohort, parent in self.cohort_parent.items():
            if parent is not None:
                self._children.setdefault(parent, []).append((True, cohort))
        self._subtree: dict[tuple[Node, FlavorResource], float] = {}
        self._roots: dict[str, tuple[str, tuple[str, ...]]] = {}
        self._by_root: dict[str, tuple[list[str], list[str]]] | None = None
        self._override: dict[tuple[Node, FlavorResource], Quota] = {}
        self._base: CohortTree | None = None
        self._affected: set[Node] = set()

    @classmethod
    def of(cls, snapshot: Snapshot) -> CohortTree:
        return cls.from_frames(snapshot.quotas, snapshot.cohorts)

    @classmethod
    def from_frames(cls, quotas: pd.DataFrame, cohorts: pd.DataFrame) -> CohortTree:
        """From the snapshot's ``quotas`` (ClusterQueue cells) and ``cohorts`` (Cohort objects) frames."""
        queue_cohort: dict[str, str | None] = {}
        if not quotas.empty and "cluster_queue" in quotas.columns:
            has_cohort = "cohort" in quotas.columns
            for row in quotas.itertuples(index=False):
                queue_cohort[str(row.cluster_queue)] = _name(row.cohort) if has_cohort else None
        parents: dict[str, str | None] = {}
        if not cohorts.empty and "cohort" in cohorts.columns:
            for row in cohorts.itertuples(index=False):
                parents[str(row.cohort)] = _name(getattr(row, "parent", None))
        table: dict[Node, dict[FlavorResource, Quota]] = {}
        for is_cohort, frame, key in ((False, quotas, "cluster_queue"), (True, cohorts, "cohort")):
            for name, fr, quota in _quota_rows(frame, key):
                cell = table.setdefault((is_cohort, name), {})
                old = cell.get(fr)
                cell[fr] = quota if old is None else Quota(old.nominal + quota.nominal, old.borrowing_limit,
                                                           old.lending_limit)
        return cls(queue_cohort, parents, table, parents)

    def with_nominal(self, changes: Mapping[tuple[str, FlavorResource], float]) -> CohortTree:
        """The same tree with some ClusterQueues' nominal quota replaced (what a rebalance could set)."""
        other = copy.copy(self)  # the same tree: only some quota, and the subtrees above it, change
        other._override, other._subtree = {**self._override}, {}
        other._base, other._affected = self._base or self, set(self._affected)
        for (queue, fr), nominal in changes.items():
            old = self.quota((False, queue), fr) or Quota(0.0)
            other._override[((False, queue), fr)] = Quota(nominal, old.borrowing_limit, old.lending_limit)
            node: Node | None = (False, queue)
            while node is not None and node not in other._affected:
                other._affected.add(node)
                parent = self._parent(node)
                node = (True, parent) if parent is not None else None
        return other

    # --- the tree ----------------------------------------------------------------------------------------
    def root(self, cohort: str) -> tuple[str, tuple[str, ...]]:
        """(the root cohort, ()) or, where parents loop, (the loop's first name, the loop in parent order)."""
        if cohort in self._roots:
            return self._roots[cohort]
        path: list[str] = []
        node: str | None = cohort
        while node is not None and node not in path:
            path.append(node)
            node = self.cohort_parent.get(node)
        if node is None:
            found: tuple[str, tuple[str, ...]] = (path[-1], ())
        else:
            loop = path[path.index(node):]
            start = loop.index(min(loop))
            ordered = (*loop[start:], *loop[:start])
            found = (ordered[0], ordered)
        for name in path:
            self._roots[name] = found
        return found

    def pool(self, queue: str) -> str | None:
        """The root of the queue's cohort tree (the loop's first name where parents loop); None without a cohort."""
        cohort = self.queue_cohort.get(queue)
        return None if cohort is None else self.root(cohort)[0]

    def cycle(self, queue: str) -> tuple[str, ...]:
        """The loop of parents above the queue's cohort (Kueue admits nothing there); () when there is none."""
        cohort = self.queue_cohort.get(queue)
        return () if cohort is None else self.root(cohort)[1]

    def loop_words(self, queue: str) -> str | None:
        """The sentence naming the loop of parents above the queue's cohort; None when there is none.

        One sentence for every planner that refuses such a tree (the deadline plan, the rebalance), so they
        say it alike: Kueue leaves a ClusterQueue under a loop out of its scheduling snapshot."""
        cycle = self.cycle(queue)
        if not cycle:
            return None
        return (f"cohort {cycle[0]}: its parents loop ({' -> '.join((*cycle, cycle[0]))}) and Kueue "
                "admits nothing in its ClusterQueues until that is fixed")

    def _members(self) -> dict[str, tuple[list[str], list[str]]]:
        """root -> (its cohorts, its queues), sorted; computed once."""
        if self._by_root is None:
            by_root: dict[str, tuple[list[str], list[str]]] = {}
            for cohort in sorted(self.cohort_parent):
                by_root.setdefault(self.root(cohort)[0], ([], []))[0].append(cohort)
            for queue in sorted(self.queue_cohort):
                root = self.pool(queue)
                if root is not None:
                    by_root.setdefault(root, ([], []))[1].append(queue)
            self._by_root = by_root
        return self._by_root

    def cohorts_under(self, root: str) -> list[str]:
        """Every cohort of the tree whose root (or loop) ``root`` is, sorted."""
        return list(self._members().get(root, ([], []))[0])

    def queues_under(self, root: str) -> list[str]:
        return list(self._members().get(root, ([], []))[1])

    # --- quota -------------------------------------------------------------------------------------------
    def quota(self, node: Node, fr: FlavorResource) -> Quota | None:
        moved = self._override.get((node, fr)) if self._override else None
        return moved if moved is not None else self.quotas.get(node, {}).get(fr)

    def subtree(self, node: Node, fr: FlavorResource) -> float:
        """Kueue's SubtreeQuota: the node's quota plus what its children lend it (not for a tree with a loop)."""
        if self._base is not None and node not in self._affected:
            return self._base.subtree(node, fr)  # nothing under it changed
        key = (node, fr)
        if key not in self._subtree:
            own = self.quota(node, fr)
            total = own.nominal if own is not None else 0.0
            if node[0]:
                total += sum(self.subtree(child, fr) - self.local(child, fr) for child in self._children.get(node[1], []))
            self._subtree[key] = total
        return self._subtree[key]

    def local(self, node: Node, fr: FlavorResource) -> float:
        """The part of the subtree's quota its lendingLimit keeps from the parent."""
        own = self.quota(node, fr)
        if own is None or own.lending_limit is None:
            return 0.0
        return max(0.0, self.subtree(node, fr) - own.lending_limit)

    def _parent(self, node: Node) -> str | None:
        return self.cohort_parent.get(node[1]) if node[0] else self.queue_cohort.get(node[1])

    def reach(self, queue: str, fr: FlavorResource) -> float:
        """Kueue's potentialAvailable: the most of ``fr`` the ClusterQueue can ever be admitted (0 when it does
        not list ``fr``: Kueue lends a flavor/resource only to a queue that lists it)."""
        if self.quota((False, queue), fr) is None or self.cycle(queue):
            return 0.0
        return self._reach((False, queue), fr)

    def _reach(self, node: Node, fr: FlavorResource) -> float:
        parent = self._parent(node)
        if parent is None:
            return self.subtree(node, fr)
        avail = self.local(node, fr) + self._reach((True, parent), fr)
        own = self.quota(node, fr)
        if own is not None and own.borrowing_limit is not None:
            avail = min(avail, self.subtree(node, fr) + own.borrowing_limit)
        return avail

    def total(self, root: str, fr: FlavorResource) -> float:
        """All nominal quota of ``fr`` in the tree: its ClusterQueues' and its Cohort objects'."""
        nodes = [(True, c) for c in self.cohorts_under(root)] + [(False, q) for q in self.queues_under(root)]
        return sum(q.nominal for q in (self.quota(n, fr) for n in nodes) if q is not None)

    def limits(self, root: str, fr: FlavorResource) -> list[str]:
        """The borrowingLimit/lendingLimit of ``fr`` set anywhere in the tree, in words."""
        out = []
        for is_cohort, names in ((False, self.queues_under(root)), (True, self.cohorts_under(root))):
            for name in names:
                q = self.quota((is_cohort, name), fr)
                if q is None:
                    continue
                words = [f"{label} {value:g}" for label, value in (("borrowingLimit", q.borrowing_limit),
                                                                   ("lendingLimit", q.lending_limit))
                         if value is not None]
                if words:
                    out.append(f"{'cohort ' if is_cohort else ''}{name} has {', '.join(words)}")
        return out


def inactive_queues(quotas: pd.DataFrame) -> dict[str, str]:
    """ClusterQueue -> why Kueue admits nothing into it (``stopped (spec.stopPolicy: Hold)``...), from a snapshot's
    quota frame or some of its rows (its ``inactive`` column, ``ClusterQueue.inactive``): what the rebalance plans
    no quota for and the deadline plan plans no pending work in."""
    if quotas.empty or "inactive" not in quotas.columns:
        return {}
    return {str(q): why for q, why in zip(quotas["cluster_queue"], quotas["inactive"]) if isinstance(why, str) and why}
