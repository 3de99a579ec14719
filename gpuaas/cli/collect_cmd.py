"""``gpuaas collect``: run the collect flow once, now, and print its summary.

The table is built here rather than with the generic ``print_table`` because its numbers
must line up (right-aligned, ``6`` not ``6.0``) and the queue names must never be cut: an
operator reads this after an incident, often in an 80-column terminal.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from gpuaas.cli._common import OutputFormat, console, end_degraded, lead, print_json, settings_or_exit
from gpuaas.cli._flows import run_flow
from gpuaas.cli._tables import print_table

SUMMARY_KEYS = ("queues", "sources", "workloads", "unknown_telemetry", "unjudged", "unjudged_count", "notes", "cluster")
DECISION_KEYS = ("snapshot_id", "idle_candidates", "degraded", "source_errors", "blind", "headline")


def _print_backlog(summary: dict[str, Any]) -> None:
    """The backlog per ClusterQueue, through ``print_table``: at any width no number or name is cut."""
    from reports import gpus
    from reports.collect import backlog_rows

    rows = [[row["queue"], row["cohort"], str(row["pending workloads"]), gpus(row["pending GPUs"]),
             row["oldest pending"], gpus(row["admitted GPUs"]), gpus(row["nominal GPUs"])]
            for row in backlog_rows(summary)]
    print_table("Kueue backlog per ClusterQueue (GPUs summed over GPU resources and flavors)",
                ["queue", "cohort", "pending", "pending GPUs", "oldest pending", "admitted GPUs", "nominal GPUs"],
                rows, optional=("cohort", "admitted GPUs"))


def _print_quality(summary: dict[str, Any]) -> None:
    """Per source: answered, latency, staleness, and why not (under the table when it does not fit: a URL is one word)."""
    rows = []
    for name, status in summary["sources"].items():
        staleness = status["staleness_s"]
        answered = "yes" if status["ok"] else "no" if status.get("required", True) else "no (optional)"
        rows.append([name, answered, f"{status['latency_s']:.2f}", "-" if staleness is None else f"{staleness:.0f}",
                     "" if status["ok"] else status.get("error") or ""])
    print_table("Data quality per source", ["source", "answered", "latency s", "staleness s", "why not"], rows,
                notes=("why not",))


def collect(
    format: Annotated[OutputFormat, typer.Option("--format", help="Output format.")] = OutputFormat.table,
) -> None:
    """Collect one snapshot from whatever the settings point at, store it and print its summary."""
    settings_or_exit()  # fail fast, before Prefect starts, on a broken configuration
    summary: dict[str, Any] = run_flow("flows.collect:collect", "collecting a snapshot")
    lead(summary, format)
    if format is OutputFormat.json:
        print_json({k: summary[k] for k in SUMMARY_KEYS} | {k: summary.get(k) for k in DECISION_KEYS})
    else:
        print_collect(summary)
    end_degraded(summary)


def _print_unjudged(summary: dict[str, Any]) -> None:
    """The GPU workloads the reclaim policy cannot judge, each with what it lacks: they hold GPUs unwatched."""
    from reports import counted, gpus

    listed, count = summary.get("unjudged") or [], int(summary.get("unjudged_count") or 0)
    if not count:
        return
    more = f" (the {len(listed)} with the most GPUs listed)" if count > len(listed) else ""
    console.print(f"{counted(count, 'GPU workload')} gpuaas cannot judge, so never reclaims{more}:", highlight=False)
    print_table("", ["workload", "GPUs", "why"], [[u["workload"], gpus(u["gpus"]), u["why"]] for u in listed],
                notes=("why",))


def _print_notes(summary: dict[str, Any]) -> None:
    """What gpuaas reads but cannot act on (accelerators it does not manage, a missing ClusterQueue): under the
    backlog, whose rows leave that capacity and work out."""
    for note in summary.get("notes") or ():
        console.print(f"Note: {note}.", highlight=False, markup=False)


def print_collect(summary: dict[str, Any]) -> None:
    """The backlog, what it leaves out, the data quality and the workloads nobody can judge of a snapshot (also the
    demo's)."""
    _print_backlog(summary)
    _print_notes(summary)
    _print_quality(summary)
    _print_unjudged(summary)
