"""A pod's effective resource requests, the way Kueue totals them for a pod set.

Quantities are parsed by the project-wide ``gpuaas.quantity`` (exact milli-units).
"""

from __future__ import annotations

from typing import Any

from ...quantity import GPU, parse_quantity_milli

__all__ = ["GPU", "pod_requests"]


def pod_requests(pod_spec: dict[str, Any]) -> dict[str, int]:
    """Effective requests of one pod in milli-units.

    Like Kueue: a container's requests default to its limits, containers add up, init containers
    count by their maximum, and pod-level ``spec.resources`` wins when present.
    """
    pod_level = pod_spec.get("resources") or {}
    if pod_level.get("requests") or pod_level.get("limits"):
        return _container_requests(pod_level)
    total: dict[str, int] = {}
    for container in pod_spec.get("containers") or []:
        for name, milli in _container_requests(container.get("resources") or {}).items():
            total[name] = total.get(name, 0) + milli
    for container in pod_spec.get("initContainers") or []:
        for name, milli in _container_requests(container.get("resources") or {}).items():
            total[name] = max(total.get(name, 0), milli)
    return total


def _container_requests(resources: dict[str, Any]) -> dict[str, int]:
    merged = dict(resources.get("limits") or {})
    merged.update(resources.get("requests") or {})
    return {name: parse_quantity_milli(value) for name, value in merged.items()}
