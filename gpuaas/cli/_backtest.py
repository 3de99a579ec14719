"""What ``gpuaas replay reclaim`` needs beyond the trace replay: the fleet's own history and the frontier.

Why its own module: the replay command stays one screen, and these pieces (the history
pull with progress on stderr, the frontier table and its plot) are the backtest an
operator runs before switching reclaim to apply.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime, timedelta

import pandas as pd

from gpuaas.cli._common import OutputFormat, err_console, lead, print_json
from gpuaas.cli._tables import print_table
from gpuaas.errors import ConfigError
from gpuaas.idle_history import read_fleet_history
from gpuaas.instant import utc_stamp
from gpuaas.policies.analysis import (
    CalibrationEvidence,
    FrontierRow,
    ceiling_ratios,
    frontier_headline,
    ratio_at_equal_wakeups,
)
from gpuaas.settings import GpuaasSettings

__all__ = ["FRONTIER_COLUMNS", "MAX_SINCE", "fleet_history", "print_frontier"]

MAX_SINCE = timedelta(days=90)
"""How far back ``--since`` may reach: 90 days, the longest history a Prometheus is commonly set to keep (its own
default is 15 days, an embedded cluster's 60; the live adaptive policy reads at most 31). Every
``--chunk-hours`` of the span is a range query whether the server still holds it or not, so 90 days is 2,160
queries at the default 1 h chunk and 21,600 at the smallest (0.1 h), where ``--since 0001-01-01`` would be
some 17.7 million."""

FRONTIER_COLUMNS = ("policy", "parameter", "GPU-hours reclaimed", "wake-ups", "vs fixed at equal wake-ups",
                    "headroom captured", "context ceiling", "wake-ups per workload-day")
"""The frontier table's headers, in words (``--format json`` keeps the field names)."""


def _progress(message: str) -> None:
    err_console.print(message, markup=False, highlight=False, soft_wrap=True)


def fleet_history(settings: GpuaasSettings, start: datetime, end: datetime, *, namespaces: Sequence[str],
                  threshold_pct: float, chunk_hours: float) -> tuple[pd.DataFrame, int, float]:
    """The fleet's idle runs per workload over ``[start, end]`` from Prometheus (progress on stderr):
    the run table with each workload's ``gpus``, the number of workloads and the observed GPU-seconds.

    A pod gpuaas cannot link to a Workload (gone, or not Kueue's) counts as one GPU."""
    if end <= start:
        raise ConfigError(f"--since must be in the past (got {utc_stamp(start)})", field="--since")
    if end - start > MAX_SINCE:  # the command refuses it first; here the request count is bounded for any caller
        raise ConfigError(f"at most {MAX_SINCE.days}d back (got {utc_stamp(start)})", field="--since")
    reading, links = read_fleet_history(settings, start, end, thresholds_pct=[threshold_pct],
                                        namespaces=namespaces, chunk_s=chunk_hours * 3600.0, progress=_progress)
    stream = reading.stream
    _progress(f"{reading.queries} range queries in {reading.seconds:.1f}s: {stream.samples:,} workload samples, "
              f"{stream.pods} workloads")
    weights = links.drop_duplicates(["namespace", "pod"]).groupby("workload")["gpus"].sum()
    runs = stream.runs()
    runs["gpus"] = runs["pod"].map(weights).fillna(1.0).to_numpy(dtype=float)
    return runs, stream.pods, stream.observed_weighted_s(weights)


def _parameter(row: FrontierRow) -> str:
    """The row's parameter with its unit: a window, a budget, or the fixed row a clairvoyant row is matched to."""
    if row.policy == "adaptive":
        return f"{row.parameter:g}/day"
    return f"{'at ' if row.policy == 'clairvoyant' else ''}{row.parameter:g} min"


def print_frontier(rows: Sequence[FrontierRow], evidence: CalibrationEvidence, fmt: OutputFormat,
                   title: str, *, headline: str | None = None) -> None:
    """The frontier table after its headline (on stderr), or both in one JSON object.

    ``headline``: the line that says why every row is 0, where it is (``reports.frontier.nothing_scored_headline``).
    It is the command's first line, as a replay's headline is (above the table, or on stderr beside the JSON), and
    it stands in for the comparison of the adaptive rows with the fixed ones, which have nothing to compare."""
    lead({"headline": headline}, fmt)
    if fmt is OutputFormat.json:
        print_json({"calibration": asdict(evidence), "frontier": [r.to_dict() for r in rows]})
        return
    for line in [evidence.describe()] if headline else frontier_headline(rows, evidence):
        _progress(line)
    ratios = {id(r): x for r, x in ratio_at_equal_wakeups(rows)}
    ceilings = ceiling_ratios(rows)
    table = []
    for r in rows:
        ratio = ratios.get(id(r))
        ceiling = ceilings.get(r.parameter) if r.policy == "adaptive" else None
        table.append([r.policy, _parameter(r), f"{r.reclaimed_gpu_hours:.1f}", r.wakeups,
                      "-" if ratio is None else f"{ratio:.2f}x",
                      "-" if r.headroom_captured is None else f"{r.headroom_captured:.0%}",
                      "-" if ceiling is None else f"{ceiling:.2f}x",
                      "-" if r.wakeups_per_workload_day is None else f"{r.wakeups_per_workload_day:.2f}"])
    print_table(title, FRONTIER_COLUMNS, table,  # left out first where the terminal is narrow: the diagnostics
                optional=("wake-ups per workload-day", "context ceiling", "headroom captured"))
