"""Opt-out: ``gpuaas.io/reclaim: "never"`` as people actually write it.

Annotations are free text typed by people: a YAML block scalar (``reclaim: |``) leaves
``"never\\n"``, others type ``Never``. An opt-out that silently fails to match is the worst
outcome a reclaim can have (a team's protected workload stopped), so the value is compared
stripped and case-folded everywhere it is read: the Workload, its owner and the owner's own
controllers (an InferenceService over its Deployment, a Notebook over its StatefulSet).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

__all__ = ["OPT_OUT_ANNOTATION", "OPT_OUT_VALUE", "is_opted_out", "opted_out", "opted_out_chain"]

OPT_OUT_ANNOTATION = "gpuaas.io/reclaim"
OPT_OUT_VALUE = "never"
MAX_OWNER_DEPTH = 8
"""Owner chains are short (pod -> ReplicaSet -> Deployment -> InferenceService); this bounds a cycle."""


def is_opted_out(value: Any) -> bool:
    """True for ``never`` in any case, with any surrounding whitespace; False for None/NaN/anything else."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return False
    return str(value).strip().casefold() == OPT_OUT_VALUE


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
