"""``gpuaas replay``: replay reclaim policies on a recorded GPU duty-cycle trace.

Why on the command line: choosing a reclaim window is a trade between GPU-hours and cold
starts, and the trade should be read off real data before a policy file changes. The
semantics are those of :mod:`gpuaas.policies.replay`.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from gpuaas.cli._common import OutputFormat, fail, print_json, print_table
from gpuaas.cli.replay_rebalance_cmd import rebalance
from gpuaas.errors import ConfigError
from gpuaas.policies.adaptive_window import AdaptiveWindow
from gpuaas.policies.replay import ReplayResult, fixed_windows, replay_windows
from gpuaas.sources.traces import load_qps, load_utilization

__all__ = ["app"]

app = typer.Typer(help="Replay policies on recorded traces.", no_args_is_help=True)


@app.callback()
def _group() -> None:
    """Replay policies on recorded traces (a group, so that ``reclaim`` keeps its name)."""


class DutyUnit(str, Enum):
    auto = "auto"
    percent = "percent"
    fraction = "fraction"


_COLUMNS = (
    "policy",
    "window_min",
    "pods",
    "observed_gpu_hours",
    "reclaimed_gpu_hours",
    "wakeups",
    "bound_gpu_hours",
    "reclaims",
    "gap_resumes",
    "never_woke",
)


def _row(result: ReplayResult) -> list[Any]:
    data = result.to_dict()
    return [round(v, 2) if isinstance(v, float) else v for v in (data[c] for c in _COLUMNS)]


@app.command("reclaim")
def reclaim(
    utilization: Annotated[
        list[Path],
        typer.Option("--utilization", help="Duty-cycle CSV; repeat for part files (concatenated)."),
    ],
    qps: Annotated[Path | None, typer.Option("--qps", help="Request-rate CSV (optional).")] = None,
    window: Annotated[
        float, typer.Option("--window", min=0.0, help="Idle window in minutes (the base window).")
    ] = 30.0,
    threshold: Annotated[
        float, typer.Option("--threshold", min=0.0, max=100.0, help="Idle when duty cycle <= this %.")
    ] = 5.0,
    adaptive: Annotated[
        bool, typer.Option("--adaptive", help="Per-pod adaptive window instead of the fixed rule.")
    ] = False,
    unit: Annotated[DutyUnit, typer.Option("--unit", help="Duty-cycle unit in the CSV.")] = DutyUnit.auto,
    format: Annotated[OutputFormat, typer.Option("--format", help="Output format.")] = OutputFormat.table,
) -> None:
    """Replay a reclaim policy causally; print GPU-hours reclaimed, wake-ups and the bound."""
    try:
        util = load_utilization(utilization, unit=unit.value)
        rates = load_qps(qps) if qps is not None else None
    except ConfigError as exc:
        raise fail(str(exc)) from exc
    base_s = window * 60.0
    fixed = replay_windows(
        util, fixed_windows(base_s), name="fixed", qps=rates, window_min=window, threshold=threshold
    )
    results = [fixed]
    if adaptive:
        policy = AdaptiveWindow(base_s=base_s)
        results.append(
            replay_windows(util, policy, name="adaptive", qps=rates, window_min=window, threshold=threshold)
        )
    chosen = results[-1]
    if format is OutputFormat.json:
        data = chosen.to_dict()
        if adaptive:
            data["fixed"] = fixed.to_dict()
        print_json(data)
        return
    print_table(f"Reclaim replay, idle <= {threshold:g} %", _COLUMNS, [_row(r) for r in results])


app.command("rebalance")(rebalance)
