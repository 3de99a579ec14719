"""``gpuaas capacity SWEEP.csv``: the sustainable request rate of a measured sweep.

Semantics are :func:`gpuaas.policies.cost.capacity.sustainable_capacity`'s. Exit 0 with an answer;
exit 1 when the sweep never meets the SLO (the answer is still printed, saying so) or the
file is malformed (one line naming row and column on stderr); exit 2 for a flag's value it refuses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpuaas._json_safe import json_safe
from gpuaas.cli._common import OutputFormat, fail, flag_error, lead, print_json
from gpuaas.cli._tables import print_table
from gpuaas.errors import ConfigError
from gpuaas.policies.cost import CapacityResult, sustainable_capacity
from gpuaas.sources.sweep import read_sweep
from reports.capacity import capacity_headline, capacity_summary_rows, step_rows

__all__ = ["capacity", "print_capacity"]


def print_capacity(result: CapacityResult, format: OutputFormat) -> None:
    """The same rows for people and scripts, after the headline (stdout above the tables, stderr beside the JSON,
    which carries it too); stderr says so when the SLO is never met."""
    data = result.to_dict()
    data["headline"] = capacity_headline(data)
    lead(data, format)
    if format is OutputFormat.json:
        print_json(json_safe(data))  # strict JSON: a step with no answer (latency inf) is null, not Infinity
    else:
        rows = step_rows(result)
        print_table("Measured rates", list(rows[0]), [list(r.values()) for r in rows])
        summary = capacity_summary_rows(result)
        print_table("Sustainable capacity", ["", "value"], [list(r.values()) for r in summary])


def capacity(
    sweep: Annotated[Path, typer.Argument(help="CSV, one row per rate: rate_rps, replicas, gpus, latency_p95_s, ...")],
    slo_seconds: Annotated[float, typer.Option("--slo-seconds", help="Latency target at that quantile.")],
    slo_quantile: Annotated[str, typer.Option("--slo-quantile", help="p50 | p95 | p99")] = "p95",
    min_quality: Annotated[float | None, typer.Option("--min-quality", help="Floor of the quality column (0..1).")] = None,
    forecast_rps: Annotated[float | None, typer.Option("--forecast-rps", help="Expected demand: sizes replicas and GPUs.")] = None,
    format: Annotated[OutputFormat, typer.Option("--format", help="Output format.")] = OutputFormat.table,
) -> None:
    """The highest measured rate where the SLO and the quality floor hold there and at every lower rate."""
    try:
        result = sustainable_capacity(read_sweep(sweep), slo_quantile=slo_quantile, slo_seconds=slo_seconds,
                                      min_quality=min_quality, forecast_rps=forecast_rps, source=str(sweep))
    except ConfigError as exc:  # a flag's value: exit 2; the sweep file: exit 1
        raise flag_error(exc) from exc
    print_capacity(result, format)
    if not result.met:
        raise fail(f"{sweep}: {result.reason}")
