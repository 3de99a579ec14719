"""Costs OpenCost listed and could not compute: a null or NaN ``gpuCost`` or ``totalCost``. Pure.

OpenCost writes null for a figure it could not compute (NaN or infinite in its own arithmetic). Such a pod is
listed, so it is not one OpenCost does not price (``_unpriced``), and its cost is not $0 either: a sum with an
unknown term is unknown. So the money column it lacks is unknown for its pod's tenant, its service (in the periods
it was missing from too), its workload among the top wasters and the cluster, and so is what is derived from that
column: the waste (idle GPU-hours at the GPU price) from the GPU cost, and cost per outcome from the column the
policy's ``cost.basis`` names. The other tenants, services and the other column keep their figures, and a note names
the field and the pods. The report is otherwise built as usual (those pods count $0 there): this module then blanks
what it cannot know.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

from gpuaas.phrases import DEFAULT_CURRENCY, first_few, zero_money

__all__ = ["blank_unknown_money", "unknown_costs"]

FIELDS = {"gpu_cost": ("gpuCost", "GPU cost"), "total_cost": ("totalCost", "total cost")}
"""Each money column OpenCost gives, with the field it comes from and its name in a sentence."""


def unknown_costs(costs: pd.DataFrame | None) -> dict[str, pd.DataFrame]:
    """Per money column (and ``gpu_hours``), the rows (``namespace, pod, day``) of the costs that OpenCost left
    unknown; empty where all are known (and where no cost source answered: then every cost is unknown already)."""
    if costs is None or costs.empty:
        return {}
    out = {}
    for column in (*FIELDS, "gpu_hours"):
        rows = costs.loc[costs[column].astype(float).isna(), ["namespace", "pod", "day"]]
        if not rows.empty:
            out[column] = rows.assign(pod=rows["pod"].fillna("").astype(str), day=rows["day"].astype(int))
    return out


def _blanked(column: str, basis: str) -> list[str]:
    """``column`` and the figures derived from it: the waste from the GPU cost, cost per outcome from the basis."""
    return [column, *(["waste_cost"] if column == "gpu_cost" else []),
            *(["cost_per_outcome"] if column == f"{basis}_cost" else [])]


def _blank(rows: Iterable[dict[str, Any]], keys: list[str], hit: set[tuple[Any, ...]], columns: list[str]) -> None:
    for row in rows:
        if tuple(row.get(k) for k in keys) in hit:
            row.update({c: None for c in columns if c in row})


def blank_unknown_money(unknown: dict[str, pd.DataFrame], pods: pd.DataFrame, basis: str,
                        report: dict[str, Any], notes: list[str], currency: str = DEFAULT_CURRENCY) -> None:
    """Make unknown, in ``report`` (its ``tenants``, ``services``, ``cluster``, ``daily`` and ``wasters`` rows, changed
    in place), every figure that adds a cost OpenCost left unknown (``unknown_costs``), and say so in ``notes``.
    ``pods``: the report's per-pod frame (tenant, service and workload of each pod); ``currency``: the ISO 4217 code
    the notes write money in."""
    owners = pods.set_index(["namespace", "pod"])[["tenant", "service", "workload"]]
    for column, rows in unknown.items():
        keys = list(zip(rows["namespace"], rows["pod"], strict=True))
        named = sorted({f"{ns}/{pod}" if pod else ns for ns, pod in keys})
        pods_named = f"{len(named)} pod{'s' if len(named) > 1 else ''} ({first_few(named)})"
        if column == "gpu_hours":  # no money: the pods' allocated hours are DCGM's, as for a pod OpenCost misses
            notes.append(f"OpenCost gave no gpuHours (null) for {pods_named}: their allocated GPU-hours are those "
                         "the GPU telemetry saw")
            continue
        found = owners.reindex(pd.MultiIndex.from_tuples(keys, names=["namespace", "pod"]))
        tenants = {(t,) for t in found["tenant"].dropna()}
        services = {(s,) for s in found["service"].dropna()}
        service_days = {(s, int(d)) for s, d in zip(found["service"], rows["day"], strict=True) if isinstance(s, str)}
        workloads = {(t, ns, w) for t, (ns, _), w in zip(found["tenant"], keys, found["workload"], strict=True)
                     if isinstance(t, str)}
        blanked = _blanked(column, basis)
        _blank(report["tenants"], ["tenant"], tenants, blanked)
        _blank(report["services"], ["service"], services, blanked)
        _blank(report["daily"], ["service", "day"], service_days, blanked)
        _blank(report["wasters"], ["tenant", "namespace", "workload"], workloads, blanked)
        report["cluster"].update({c: None for c in blanked if c in report["cluster"]})
        field, words = FIELDS[column]
        whose = first_few(sorted(t for (t,) in tenants)) if tenants else "no tenant"
        notes.append(f"OpenCost gave no {field} (null) for {pods_named}: the {words} of {whose} and of the cluster is "
                     f"unknown, not {zero_money(currency)}" + (", and so is the waste" if column == "gpu_cost" else ""))
