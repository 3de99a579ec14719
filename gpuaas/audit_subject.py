"""What an audit row is about, named the way the command that decided it named it. Pure.

A reclaim stops a RayCluster, a Notebook or a JobSet through its Kueue Workload, so the row it writes is
the Workload's (the object written, undone and compared for a later change). The team knows the owner, and
``gpuaas reclaim`` prints it first; ``audit list``, ``incident`` and ``undo`` print the same subject:
``RayCluster research/ray (Workload raycluster-ray-9cefe)``. The owner is the ``Kind name`` a reclaim records
in ``evidence["owner"]`` (``gpuaas.policies.reclaim.plan``); a row that completes, steps through or undoes one
about the same object records no evidence of its own and takes its referent's, up the ``refers_to`` chain.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

__all__ = ["REFERENT_DEPTH", "AuditRowLike", "owner_named", "owners", "subject"]

REFERENT_DEPTH = 4
"""How far up ``refers_to`` a row's owner is looked for: an undo's completion, its intent, the reclaim's apply,
its decision."""


class AuditRowLike(Protocol):
    """The fields of an audit row this module reads (``gpuaas.store.AuditEntry`` has them)."""

    @property
    def id(self) -> int | None: ...
    @property
    def kind(self) -> str: ...
    @property
    def namespace(self) -> str | None: ...
    @property
    def name(self) -> str: ...
    @property
    def evidence(self) -> Any: ...
    @property
    def refers_to(self) -> int | None: ...


Row = TypeVar("Row", bound=AuditRowLike)


def owner_named(row: AuditRowLike) -> str | None:
    """``Kind name`` of the owner a reclaim stopped through this row's Workload, or None."""
    owner = row.evidence.get("owner") if isinstance(row.evidence, dict) else None
    return str(owner) if owner and " " in str(owner).strip() else None


def _same_object(a: AuditRowLike, b: AuditRowLike) -> bool:
    return (a.kind, a.namespace or "", a.name) == (b.kind, b.namespace or "", b.name)


def owners(rows: Iterable[Row], lookup: Callable[[int], Row | None]) -> dict[int, str]:
    """Each row's owner by id: its own, or its referent's where the referent is about the same object.

    ``lookup`` finds a referent the caller did not pass (``Store.get_audit`` where a listing's ``--limit`` or
    window left it out; a mapping's ``get`` where every row is at hand).
    """
    rows = list(rows)
    known: dict[int, Row] = {int(r.id or 0): r for r in rows}
    found: dict[int, str | None] = {}

    def owner_of(row: Row, depth: int) -> str | None:
        key = int(row.id or 0)
        if key not in found:
            found[key] = owner_named(row)
            ref = row.refers_to
            if found[key] is None and ref is not None and depth < REFERENT_DEPTH:
                parent = known.get(ref) or lookup(ref)
                if parent is not None and _same_object(parent, row):
                    known[ref] = parent
                    found[key] = owner_of(parent, depth + 1)
        return found[key]

    return {int(r.id or 0): o for r in rows if (o := owner_of(r, 0))}


def subject(kind: str, namespace: str | None, name: str, owner: str | None) -> str:
    """``RayCluster research/ray (Workload raycluster-ray-9cefe)`` for a Workload stopped for its owner, the owner
    first; ``Kind namespace/name`` (``Kind name`` when cluster-scoped) for any other object."""
    where = f"{namespace}/{name}" if namespace else name
    owner_kind, _, owner_name = (owner or "").strip().partition(" ")
    if not owner_name:
        return f"{kind} {where}"
    return f"{owner_kind} {f'{namespace}/{owner_name}' if namespace else owner_name} ({kind} {name})"
