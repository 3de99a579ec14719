"""``ObjectStore``: the emulator's etcd, with the API server's write semantics.

Why it looks like this:

* **Copy on write.** A stored object is never modified in place; every write stores a new
  dict. Readers inside the package (the HTTP layer serialising a page of 500 workloads) can
  therefore hold references without copying, while public readers get deep copies.
* **Sorted keys per kind.** ``(namespace, name)`` keys are kept sorted so a paginated list
  resumes with one bisect, and a page never repeats or skips an object that lived through
  the whole list. As on the real server, a continued list belongs to the first page's
  ``resourceVersion``: later pages report it and leave out objects created after it. Unlike
  etcd there is no MVCC history: a continued page shows an object as it is now, and one
  deleted meanwhile is gone (the real server would show the snapshot).
* **One lock, events after it.** Writes hold one ``RLock``; subscribers are called after the
  lock is released, in the writing thread, so a subscriber may write again (its own events
  follow) without blocking HTTP readers.
"""

from __future__ import annotations

import bisect
import copy
import itertools
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ._errors import ApiError
from ._patch import apply_patch
from ._resources import RESOURCES, Resource, convert
from ._schemas import validate
from ._selectors import Predicate, parse_field_selector, parse_label_selector

__all__ = ["Event", "ObjectStore", "Page", "Subscriber", "utc_now"]

Key = tuple[str, str]
Subscriber = Callable[[str, dict[str, Any]], None]
Event = tuple[str, dict[str, Any]]
# Aliases, because ObjectStore.list shadows ``list`` in the signatures of later methods.
Events = list[Event]
Patch = dict[str, Any] | list[Any]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class _Table:
    objects: dict[Key, dict[str, Any]] = field(default_factory=dict)
    keys: list[Key] = field(default_factory=list)
    created: dict[Key, int] = field(default_factory=dict)  # the resourceVersion that created each key


@dataclass(frozen=True)
class Page:
    """One page of a list: stored objects (do not mutate), where to resume, and how many remain."""

    items: list[dict[str, Any]]
    resource_version: str
    next_key: Key | None
    remaining: int | None


