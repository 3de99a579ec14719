"""Strict JSON from values that may hold ``inf`` or ``NaN``: a step of a sweep with no answer, a figure not measured.

Its own module, with no dependency: ``gpuaas capacity --format json`` prints with it, and must not import the
load tester (httpx, SQLAlchemy) to do so; the load tester writes its summary with it too.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["json_safe"]


def json_safe(value: Any) -> Any:
    """JSON without Infinity/NaN (PostgreSQL's JSON and strict parsers refuse them): each becomes None (null)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value
