"""Discovery documents (``/api``, ``/apis``, ``/apis/<group>/<version>``, ``/version``).

The official client's dynamic client and kubectl read these before anything else; they are
derived from the resource registry so a newly registered kind is discoverable at once.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from ._core_events import DISCOVERY as CORE_EVENTS
from ._resources import RESOURCES

__all__ = ["VISIBILITY_GROUP", "VISIBILITY_VERSIONS", "api_group_list", "api_resource_list", "api_versions", "version"]

VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"
VISIBILITY_VERSIONS = ("v1beta2", "v1beta1")
_VERBS = ["create", "delete", "get", "list", "patch", "update"]
_STATUS_VERBS = ["get", "patch", "update"]


def _groups() -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for res in RESOURCES.values():
        if res.group:
            versions = groups.setdefault(res.group, [])
            versions.extend(v for v in res.versions if v not in versions)
    groups[VISIBILITY_GROUP] = list(VISIBILITY_VERSIONS)
    return groups


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def api_group_list(disabled: Collection[str] = ()) -> dict[str, Any]:
    """``/apis``; a group version in ``disabled`` (``kueue.x-k8s.io/v1beta2``) is left out."""
    groups = []
    for name, versions in _groups().items():
        entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions if f"{name}/{v}" not in disabled]
        if not entries:
            continue
        groups.append({"name": name, "versions": entries, "preferredVersion": entries[0]})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_resource_list(group: str, version: str) -> dict[str, Any] | None:
    """The resources served at ``group/version``; None when nothing is served there."""
    resources: list[dict[str, Any]] = []
    if group == VISIBILITY_GROUP and version in VISIBILITY_VERSIONS:
        for plural, kind, namespaced in (("clusterqueues", "ClusterQueue", False), ("localqueues", "LocalQueue", True)):
            resources.append({"name": plural, "singularName": kind.lower(), "namespaced": namespaced,
                              "kind": kind, "verbs": ["get"]})
            resources.append({"name": f"{plural}/pendingworkloads", "singularName": "", "namespaced": namespaced,
                              "kind": "PendingWorkloadsSummary", "verbs": ["get"]})
    if (group, version) == ("", "v1"):
        resources.append(dict(CORE_EVENTS))
    for res in RESOURCES.values():
        if res.group != group or version not in res.versions:
            continue
        resources.append({"name": res.plural, "singularName": res.singular, "namespaced": res.namespaced,
                          "kind": res.kind, "verbs": _VERBS, "shortNames": list(res.short_names)})
        if res.has_status:
            resources.append({"name": f"{res.plural}/status", "singularName": "", "namespaced": res.namespaced,
                              "kind": res.kind, "verbs": _STATUS_VERBS})
    if not resources:
        return None
    group_version = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}


def version() -> dict[str, str]:
    return {
        "major": "1", "minor": "31", "gitVersion": "v1.31.0-gpuaas-embedded", "gitCommit": "", "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.22", "compiler": "gc", "platform": "linux/amd64",
    }
