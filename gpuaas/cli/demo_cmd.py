"""``gpuaas demo``: the main job on the embedded cluster, for someone with no cluster and no GPU.

Starts the embedded cluster with the built-in scenario (a real Prometheus with hours of
backfilled history, the Kubernetes API with Kueue semantics, OpenCost), points the settings
at it, runs the same flows the scheduler runs — in dry-run, as a fresh install would — and
shows what they found. Stops everything on the way out.
"""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import typer

from gpuaas.cli._common import OutputFormat, console, err_console, fail, lead, settings_or_exit, usage_error
from gpuaas.cli._flows import run_flow
from gpuaas.cli._progress import progress
from gpuaas.cli._tables import print_table
from gpuaas.cli.collect_cmd import print_collect
from gpuaas.cli.reclaim_cmd import print_reclaim
from gpuaas.cluster.clock import MAX_HISTORY
from gpuaas.errors import GpuaasError
from gpuaas.policy import Policy
from gpuaas.settings import GpuaasSettings
from reports import verdict_phrase

DEMO_POLICY = Path(__file__).resolve().parents[1] / "cluster" / "scenarios" / "default-policy.yaml"


def _stored_snapshot(settings: GpuaasSettings, snapshot_id: int) -> tuple[dict[str, Any], Any]:
    """The summary and the snapshot the reclaim flow's collect step stored."""
    from gpuaas.store import load_snapshot, open_store

    store = open_store(settings)
    try:
        record = store.get_snapshot(snapshot_id)
        if record is None:
            raise fail(f"snapshot {snapshot_id} is not in the store")
        return record.summary, load_snapshot(store, snapshot_id)  # the flow ran here: its snapshot in memory
    finally:
        store.close()


def _idle_rows(snapshot: Any, policy: Policy) -> list[list[Any]]:
    from gpuaas.policies.reclaim import find_idle

    decisions = find_idle(snapshot.workloads, policy, snapshot.collected_at)
    order = {"idle": 0, "unknown": 1, "excluded": 2, "busy": 3}
    decisions = decisions.sort_values(["verdict", "gpus"], key=lambda s: s.map(order) if s.name == "verdict" else -s)
    rows = []
    for r in decisions.itertuples():
        owner = r.owner_name if isinstance(r.owner_name, str) else r.name
        tenant = r.tenant if isinstance(r.tenant, str) else ""
        activity = "" if pd.isna(r.activity_max) else f"{float(r.activity_max):.2f}"
        rows.append([r.kind, f"{r.namespace}/{owner}", tenant, f"{float(r.gpus):g}", activity, r.verdict,
                     verdict_phrase(r.verdict, r.reason, r.activity_max, r.threshold, r.idle_seconds)])
    return rows


def demo(
    scenario: Annotated[Path | None, typer.Option(help="Scenario YAML (default: the built-in one).")] = None,
    history: Annotated[str, typer.Option(help=(
        f"History to backfill into Prometheus; at most {MAX_HISTORY.days}d, what the embedded Prometheus "
        "keeps."))] = "6h",
    seed: Annotated[int, typer.Option(help="Same seed, same cluster.")] = 0,
) -> None:
    """Start the embedded cluster; run collect and reclaim, then rebalance (the quota plan per cohort, the GPUs that
    deadlines need counted in its demand), all in dry-run, then the cost report on it; show the results and stop
    the cluster."""
    from gpuaas.cluster.clock import ManualClock
    from gpuaas.cluster.runner import EmbeddedCluster
    from gpuaas.cluster.scenario import default_scenario, load_scenario, parse_duration

    if not os.environ.get("GPUAAS_POLICY_FILE"):
        os.environ["GPUAAS_POLICY_FILE"] = str(DEMO_POLICY)
    settings = settings_or_exit()
    try:
        window = parse_duration(history, maximum=MAX_HISTORY)
    except ValueError as exc:  # called wrong: exit 2, before anything starts
        raise usage_error(str(exc), "--history") from exc
    if not window:  # the cost report at the end needs some history: refused now, not after the flows ran
        raise usage_error("must be longer than 0s", "--history")
    try:
        chosen = load_scenario(scenario) if scenario else default_scenario()
    except (GpuaasError, ValueError) as exc:
        raise fail(str(exc)) from exc
    run_dir = settings.cluster_dir / "demo"
    shutil.rmtree(run_dir, ignore_errors=True)
    # Each demo is a new cluster: its snapshots, audit rows and reports go to a data dir of its own, started
    # afresh, never to the deployment's database (which would refuse another cluster's history, and must not
    # hold a demo's rows).
    os.environ["GPUAAS_DATA_DIR"] = str(run_dir / "data")
    os.environ.pop("GPUAAS_DATABASE_URL", None)
    settings = settings_or_exit()
    # A clock that stands still at the end of the history (samples keep their own time): every step of the cycle
    # sees the same cluster at the same instant, so the same seed and history print the same figures.
    end = datetime.now(UTC).replace(second=0, microsecond=0)
    cluster = EmbeddedCluster(chosen, run_dir / "cluster", seed=seed, history=window, clock=ManualClock(end - window))
    try:
        with progress("starting the embedded cluster") as update:
            cluster._progress = update
            cluster.start()
        err_console.print(
            f"embedded cluster up: scenario {chosen.name!r}, {window} of history; API {cluster.api_url}, "
            f"Prometheus {cluster.prometheus_url}, OpenCost {cluster.opencost_url}",
            highlight=False,
        )
        os.environ.update(cluster.settings_env())
        at = cluster.clock.now()
        from flows.reclaim import reclaim as reclaim_flow

        result = run_flow(reclaim_flow, "reclaim (dry-run): collecting a snapshot and deciding", at=at)
        summary, snapshot = _stored_snapshot(settings, result["snapshot_id"])
        # The same renderers as `gpuaas collect` and `gpuaas reclaim`: the same words and counts.
        print_reclaim(result)
        print_collect(summary)
        print_table(
            "GPU workloads: idle detection",
            ["kind", "workload", "tenant", "GPUs", "max activity", "verdict", "why"],
            _idle_rows(snapshot, settings.policy), optional=("tenant", "kind"), notes=("why",),
        )
        console.print(f"Audit log: GPUAAS_DATA_DIR={settings.data_dir} gpuaas audit list (the demo's own database, "
                      "started afresh with each demo).", highlight=False, soft_wrap=True)
        _rebalance(at)
        _cost_report(window, at)
    finally:
        cluster.stop()


def _rebalance(at: datetime) -> None:
    """The nightly rebalance in dry-run: the quota plan per cohort, its demand including what the deadline plans
    need; nothing is patched."""
    from flows.rebalance import rebalance as rebalance_flow
    from gpuaas.cli.rebalance_cmd import print_rebalance

    result = run_flow(rebalance_flow, "rebalance (dry-run): the quota plan, deadlines in its demand", apply=False,
                      at=at)
    lead(result, OutputFormat.table)
    print_rebalance(result)


def _cost_report(window: Any, at: datetime) -> None:
    """The last step of the cycle: cost per verified outcome over the backfilled history."""
    from flows.cost_report import cost_report as cost_report_flow
    from gpuaas.cli.cost_report_cmd import print_cost_tables

    doc = run_flow(cost_report_flow, "cost report: funnel, verified outcomes, waste",
                   window=f"{int(window.total_seconds())}s", at=at, compare=False)
    print_cost_tables(doc)
    console.print(f"HTML report (plots, open it in a browser): {doc['report']}", highlight=False, soft_wrap=True)
