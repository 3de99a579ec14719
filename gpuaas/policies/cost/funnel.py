"""The GPU-hour funnel: allocated -> busy -> productive, and what the idle part cost. Pure.

Per pod, over a window:

* **allocated**: GPU-hours the pod held (OpenCost's ``gpuHours``: requested GPUs x hours, the
  figure it charges for), exactly, for every pod OpenCost lists: DCGM's hours of such a pod are
  clamped to it (a pod's last sample step can fall after OpenCost's end of it, and a per-pod
  maximum of the two would add that step for every pod that finished). For a pod OpenCost does not
  list, one it lists with 0 GPU-hours (OpenCost counts ``nvidia.com/gpu`` only, so a MIG slice or a
  time-sliced ``nvidia.com/gpu.shared`` is no GPU to it: clamping to its 0 would drop hours the GPUs
  were seen held), and without OpenCost, the hours DCGM saw the pod's GPUs, and for a tenant at least
  what Kueue counted as used quota.
* **observed**: GPU-hours with telemetry (dcgm samples x the sample interval). The rest of the
  allocation is **unknown**: no telemetry is not evidence of idleness, so it is neither idle nor
  busy, and its cost is not counted as waste.
* **busy**: observed GPU-hours with activity above the policy's threshold.
* **productive**: busy GPU-hours times the share of the workload's work that was a verified
  outcome (for a service, verified requests / finished requests; for a batch job, 1 for the pods
  of the attempt that finished successfully in time, else 0).
* **in progress**: busy GPU-hours of a batch job still running at the end of the window: its
  outcome is not known yet, so they are neither productive nor unproductive.
* **active**: GPU-hours weighted by the activity ratio (a GPU at 6 % activity for an hour is
  0.06 active GPU-hours but a whole busy one): the effective utilisation beside the thresholded
  busy hours.
* **waste** = idle GPU-hours (observed, not busy) x the pod's GPU cost per allocated GPU-hour.

Money comes in two named columns: ``gpu_cost`` (the GPUs' share) and ``total_cost`` (everything
the cost source charges the pod: GPU, CPU, RAM). It is None (unknown) when the cost source did not
answer: never 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from gpuaas.policies.cost._counts import largest_remainder

__all__ = ["FUNNEL_COLUMNS", "FUNNEL_STAGES", "MONEY_COLUMNS", "POD_COLUMNS", "aggregate_funnel", "funnel_stages",
           "pod_funnel", "stages_in_tenths"]

POD_COLUMNS = ["namespace", "pod", "workload", "tenant", "allocated_h", "observed_h", "busy_h", "active_h",
               "gpu_cost", "total_cost", "share", "in_progress"]
MONEY_COLUMNS = ["gpu_cost", "total_cost", "waste_cost"]
FUNNEL_STAGES = ("productive", "in progress", "busy, no verified outcome", "busy, outcome unknown", "idle",
                 "unknown (no telemetry)")
"""The stages a row's allocated GPU-hours are split into, in order: each GPU-hour is in exactly one."""
FUNNEL_COLUMNS = ["allocated_gpu_hours", "busy_gpu_hours", "productive_gpu_hours", "in_progress_gpu_hours",
                  "unknown_gpu_hours", "idle_gpu_hours", "active_gpu_hours", *MONEY_COLUMNS]


