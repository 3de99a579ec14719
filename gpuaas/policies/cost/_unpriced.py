"""Pods the GPU telemetry saw and OpenCost's allocation does not list: their GPU-hours are in the funnel, their cost
in no total. Pure.

A service, tenant or period with some such pods shows the cost of the others only, while its verified outcomes
count the work of all of them: cost divided by outcomes would understate what an outcome cost. Where those pods
hold more than ``MATERIAL_SHARE`` of its GPU-hours, its cost per outcome is unknown, never that quotient, and a note
names the pods and their GPU-hours and gives the quotient as what it is, a lower bound. Below it, the figure stands
and a note says what it leaves out: OpenCost misses pods that lived less than its resolution (a minute or two of
GPU time), and one such pod must not blank a fleet's cost per outcome. A service that did work while none of its
pods is priced has its cost unknown too (``unpriced_services``), and so has its tenant's cost per outcome.

The notes on a tenant's and a service's row are written here (``tenant_note``, ``service_note``), one rule each,
so that the two kinds of row say the same thing the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from gpuaas.phrases import DEFAULT_CURRENCY, counted, money, per_outcome, zero_money
from gpuaas.policies.cost._figures import cost_per_outcome, num
from gpuaas.policies.cost.services import ServiceTally

__all__ = ["MATERIAL_SHARE", "NO_OUTCOME", "gpus_unpriced_note", "left_out_note", "material", "service_note", "tenant_note",
           "understated_note", "unpriced_days", "unpriced_note", "unpriced_pods", "unpriced_services"]

NO_OUTCOME = "no verified outcome"
"""What a note says of a row with a cost and no verified outcome (its cost per outcome None)."""

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


def gpus_unpriced_note(pods: pd.DataFrame, funnel: pd.DataFrame) -> str | None:
    """The note on pods OpenCost lists with 0 GPU-hours while the GPU telemetry saw their GPUs (``pods``: the report's
    per-pod frame; ``funnel``: ``pod_funnel`` of it, row for row); None where there are none.

    Why: OpenCost counts ``nvidia.com/gpu`` (and ``k8s.amazonaws.com/vgpu``) only, so a pod that asks for a MIG slice
    (``nvidia.com/mig-*``) or a time-sliced ``nvidia.com/gpu.shared`` has no GPU, GPU-hour or GPU cost there. The
    funnel keeps the hours the telemetry saw (as for a pod OpenCost does not list); what those GPUs cost is in no
    workload's cost and no waste: OpenCost counts it in the nodes' idle. Said, so that no one reads the pod's $0 GPU
    cost, or its idle hours' $0 waste, as what they cost."""
    seen = pods["observed_h"].astype(float).fillna(0.0)
    hit = (pods["allocated_h"].astype(float) == 0) & (seen > 0)
    if not hit.any():
        return None
    listed = pods[hit].assign(observed_h=seen[hit])
    first = listed.sort_values(["observed_h", "pod"], ascending=[False, True]).iloc[0]
    many = len(listed) > 1
    idle = float(funnel.loc[hit, "idle_gpu_hours"].sum())
    return (f"{len(listed)} pod{'s' if many else ''} with {listed['observed_h'].sum():,.2f} GPU-hours of telemetry "
            f"{'are' if many else 'is'} in OpenCost's allocation with 0 GPUs (the most: {first['namespace']}/"
            f"{first['pod']}, {first['observed_h']:,.2f} GPU-hours): OpenCost counts nvidia.com/gpu (and "
            "k8s.amazonaws.com/vgpu) only, not MIG slices (nvidia.com/mig-*) or time-sliced nvidia.com/gpu.shared, so "
            "it priced none of "
            f"{'their' if many else 'its'} GPUs. The funnel keeps the GPU-hours the telemetry saw; the GPUs' cost "
            f"is in OpenCost's idle for the nodes, not in {'their' if many else 'its'} GPU or total cost, and "
            f"{'their' if many else 'its'} {idle:,.2f} idle GPU-hours are in no waste figure")


def material(unpriced: pd.DataFrame, allocated_hours: float | None) -> bool:
    """Whether ``unpriced`` (some of a row's pods) holds more than ``MATERIAL_SHARE`` of the row's allocated
    GPU-hours (all of them when that is unknown or 0)."""
    hours = float(unpriced["observed_h"].sum())
    return hours > 0 and (not allocated_hours or hours > MATERIAL_SHARE * allocated_hours)


def left_out_note(what: str, unpriced: pd.DataFrame, allocated_hours: float) -> str:
    """Why ``what``'s cost per outcome stands though some of its pods are unpriced: how little they held."""
    share = float(unpriced["observed_h"].sum()) / allocated_hours
    they = "they" if len(unpriced) > 1 else "it"
    return (f"{what}: {_pods_phrase(unpriced)}, {share:.1%} of its GPU-hours (under {MATERIAL_SHARE:.0%}): its cost "
            f"per outcome leaves out what {they} cost, understated by at most that")