class ObjectStore:
    """Thread-safe object store with resourceVersions, validation and status subresources."""

    def __init__(self, clock: Callable[[], datetime] = utc_now) -> None:
        self._clock = clock
        self._lock = threading.RLock()
        self._rv = 0
        self._tables: dict[str, _Table] = {kind: _Table() for kind in RESOURCES}
        self._subscribers: list[Subscriber] = []
        self._names = itertools.count()
        self.mutating_admission: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None
        """A fault-injection point that stands in for a mutating admission webhook: called with (kind, the object
        about to be stored) on every write of an object's main resource, it returns the object to store and answer
        (a "minimum replicas" policy setting ``replicas`` back). None, as on a cluster without such a webhook."""

    # --- registry and events -------------------------------------------------------------
    def kinds(self) -> dict[str, Resource]:
        return dict(RESOURCES)

    @property
    def resource_version(self) -> str:
        return str(self._rv)

    def now(self) -> datetime:
        """The time of the emulated cluster (the clock it stamps objects with), which their ages are read against."""
        return self._clock()

    def subscribe(self, callback: Subscriber) -> None:
        """Call ``callback(event_type, obj)`` after every committed write (obj is a copy)."""
        self._subscribers.append(callback)

    def unsubscribe(self, callback: Subscriber) -> None:
        self._subscribers.remove(callback)

    def _emit(self, events: Events) -> None:
        for event_type, obj in events:
            for callback in list(self._subscribers):
                callback(event_type, copy.deepcopy(obj))

    # --- reads -------------------------------------------------------------------------------
    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        with self._lock:
            return copy.deepcopy(self._stored(_resource(kind), namespace, name))

    def list(self, kind: str, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None) -> list[dict[str, Any]]:
        """Deep copies of the matching objects, sorted by (namespace, name)."""
        page = self.page(kind, namespace, label_selector, field_selector)
        return copy.deepcopy(page.items)

    def page(self, kind: str, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None, limit: int | None = None, after: Key | None = None,
             snapshot: int | None = None) -> Page:
        """Up to ``limit`` matching objects after key ``after``; the items are the stored dicts.

        ``snapshot`` (a continued list) is the first page's resourceVersion: objects created
        after it are left out and the page reports it.
        """
        res = _resource(kind)
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, res.kind)
        preds = [p for p in (labels, fields) if p is not None]
        namespace = namespace if res.namespaced else None
        with self._lock:
            table = self._tables[res.kind]
            keys = table.keys
            start = bisect.bisect_left(keys, (namespace, "")) if namespace else 0
            stop = bisect.bisect_left(keys, (namespace + "\x00", "")) if namespace else len(keys)
            if after is not None:
                start = max(start, bisect.bisect_right(keys, after))
            items: list[dict[str, Any]] = []
            next_key: Key | None = None
            if snapshot is not None:
                created = table.created
                preds = [*preds, lambda obj: created[_key_of(obj)] <= snapshot]
            for obj in _matching(table, keys, start, stop, preds):
                if limit is not None and len(items) >= limit:
                    next_key = _key_of(items[-1])
                    break
                items.append(obj)
            remaining = None
            if next_key is not None and labels is None and fields is None:
                remaining = stop - bisect.bisect_right(keys, next_key, start, stop)
            return Page(items, str(self._rv if snapshot is None else snapshot), next_key, remaining)

    def _stored(self, res: Resource, namespace: str | None, name: str) -> dict[str, Any]:
        obj = self._tables[res.kind].objects.get(((namespace or "") if res.namespaced else "", name))
        if obj is None:
            raise ApiError.not_found(res.qualified, name, group=res.group, kind=res.plural)
        return obj

    # --- writes ------------------------------------------------------------------------------
    def create(self, obj: dict[str, Any], *, drop_status: bool = False) -> dict[str, Any]:
        """Store a new object (any served version); returns it in the storage version.

        The store keeps a given ``status`` so a scenario can be seeded in one call; the HTTP
        layer passes ``drop_status=True`` because the real server ignores status on create.
        """
        res = _resource(obj.get("kind", ""))
        new = convert(copy.deepcopy(obj), res.storage_version)
        meta = new.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{next(self._names):05x}"
        if not res.namespaced:
            meta.pop("namespace", None)
        if drop_status and res.has_status:
            new.pop("status", None)
        for server_field in ("resourceVersion", "uid", "creationTimestamp", "deletionTimestamp"):
            meta.pop(server_field, None)
        validate(new, res)
        with self._lock:
            key = ((meta.get("namespace") or "") if res.namespaced else "", meta["name"])
            table = self._tables[res.kind]
            if key in table.objects:
                raise ApiError.already_exists(res.qualified, key[1], group=res.group, kind=res.plural)
            self._rv += 1
            meta.update(uid=_uid(self._rv), resourceVersion=str(self._rv), generation=1,
                        creationTimestamp=self._timestamp())
            table.objects[key] = new
            table.created[key] = self._rv
            bisect.insort(table.keys, key)
            result = copy.deepcopy(new)
        self._emit([("ADDED", new)])
        return result

    def patch(self, kind: str, namespace: str | None, name: str, patch: Patch,
              patch_type: str = "merge", *, resource_version: str | None = None, subresource: str | None = None,
              version: str | None = None) -> dict[str, Any]:
        """Patch an object; ``version`` is the API version the patch was written against."""
        res = _resource(kind)
        with self._lock:
            current = self._stored(res, namespace, name)
            view = convert(current, version) if version else current
            patched = apply_patch(view, patch, patch_type)
            patched["apiVersion"] = view["apiVersion"]
            patched = convert(patched, res.storage_version)
            sent_rv = (patched.get("metadata") or {}).get("resourceVersion")
            result, events = self._update(res, current, patched, resource_version or sent_rv, subresource)
        self._emit(events)
        return result

    def replace(self, obj: dict[str, Any], *, subresource: str | None = None) -> dict[str, Any]:
        """PUT: replace an object; a ``metadata.resourceVersion`` in ``obj`` is a precondition."""
        res = _resource(obj.get("kind", ""))
        new = convert(copy.deepcopy(obj), res.storage_version)
        meta = new.get("metadata") or {}
        with self._lock:
            current = self._stored(res, meta.get("namespace"), meta.get("name", ""))
            result, events = self._update(res, current, new, meta.get("resourceVersion"), subresource)
        self._emit(events)
        return result

    def delete(self, kind: str, namespace: str | None, name: str, *,
               resource_version: str | None = None) -> dict[str, Any]:
        """Delete an object, or mark it deleting while it still has finalizers."""
        res = _resource(kind)
        with self._lock:
            current = self._stored(res, namespace, name)
            if resource_version and resource_version != current["metadata"]["resourceVersion"]:
                raise ApiError.conflict(res.qualified, name, group=res.group, kind=res.plural)
            if current["metadata"].get("finalizers"):
                if current["metadata"].get("deletionTimestamp"):
                    return copy.deepcopy(current)
                marked = dict(current, metadata=dict(current["metadata"]))
                marked["metadata"]["deletionTimestamp"] = self._timestamp()
                result, events = self._commit(res, marked)
            else:
                self._remove(res, current)
                result, events = copy.deepcopy(current), [("DELETED", current)]
        self._emit(events)
        return result

    # --- internals ---------------------------------------------------------------------------
    def _timestamp(self) -> str:
        now = self._clock()
        now = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
        return now.strftime("%Y-%m-%dT%H:%M:%SZ")

    def _update(self, res: Resource, current: dict[str, Any], new: dict[str, Any], precondition: str | None,
                subresource: str | None) -> tuple[dict[str, Any], Events]:
        """Shared tail of patch and replace: preconditions, status rules, validation, commit."""
        old_meta = current["metadata"]
        if precondition and precondition != old_meta["resourceVersion"]:
            raise ApiError.conflict(res.qualified, old_meta["name"], group=res.group, kind=res.plural)
        if subresource not in (None, "status") or (subresource == "status" and not res.has_status):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if subresource == "status":
            # A status write changes nothing but .status, like the real status subresource.
            status = new.get("status")
            new = {k: v for k, v in current.items() if k != "status"}
            if status is not None:
                new["status"] = status
        else:
            meta = dict(new.get("metadata") or {})
            for key in ("uid", "creationTimestamp", "generation", "deletionTimestamp", "name", "namespace"):
                if key in old_meta:
                    meta[key] = old_meta[key]
                else:
                    meta.pop(key, None)
            new["metadata"] = meta
            if res.has_status:
                # ...and a main-resource write leaves .status alone.
                new.pop("status", None)
                if "status" in current:
                    new["status"] = current["status"]
        new["apiVersion"], new["kind"] = current["apiVersion"], current["kind"]
        new["metadata"] = dict(new["metadata"], resourceVersion=old_meta["resourceVersion"])
        if subresource is None and self.mutating_admission is not None:
            new = self.mutating_admission(res.kind, new)
        if new == current:
            return copy.deepcopy(current), []
        validate(new, res)
        if _spec_of(new) != _spec_of(current):
            new["metadata"]["generation"] = old_meta.get("generation", 1) + 1
        return self._commit(res, new)

    def _commit(self, res: Resource, new: dict[str, Any]) -> tuple[dict[str, Any], Events]:
        """Store ``new`` (caller holds the lock); a deleting object without finalizers goes."""
        meta = new["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._remove(res, new)
            return copy.deepcopy(new), [("DELETED", new)]
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        self._tables[res.kind].objects[_key_of(new)] = new
        return copy.deepcopy(new), [("MODIFIED", new)]

    def _remove(self, res: Resource, obj: dict[str, Any]) -> None:
        key = _key_of(obj)
        table = self._tables[res.kind]
        del table.objects[key]
        del table.created[key]
        del table.keys[bisect.bisect_left(table.keys, key)]
        self._rv += 1


def _resource(kind: str) -> Resource:
    res = RESOURCES.get(kind)
    if res is None:
        raise ApiError(404, "NotFound", f"the server could not find the requested resource (kind {kind!r})")
    return res


def _key_of(obj: dict[str, Any]) -> Key:
    meta = obj["metadata"]
    return (meta.get("namespace") or "", meta["name"])


def _spec_of(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _matching(table: _Table, keys: list[Key], start: int, stop: int,
              preds: list[Predicate]) -> Iterator[dict[str, Any]]:
    objects = table.objects
    for index in range(start, stop):
        obj = objects[keys[index]]
        if all(p(obj) for p in preds):
            yield obj


def _uid(rv: int) -> str:
    """A UUID that sorts in creation order (the resourceVersion first, random bits after).

    Why: Kueue breaks a tie of priority and queue time (creation timestamps have whole seconds) by uid. A
    real API server's uids are random, so that order is arbitrary but fixed; here it is the order of
    creation, the order in which the embedded Kueue breaks the same tie, so the two agree.
    """
    return str(uuid.UUID(int=(rv << 64) | uuid.uuid4().int >> 64))
