"""``gpuaas collect``: run the collect flow once, now, and print its summary."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from gpuaas.cli._common import OutputFormat, console, print_json, print_table, settings_or_exit
from gpuaas.cli._flows import run_flow


def collect(
    format: Annotated[OutputFormat, typer.Option("--format", help="Output format.")] = OutputFormat.table,
) -> None:
    """Collect one snapshot from whatever the settings point at, store it and print its summary."""
    settings_or_exit()  # fail fast, before Prefect starts, on a broken configuration
    from flows.collect import collect as collect_flow

    summary: dict[str, Any] = run_flow(collect_flow, "collecting a snapshot")
    if format is OutputFormat.json:
        print_json({k: summary[k] for k in ("queues", "sources", "workloads", "unknown_telemetry")}
                   | {"snapshot_id": summary["snapshot_id"], "idle_candidates": summary["idle_candidates"]})
        return
    from reports.collect import backlog_rows

    rows = backlog_rows(summary)
    print_table("Kueue backlog per ClusterQueue", list(rows[0]) if rows else ["queue"],
                [list(r.values()) for r in rows])
    print_table(
        "Data quality",
        ["source", "ok", "latency s", "staleness s"],
        [[n, "yes" if s["ok"] else "NO", f"{s['latency_s']:.3f}",
          "-" if s["staleness_s"] is None else f"{s['staleness_s']:.0f}"] for n, s in summary["sources"].items()],
    )
    console.print(
        f"snapshot {summary['snapshot_id']}: {summary['workloads']} workloads, "
        f"{summary['unknown_telemetry']} with incomplete telemetry, {summary['idle_candidates']} idle candidates",
        highlight=False,
    )