def understated_note(what: str, unpriced: pd.DataFrame, cost: float | None, outcomes: float | None,
                     basis: str, kind: str = "serving", currency: str = DEFAULT_CURRENCY) -> str:
    """Why ``what``'s cost per outcome is unknown: the pods of it that OpenCost does not list, and the quotient of
    what is priced as the lower bound it is, priced as the tables price ``kind``'s outcomes (``per_outcome``: a
    request under a cent per 1,000 requests), never in scientific notation, in ``currency``."""
    bound = cost_per_outcome(cost, outcomes)
    at_least = (f"; {money(cost or 0.0, currency=currency)} over {outcomes:,.0f} outcomes, at least "
                f"{per_outcome(bound, kind, currency)}") \
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


def unpriced_services(services: Sequence[ServiceTally], pods: pd.DataFrame, costs_known: bool) -> set[str]:
    """The services that did work (served requests, or finished a job in time) while none of their pods is one
    OpenCost priced (``pods``: the report's per-pod frame): their cost is unknown, not $0, and so is their cost per
    outcome. Empty when no cost source answered (then every cost is unknown, and says so)."""
    if not costs_known:
        return set()
    priced = set(pods.loc[pods["gpu_cost"].notna(), "service"].dropna())
    return {svc.spec.name for svc in services if svc.spec.name not in priced
            and ((svc.requests if svc.spec.kind == "serving" else svc.verified) or 0.0) > 0}


def _priced_note(what: str, figures: dict[str, Any], outcomes: float | None, unpriced: pd.DataFrame,
                 allocated_hours: float, basis: str, notes: list[str], kind: str, currency: str) -> bool:
    """The note on a priced row (``figures``: its money as shown) whose pods are partly ``unpriced`` (where they are
    ``material``, its cost per outcome is made unknown, and True), or which has a cost and no verified outcome.
    ``kind``: what its outcomes are (``serving`` requests or ``batch`` jobs), for the lower bound's unit; ``currency``:
    the ISO 4217 code the money is written in."""
    cost = figures[f"{basis}_cost"]
    if figures["cost_per_outcome"] is not None and not unpriced.empty:
        if material(unpriced, allocated_hours):
            notes.append(understated_note(what, unpriced, cost, outcomes, basis, kind, currency))
            figures["cost_per_outcome"] = None
            return True
        notes.append(left_out_note(what, unpriced, float(allocated_hours)))
    elif figures["cost_per_outcome"] is None and outcomes is not None and cost is not None:
        notes.append(f"{what}: {basis} cost {money(cost, currency=currency)}, {NO_OUTCOME}")
    return False


def tenant_note(name: str, figures: dict[str, Any], outcomes: float | None, dark: Sequence[str],
                unpriced: pd.DataFrame, allocated_hours: float, basis: str, notes: list[str],
                kind: str = "serving", currency: str = DEFAULT_CURRENCY) -> None:
    """The note on tenant ``name``'s row, its cost per outcome made unknown where it would be too low: ``dark``, its
    services in ``unpriced_services`` that have pods, count in its outcomes and not in its cost; ``unpriced``: the
    pods of ``unpriced_pods``, of every tenant. ``kind``: what its outcomes are, as its row prices them."""
    if dark and figures["cost_per_outcome"] is not None:
        figures["cost_per_outcome"] = None
        notes.append(f"tenant {name}: cost per outcome unknown: the cost of service {', '.join(dark)} is in no "
                     "total (none of its pods is in OpenCost's allocation)")
    else:
        _priced_note(f"tenant {name}", figures, outcomes, unpriced[unpriced["tenant"] == name], allocated_hours, basis,
                     notes, kind, currency)


def service_note(svc: ServiceTally, figures: dict[str, Any], dark: bool, pods: pd.DataFrame, unpriced: pd.DataFrame,
                 allocated_hours: float, basis: str, notes: list[str], currency: str = DEFAULT_CURRENCY) -> bool:
    """The note on ``svc``'s row; True where its cost per outcome is made unknown for pods of it that OpenCost does
    not list (``unpriced``: the pods of ``unpriced_pods``, of every service), so that its periods' are too. ``dark``:
    it is in ``unpriced_services`` (its cost unknown already), said with its pods' telemetry where ``pods`` (the
    report's per-pod frame) has any."""
    if dark:
        mine = pods[pods["service"] == svc.spec.name]
        if not mine.empty:
            seen = float(mine["observed_h"].fillna(0.0).sum())
            notes.append(f"service {svc.spec.name}: none of its pods ({seen:,.2f} GPU-hours of telemetry) is in "
                         f"OpenCost's allocation: its cost and cost per outcome are unknown, not {zero_money(currency)}")
        else:
            did = counted(round(num(svc.requests) or 0.0), "request" if svc.spec.kind == "serving" else "job")
            notes.append(f"service {svc.spec.name}: it served {did}, but no pod of it was found (by controller, pod "
                         "name or pod_labels) in OpenCost or the GPU telemetry: its cost and cost per outcome are "
                         f"unknown, not {zero_money(currency)} (its pods' cost is in its tenant's)")
        return False
    return _priced_note(f"service {svc.spec.name}", figures, svc.verified,
                        unpriced[unpriced["service"] == svc.spec.name], allocated_hours, basis, notes, svc.spec.kind,
                        currency)