def pod_funnel(pods: pd.DataFrame, costs_known: bool) -> pd.DataFrame:
    """Funnel columns per pod row (``POD_COLUMNS`` in); hours are clamped so each stage fits in the one before."""
    out = pods.copy()
    observed = out["observed_h"].astype(float).fillna(0.0)
    opencost = out["allocated_h"].astype(float)
    # OpenCost's hours where it lists the pod with GPUs; a pod it missed, one it lists with none (it counts
    # nvidia.com/gpu only: a MIG slice or a time-sliced GPU is 0 there), or no OpenCost: what DCGM saw
    allocated = opencost.where(opencost > 0, observed)
    observed = np.minimum(observed, allocated)
    busy = np.minimum(out["busy_h"].astype(float).fillna(0.0), observed)
    running = out["in_progress"].fillna(False).astype(bool)
    out["allocated_gpu_hours"] = allocated
    out["unknown_gpu_hours"] = allocated - observed
    out["busy_gpu_hours"] = busy
    out["idle_gpu_hours"] = observed - busy
    out["active_gpu_hours"] = np.minimum(out["active_h"].astype(float).fillna(0.0), observed)
    out["in_progress_gpu_hours"] = busy.where(running, 0.0)
    out["productive_gpu_hours"] = (busy * out["share"].astype(float).fillna(0.0).clip(0.0, 1.0)).where(~running, 0.0)
    if costs_known:
        gpu_cost = out["gpu_cost"].astype(float).fillna(0.0)
        price = gpu_cost / allocated.where(allocated > 0)
        out["gpu_cost"] = gpu_cost
        # OpenCost's total as it is, even below the GPU cost: a credit on CPU, RAM or another part
        # (``cpuCostAdjustment`` < 0) lowers it legitimately, and raising it to the GPU cost would bill the credit
        out["total_cost"] = out["total_cost"].astype(float).fillna(0.0)
        out["waste_cost"] = (out["idle_gpu_hours"] * price).fillna(0.0)
    else:
        out[MONEY_COLUMNS] = np.nan
    return out


def aggregate_funnel(frame: pd.DataFrame, by: Sequence[str], costs_known: bool) -> pd.DataFrame:
    """Sum the funnel per group; money stays NaN (unknown) when costs are unknown."""
    sums = frame.groupby(list(by), as_index=False, dropna=False)[FUNNEL_COLUMNS].sum(min_count=1)
    hours = [c for c in FUNNEL_COLUMNS if c.endswith("_hours")]
    sums[hours] = sums[hours].fillna(0.0)
    if not costs_known:
        sums[MONEY_COLUMNS] = np.nan
    return sums


def funnel_stages(row: Mapping[str, Any]) -> dict[str, float]:
    """A report row's (tenant's, service's, the cluster's) allocated GPU-hours split into ``FUNNEL_STAGES``,
    adding up to them: what a plot of the funnel draws, so that it shows what the tables say.

    Busy hours whose outcome is unknown (productive or in-progress hours None: batch outcomes without the
    Kubernetes API, requests served without a latency histogram) are "busy, outcome unknown", never "busy, no
    verified outcome" (which would call them waste) nor productive; what is known (in-progress hours) stays
    its own stage. Hours without telemetry (the row's busy and idle hours None, or its
    ``unknown_gpu_hours``) are "unknown (no telemetry)"."""
    allocated = float(row.get("allocated_gpu_hours") or 0.0)
    busy, idle = row.get("busy_gpu_hours"), row.get("idle_gpu_hours")
    if busy is None or idle is None:  # no telemetry for the row: nothing is known but what it held
        return {**dict.fromkeys(FUNNEL_STAGES, 0.0), FUNNEL_STAGES[-1]: allocated}
    productive, running = row.get("productive_gpu_hours"), row.get("in_progress_gpu_hours")
    known = float(productive or 0.0) + float(running or 0.0)
    rest = max(float(busy) - known, 0.0)
    outcome_known = productive is not None and running is not None
    stages = [float(productive or 0.0), float(running or 0.0), rest if outcome_known else 0.0,
              0.0 if outcome_known else rest, float(idle)]
    unknown = row.get("unknown_gpu_hours")
    stages.append(float(unknown) if unknown is not None else max(allocated - sum(stages), 0.0))
    return dict(zip(FUNNEL_STAGES, stages, strict=True))


def stages_in_tenths(row: Mapping[str, Any]) -> dict[str, float]:
    """``funnel_stages(row)`` in tenths of a GPU-hour that add up to the row's allocated hours in tenths (the
    largest-remainder rule, as for money): 3.35 + 3.35 + 3.3 are 3.4, 3.3 and 3.3 under 10.0, never 3.4 + 3.4 +
    3.3, so a table that prints them foots."""
    allocated = round(float(row.get("allocated_gpu_hours") or 0.0) * 10)
    tenths = largest_remainder({k: round(v * 10, 6) for k, v in funnel_stages(row).items()}, allocated)
    return {k: v / 10 for k, v in tenths.items()}
