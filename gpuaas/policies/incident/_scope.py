"""The window and the filters of an incident review (``gpuaas.policies.incident.review``). Pure.

The filters need a map: the stored history is per ClusterQueue and per tenant, the audit log per
object. A namespace reaches the history through the policy's tenants and the (namespace,
ClusterQueue) placements of the workloads gpuaas saw; a queue reaches namespaced audit rows the
same way, and a Cohort-level row (a quota plan) through the queues it changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from gpuaas.audit_subject import AuditRowLike
from gpuaas.errors import ConfigError
from gpuaas.quantity import parse_window

__all__ = ["AuditRow", "Scope", "parse_instant", "resolve_window", "row_in_scope", "scope_for"]


class AuditRow(AuditRowLike, Protocol):
    """The fields of an audit row the review reads (``gpuaas.store.AuditEntry`` has them): those that name its
    subject (``gpuaas.audit_subject``), and these."""

    @property
    def created_at(self) -> datetime: ...
    @property
    def flow(self) -> str: ...
    @property
    def flow_run_id(self) -> str | None: ...
    @property
    def action(self) -> str: ...
    @property
    def mode(self) -> str: ...
    @property
    def outcome(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def evidence(self) -> dict[str, Any]: ...
    @property
    def before(self) -> dict[str, Any] | None: ...
    @property
    def after(self) -> dict[str, Any] | None: ...


# -- the window --------------------------------------------------------------------------------

def parse_instant(value: str | datetime, now: datetime, field_name: str) -> datetime:
    """``now``, a duration before ``now`` (``90m``, ``2h``, ``7d``), or an ISO-8601 time (UTC without an offset)."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    text = str(value).strip()
    if text.lower() == "now":
        return now
    if text[-1:] in "smhdw" and text[:-1].replace(".", "", 1).isdigit():
        try:
            return now - timedelta(seconds=parse_window(text))
        except (OverflowError, ConfigError) as exc:
            raise ConfigError(f"{text!r} is out of range", field=field_name) from exc
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"expected an ISO time (2026-11-29T02:00), a duration before now (2h, 90m) or 'now', "
                          f"got {text!r}", field=field_name) from None
    try:
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:59:59-12:00 is in year 10000 in UTC, 0001-01-01T00:00+14:00 in year 0
        raise ConfigError(f"{text!r} is outside the years 1 to 9999 in UTC", field=field_name) from None


def resolve_window(start: str | datetime, end: str | datetime, now: datetime) -> tuple[datetime, datetime]:
    """``[start, end)`` in UTC; a window that is empty or runs backwards is a ConfigError naming both ends."""
    begin, until = parse_instant(start, now, "start"), parse_instant(end, now, "end")
    if begin >= until:
        raise ConfigError(f"start {begin:%Y-%m-%d %H:%M:%S} UTC is not before end {until:%Y-%m-%d %H:%M:%S} UTC",
                          field="start")
    return begin, until


# -- the filters -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Scope:
    """The filters and the map from namespaces to ClusterQueues and tenants that applies them."""

    namespaces: frozenset[str] = frozenset()
    queues: frozenset[str] = frozenset()
    ns_queues: Mapping[str, frozenset[str]] = field(default_factory=dict)
    ns_tenants: Mapping[str, frozenset[str]] = field(default_factory=dict)
    queue_tenants: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @property
    def filtered(self) -> bool:
        return bool(self.namespaces or self.queues)

    def queues_of_namespaces(self) -> frozenset[str]:
        return frozenset(q for ns in self.namespaces for q in self.ns_queues.get(ns, ()))

    def queue_ok(self, queue: str) -> bool:
        """A ClusterQueue passes both filters (the namespace filter through the map)."""
        return ((not self.queues or queue in self.queues)
                and (not self.namespaces or queue in self.queues_of_namespaces()))

    def namespace_ok(self, namespace: str) -> bool:
        return ((not self.namespaces or namespace in self.namespaces)
                and (not self.queues or bool(self.ns_queues.get(namespace, frozenset()) & self.queues)))

    def tenants(self) -> frozenset[str] | None:
        """The tenants whose history passes the filters; None: no filter (every tenant)."""
        if not self.filtered:
            return None
        sets = []
        if self.namespaces:
            sets.append(frozenset(t for ns in self.namespaces for t in self.ns_tenants.get(ns, ())))
        if self.queues:
            sets.append(frozenset(t for q in self.queues for t in self.queue_tenants.get(q, ())))
        out = sets[0]
        for s in sets[1:]:
            out &= s
        return out


def scope_for(namespaces: Iterable[str] = (), queues: Iterable[str] = (), *,
              tenants: Iterable[tuple[str, Sequence[str], Sequence[str]]] = (),
              placements: Iterable[tuple[str, str]] = (),
              queue_tenants: Iterable[tuple[str, str]] = ()) -> Scope:
    """The scope of the filters. ``tenants``: (name, namespaces, cluster_queues) from the policy;
    ``placements``: (namespace, ClusterQueue) pairs seen on workloads; ``queue_tenants``: (ClusterQueue,
    tenant) pairs from the queue history."""
    ns_queues: dict[str, set[str]] = {}
    ns_tenants: dict[str, set[str]] = {}
    q_tenants: dict[str, set[str]] = {}
    for ns, queue in placements:
        if ns and queue:
            ns_queues.setdefault(ns, set()).add(queue)
    for name, tenant_namespaces, tenant_queues in tenants:
        for ns in tenant_namespaces:
            ns_tenants.setdefault(ns, set()).add(name)
            ns_queues.setdefault(ns, set()).update(tenant_queues)
        for queue in tenant_queues:
            q_tenants.setdefault(queue, set()).add(name)
    for queue, tenant in queue_tenants:
        if queue and tenant:
            q_tenants.setdefault(queue, set()).add(tenant)
    for ns, qs in ns_queues.items():  # a namespace placed on a tenant's queue belongs to that tenant
        for queue in qs:
            ns_tenants.setdefault(ns, set()).update(q_tenants.get(queue, ()))
    return Scope(frozenset(n for n in namespaces if n), frozenset(q for q in queues if q),
                 {k: frozenset(v) for k, v in ns_queues.items()}, {k: frozenset(v) for k, v in ns_tenants.items()},
                 {k: frozenset(v) for k, v in q_tenants.items()})


def _touched_queues(row: AuditRow) -> set[str]:
    """The queues a Cohort-level row (a quota plan) changes, or all it names when it changes none."""
    before, after = row.before or {}, row.after or {}
    names = {q for q in set(before) | set(after) if isinstance(before.get(q, after.get(q)), dict)}
    changed = {q for q in names if before.get(q) != after.get(q)}
    return changed or names


def row_in_scope(row: AuditRow, scope: Scope, rows: Mapping[int, AuditRow]) -> bool:
    if not scope.filtered:
        return True
    if row.namespace:
        return scope.namespace_ok(row.namespace)
    if row.kind == "ClusterQueue":
        return scope.queue_ok(row.name)
    touched = _touched_queues(row)
    seen: set[int] = set()
    parent = row
    while not touched and parent.refers_to is not None and parent.refers_to not in seen:
        seen.add(parent.refers_to)
        found = rows.get(parent.refers_to)
        if found is None:
            break
        parent = found
        touched = _touched_queues(parent)
    return any(scope.queue_ok(q) for q in touched)
