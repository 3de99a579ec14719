"""Which audit rows are about one object: the object written, or the owner a reclaim stopped through it.

Kept apart from the store's session and schema code: it is the one query that reads a row's evidence
JSON, and the part of ``gpuaas audit list --object`` that decides what "this object" means.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import and_, func, or_
from sqlalchemy.orm import aliased
from sqlmodel import col, select

from gpuaas.store._models import AuditEntry

__all__ = ["OBJECT_FORMS", "object_filter", "parse_object_ref"]


OBJECT_FORMS = ("NAME, NAMESPACE/NAME, KIND/NAMESPACE/NAME or, for a cluster-scoped object, KIND//NAME (or as "
                "the tables print it: KIND NAMESPACE/NAME, KIND NAME)")
"""The ways an audit query names an object (``gpuaas audit list --object``)."""


def parse_object_ref(obj: str) -> tuple[str | None, str | None, str]:
    """(kind, namespace, name) of one of :data:`OBJECT_FORMS`: None where the form leaves it out, namespace ``""``
    for a cluster-scoped object; a ``ValueError`` naming the forms for anything else. A Kubernetes name holds
    no ``/`` and no space, so a fourth part or an empty one is a typo, refused rather than matching nothing.
    A subject as every table prints it is read in the slash form: ``Notebook team-a/nb`` is ``Notebook/team-a/nb``,
    ``ClusterQueue team-a-cq`` is ``ClusterQueue//team-a-cq``."""
    obj = _as_printed(obj)
    parts = obj.strip().split("/")
    kind, namespace, name = (None, None, parts[0]) if len(parts) == 1 else (
        (None, parts[0], parts[1]) if len(parts) == 2 else (parts[0], parts[1], parts[-1]))
    must = [name] + [kind] * (kind is not None) + [namespace] * (namespace is not None and kind is None)
    if len(parts) > 3 or not all(must) or any(c.isspace() for c in obj.strip()):
        raise ValueError(f"expected {OBJECT_FORMS}, got {obj!r}")
    return kind, namespace, name


_PRINTED = re.compile(r"(?P<kind>[^\s/()]+) (?P<ref>[^\s()]+)(?: \([^\s/()]+ [^\s()]+\))?")
"""A subject as the tables print it: ``Kind ns/name`` or ``Kind name`` (cluster-scoped), with an optional
``(Kind name)`` after it, the object written for it."""


def _as_printed(obj: str) -> str:
    """``obj`` in the slash form when it is a subject as the tables print it (the object written after it, in
    brackets, left out: the rows about the owner are found by its own name); else ``obj`` as it is."""
    match = _PRINTED.fullmatch(obj.strip())
    if match is None:
        return obj
    kind, ref = match["kind"], match["ref"]
    return f"{kind}/{ref}" if ref.count("/") == 1 else f"{kind}//{ref}" if "/" not in ref else obj


def object_filter(obj: str) -> list[Any]:
    """Rows about ``obj``: the object written, or the owner a reclaim stopped through it, or a row completing or
    undoing one of those (a restore's rows record no evidence; they refer to the reclaim that recorded the owner).

    A reclaim stopped through its Workload records the owner the team knows in ``evidence["owner"]`` as ``Kind
    name`` (``gpuaas.policies.reclaim.plan``, ``Decision.stops``); the row's namespace is the owner's. It is read
    in SQL with the JSON operators SQLAlchemy renders for each backend (``JSON_EXTRACT`` on SQLite, ``->>`` on
    PostgreSQL) and compared with ``substr``/``length``/``lower``, which both have, so the filter stays in the
    query and ``--limit`` keeps the newest matching rows. The kind matches in any case (people type
    ``notebook``); a name matches exactly.
    """
    kind, namespace, name = parse_object_ref(obj)

    def where(row: Any) -> list[Any]:
        ns = row.namespace
        if namespace is None:
            return []
        return [ns == namespace] if namespace else [or_(ns.is_(None), ns == "")]

    def owned(row: Any) -> Any:
        owner = row.evidence["owner"].as_string()
        if kind:  # ``Kind name``: the kind in any case, then the name exactly
            named = [func.lower(func.substr(owner, 1, len(kind) + 1)) == f"{kind.lower()} ",
                     func.substr(owner, len(kind) + 2) == name]
        else:  # ``... name``: the last word (a kind holds no space)
            named = [func.length(owner) > len(name) + 1, func.substr(owner, func.length(owner) - len(name)) == f" {name}"]
        return and_(*where(row), *named)

    written = and_(*where(AuditEntry), col(AuditEntry.name) == name,
                   *([func.lower(col(AuditEntry.kind)) == kind.lower()] if kind else []))
    # The owner's rows and, recursively, the rows that refer to them (an undo's intent refers to the reclaim, its
    # completion to the intent): ``WITH RECURSIVE``, which both backends have, along the indexed ``refers_to``.
    owners, child = aliased(AuditEntry), aliased(AuditEntry)
    about = select(owners.id).where(owned(owners)).cte("about", recursive=True)
    about = about.union(select(child.id).where(child.refers_to == about.c.id))
    return [or_(written, col(AuditEntry.id).in_(select(about.c.id)))]
