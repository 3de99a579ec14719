"""Pods the GPU telemetry saw and OpenCost's allocation does not list: their GPU-hours are in the funnel, their cost
in no total. Pure.

A service, tenant or period with some such pods shows the cost of the others only, while its verified outcomes
count the work of all of them: cost divided by outcomes would understate what an outcome cost. Where those pods
hold more than ``MATERIAL_SHARE`` of its GPU-hours, its cost per outcome is unknown, never that quotient, and a note
names the pods and their GPU-hours and gives the quotient as what it is, a lower bound. Below it, the figure stands
and a note says what it leaves out: OpenCost misses pods that lived less than its resolution (a minute or two of
GPU time), and one such pod must not blank a fleet's cost per outcome. (A service none of whose pods is listed
has its cost unknown too: ``report``.)
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from gpuaas.policies.cost._figures import cost_per_outcome

__all__ = ["MATERIAL_SHARE", "left_out_note", "material", "understated_note", "unpriced_days", "unpriced_note", "unpriced_pods"]

MATERIAL_SHARE = 0.01
"""The share of a row's allocated GPU-hours that unpriced pods may hold before its cost per outcome is unknown."""


def unpriced_pods(pods: pd.DataFrame, costs_known: bool) -> pd.DataFrame:
    """The rows of ``pods`` (the report's per-pod frame) with telemetry and no OpenCost allocation; none when no
    cost source answered (then every cost is unknown, and says so)."""
    if not costs_known:
        return pods.iloc[0:0]
    return pods[pods["gpu_cost"].isna() & (pods["observed_h"].fillna(0.0) > 0)]


def _pods_phrase(unpriced: pd.DataFrame) -> str:
    """"2 pods with 3.00 GPU-hours of telemetry ... (the most: ns/pod, 2.00 GPU-hours)"."""
    first = unpriced.sort_values(["observed_h", "pod"], ascending=[False, True]).iloc[0]
    many = len(unpriced) > 1
    return (f"{len(unpriced)} pod{'s' if many else ''} with {unpriced['observed_h'].sum():,.2f} GPU-hours of telemetry "
            f"{'are' if many else 'is'} not in OpenCost's allocation (the most: {first['namespace']}/{first['pod']}, "
            f"{first['observed_h']:,.2f} GPU-hours)")


def unpriced_note(unpriced: pd.DataFrame) -> str | None:
    """The window's note about them: their GPU-hours are in the funnel, their cost in no total (never $0 in
    silence); None where there are none."""
    if unpriced.empty:
        return None
    return f"{_pods_phrase(unpriced)}: {'their' if len(unpriced) > 1 else 'its'} cost is in no total"


def material(unpriced: pd.DataFrame, allocated_hours: float | None) -> bool:
    """Whether ``unpriced`` (some of a row's pods) holds more than ``MATERIAL_SHARE`` of the row's allocated
    GPU-hours (all of them when that is unknown or 0)."""
    hours = float(unpriced["observed_h"].sum())
    return hours > 0 and (not allocated_hours or hours > MATERIAL_SHARE * allocated_hours)


def left_out_note(what: str, unpriced: pd.DataFrame, allocated_hours: float) -> str:
    """Why ``what``'s cost per outcome stands though some of its pods are unpriced: how little they held."""
    share = float(unpriced["observed_h"].sum()) / allocated_hours
    return (f"{what}: cost per outcome leaves out {_pods_phrase(unpriced)}, {share:.1%} of its GPU-hours "
            f"(under {MATERIAL_SHARE:.0%}): understated by at most what {'they' if len(unpriced) > 1 else 'it'} cost")


def _dollars(value: float) -> str:
    return f"${value:,.2f}" if abs(value) >= 1 else f"${value:.3g}"


def understated_note(what: str, unpriced: pd.DataFrame, cost: float | None, outcomes: float | None,
                     basis: str) -> str:
    """Why ``what``'s cost per outcome is unknown: the pods of it that OpenCost does not list, and the quotient of
    what is priced as the lower bound it is."""
    bound = cost_per_outcome(cost, outcomes)
    at_least = f"; {_dollars(cost or 0.0)} over {outcomes:,.0f} outcomes, at least {_dollars(bound)} per outcome" \
        if bound is not None and outcomes is not None else ""
    those, theirs = ("those pods", "those pods'") if len(unpriced) > 1 else ("that pod", "that pod's")
    return (f"{what}: cost per outcome unknown: {_pods_phrase(unpriced)}, so its {basis} cost leaves out what "
            f"{those} cost, while its outcomes count {theirs} work{at_least}")


def unpriced_days(gpu: pd.DataFrame, unpriced: pd.DataFrame) -> set[tuple[str, int]]:
    """(service, period) where a pod of the service that OpenCost does not list had telemetry: that period's cost per
    outcome would be understated the same way."""
    owner = {(ns, pod): svc for ns, pod, svc in zip(unpriced["namespace"], unpriced["pod"], unpriced["service"])
             if isinstance(svc, str) and svc}
    rows: Iterable[tuple[str, str, int, float]] = zip(gpu["namespace"], gpu["pod"], gpu["day"], gpu["observed_h"])
    return {(owner[(ns, pod)], int(day)) for ns, pod, day, seen in rows if (ns, pod) in owner and seen > 0}
