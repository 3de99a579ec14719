"""Kubernetes resource quantities as exact integers.

Quota arithmetic must be exact (a ClusterQueue with ``nominalQuota: 9`` cpu must admit nine
``1000m`` pods, not eight because of float rounding), so every quantity is held in *milli-units*
as a Python ``int``: ``"500m"`` -> 500, ``"2"`` -> 2000, ``"16Gi"`` -> 17179869184000.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

__all__ = ["GPU", "format_quantity", "parse_quantity", "pod_requests"]

GPU = "nvidia.com/gpu"

_SUFFIXES: dict[str, Decimal] = {
    "Ki": Decimal(1024),
    "Mi": Decimal(1024**2),
    "Gi": Decimal(1024**3),
    "Ti": Decimal(1024**4),
    "Pi": Decimal(1024**5),
    "Ei": Decimal(1024**6),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
}
_BINARY = [("Ei", 1024**6), ("Pi", 1024**5), ("Ti", 1024**4), ("Gi", 1024**3), ("Mi", 1024**2)]
_DECIMAL = [("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3)]


def parse_quantity(value: Any) -> int:
    """Return ``value`` (a Quantity string or number) in milli-units, rounding up like Kubernetes."""
    if isinstance(value, bool):
        raise TypeError(f"invalid quantity {value!r}")
    if isinstance(value, int):
        return value * 1000
    if isinstance(value, float):
        value = repr(value)
    text = str(value).strip()
    multiplier = Decimal(1)
    for suffix in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E"):
        if text.endswith(suffix):
            multiplier = _SUFFIXES[suffix]
            text = text[: -len(suffix)]
            break
    try:
        number = Decimal(text) * multiplier * 1000
    except InvalidOperation as exc:
        raise ValueError(f"invalid quantity {value!r}") from exc
    whole = int(number)
    return whole + 1 if number > whole else whole


def format_quantity(resource: str, milli: int) -> str:
    """Render milli-units close to the API server's canonical form: ``4``, ``500m``, ``16Gi``, ``2G``."""
    if milli % 1000:
        return f"{milli}m"
    whole = milli // 1000
    if whole and ("memory" in resource or "storage" in resource):
        for suffix, size in _BINARY + _DECIMAL:
            if whole % size == 0:
                return f"{whole // size}{suffix}"
    return str(whole)


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
    return {name: parse_quantity(value) for name, value in merged.items()}
