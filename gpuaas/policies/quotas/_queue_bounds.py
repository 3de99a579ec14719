"""How much of a ClusterQueue's quota Kueue lets the rebalance give (``lendable_gpus``), read off its quota cells
(whether it admits at all: ``gpuaas.models.inactive_queues``). Pure."""

from __future__ import annotations

import math

import pandas as pd

__all__ = ["lendable_gpus"]

Cell = tuple[str, str]


def lendable_gpus(rows: pd.DataFrame) -> dict[Cell, int]:
    """(queue, flavor) -> the most GPUs of quota a plan may take from it: its ``lendingLimit``, for cells whose
    limit is below their quota (a resource without a limit lends all of it).

    ``nominalQuota - lendingLimit`` is what a ClusterQueue's owners keep from every other queue, and a plan never
    takes it, whatever ``manage_limits`` says: with it the limit moves with the quota, so the kept part also stays
    out of others' reach; without it the limit stays as written (lowered to the quota where above), so the queue
    keeps that many GPUs of quota but lends a larger part of what is left (``docs/flows/rebalance.md``)."""
    if "lending_limit" not in rows.columns:
        return {}
    nominal: dict[Cell, float] = {}
    lends: dict[Cell, float] = {}
    for r in rows.itertuples(index=False):
        cell = (str(r.cluster_queue), str(r.flavor))
        limit = r.lending_limit
        nominal[cell] = nominal.get(cell, 0.0) + float(r.nominal)
        bounded = limit is not None and not pd.isna(limit)
        lends[cell] = lends.get(cell, 0.0) + (min(float(limit), float(r.nominal)) if bounded else float(r.nominal))
    return {cell: math.floor(lends[cell] + 1e-9) for cell in nominal if lends[cell] < nominal[cell] - 1e-9}
