"""Opt-out over the snapshot's columns and owner chains: ``gpuaas.io/reclaim: "never"`` on the Workload, its
owner or any controller above it (an InferenceService over its Deployment, a Notebook over its StatefulSet).

What counts as ``never`` (stripped, case-folded) is ``gpuaas.models.is_opted_out``, re-exported here: the
Kubernetes source applies the same rule to the batch job that owns a Workload.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from gpuaas.models import OPT_OUT_ANNOTATION, OPT_OUT_VALUE, is_opted_out

__all__ = ["OPT_OUT_ANNOTATION", "OPT_OUT_VALUE", "is_opted_out", "opted_out", "opted_out_chain"]

MAX_OWNER_DEPTH = 8
"""Owner chains are short (pod -> ReplicaSet -> Deployment -> InferenceService); this bounds a cycle."""


def opted_out(values: pd.Series) -> pd.Series:
    """``is_opted_out`` over a column (object dtype, missing values allowed)."""
    return values.astype(object).map(is_opted_out).astype(bool)


Key = tuple[str, str, str]


def opted_out_chain(start: Key | None, owners: Mapping[Key, tuple[Any, str | None, str | None]]) -> bool:
    """Whether the object ``(namespace, kind, name)`` or any controller above it opts out.

    ``owners`` maps each owner to ``(reclaim annotation, controller kind, controller name)``.
    """
    seen: set[Key] = set()
    key = start
    while key is not None and key not in seen and len(seen) < MAX_OWNER_DEPTH:
        seen.add(key)
        entry = owners.get(key)
        if entry is None:
            return False
        value, ckind, cname = entry
        if is_opted_out(value):
            return True
        key = (key[0], ckind, cname) if ckind and cname else None
    return False
