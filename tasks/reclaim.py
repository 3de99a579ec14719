"""Tasks of the reclaim flow: load the snapshot, decide (pure), lock, act, publish."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pandas as pd

from gpuaas.actions import (
    ActionResult,
    UndoResult,
    already_decided,
    execute_decisions,
    recently_restored,
    recover_interrupted,
    undo_entries,
)
from gpuaas.errors import ActionRefused, StoreError
from gpuaas.models import Outcome, Snapshot
from gpuaas.policies.reclaim import Decision, GpuEvidence, apply_adaptive, finalize_decisions, find_idle, plan_reclaim
from gpuaas.policy import Mode
from gpuaas.pushgateway import delete_metrics, push_metrics
from gpuaas.settings import GpuaasSettings
from gpuaas.store import load_snapshot as stored_snapshot
from gpuaas.store import open_store
from reports.reclaim import decision_rows, idle_metrics, summary_markdown
from tasks._artifacts import markdown_artifact, summary_artifact, table_artifact
from tasks._options import current_run_id, gpuaas_task
from tasks.writes import store_and_writer

__all__ = ["IDLE_JOB", "act", "decide", "find_idle_workloads", "load_snapshot", "publish_reclaim_artifacts",
           "push_idle_metrics", "undo_actions", "withdraw_idle_metrics"]



@gpuaas_task("load-snapshot", retries=2, retry_delay_seconds=2)
def load_snapshot(settings: GpuaasSettings, snapshot_id: int) -> Snapshot:
    """The collect subflow's snapshot, handed over in memory (``gpuaas.store.load_snapshot``)."""
    with open_store(settings) as store:
        try:
            return stored_snapshot(store, snapshot_id)
        except StoreError as exc:
            raise ActionRefused(str(exc)) from exc


@gpuaas_task("find-idle")
def find_idle_workloads(settings: GpuaasSettings, snapshot: Snapshot,
                        adaptive: pd.DataFrame | None = None) -> pd.DataFrame:
    """Idle verdicts; the rows of an adaptive rule are decided again from ``adaptive`` (their history)."""
    return apply_adaptive(find_idle(snapshot.workloads, settings.policy, snapshot.collected_at), adaptive)


@gpuaas_task("decide")
def decide(settings: GpuaasSettings, snapshot: Snapshot, idle: pd.DataFrame, mode: Mode,
           wall_clock: datetime) -> list[Decision]:
    """Pure decisions plus per-GPU evidence; the audit log's answer comes in ``act``."""
    out = []
    evidence = GpuEvidence(snapshot.gpus)
    for d in plan_reclaim(snapshot, idle, settings.policy, mode, wall_clock):
        window = d.evidence.get("base_window_minutes") or d.evidence["window_minutes"]
        per_gpu = evidence.of(d.namespace, d.name, window)
        out.append(replace(d, evidence={**d.evidence, "gpus": per_gpu}))
    return out


@gpuaas_task("act", timeout_seconds=600)
def act(settings: GpuaasSettings, decisions: list[Decision], mode: Mode, now: datetime) -> list[ActionResult]:
    """Recover interrupted actions (apply), skip what was decided or just restored, cap, then audit and act. Not retried:
    a retry of a half-done action is exactly what the audit log and the recovery step guard against."""
    with store_and_writer(settings) as (store, writer):
        if mode is Mode.apply:
            recover_interrupted(store, writer, flow_run_id=current_run_id(), now=now)
        decided = already_decided(store, [d.idempotency_key for d in decisions if d.outcome == Outcome.planned])
        longest = max((float(d.evidence.get("window_minutes") or 0) for d in decisions), default=0.0)
        restored = recently_restored(store, now - timedelta(minutes=longest))
        final = finalize_decisions(decisions, decided, settings.policy.reclaim.max_actions_per_run,
                                   restored, now)
        return execute_decisions(final, store, writer, mode=mode, flow_run_id=current_run_id(), now=now)


@gpuaas_task("undo", timeout_seconds=600)
def undo_actions(settings: GpuaasSettings, audit_ids: list[int]) -> list[UndoResult]:
    with store_and_writer(settings) as (store, writer):
        return undo_entries(store, writer, audit_ids, flow_run_id=current_run_id())


@gpuaas_task("publish-artifacts")
def publish_reclaim_artifacts(results: list[ActionResult], snapshot: Snapshot, mode: Mode, cap: int,
                              busy: str | None = None) -> None:
    rows = decision_rows(results)
    if rows:
        table_artifact(key="gpuaas-reclaim-decisions", table=rows,
                              description=f"Reclaim decisions ({mode.value}), most wasteful first")
    else:  # not a one-row table of placeholders: say why there is nothing
        markdown_artifact(key="gpuaas-reclaim-decisions", markdown=(busy or "No reclaim decisions this run.")
                                 + "\n", description=f"Reclaim decisions ({mode.value})")
    summary_artifact(key="gpuaas-reclaim-summary", markdown=summary_markdown(results, snapshot, mode.value, cap, busy=busy))


IDLE_JOB = "gpuaas_reclaim"


@gpuaas_task("push-idle-metrics", io=True)
def push_idle_metrics(settings: GpuaasSettings, idle: pd.DataFrame, mode: Mode = Mode.dry_run,
                      evidence_at: datetime | None = None) -> int:
    """Replace the idle signal with this run's verdicts (only where it may act) and their instant."""
    assert settings.pushgateway_url
    return push_metrics(settings.pushgateway_url, IDLE_JOB, idle_metrics(idle, mode=mode.value, evidence_at=evidence_at),
                        timeout=settings.request_timeout_seconds)


@gpuaas_task("withdraw-idle-metrics", io=True)
def withdraw_idle_metrics(settings: GpuaasSettings) -> None:
    """Delete the idle signal a previous run published: this run cannot vouch for it."""
    assert settings.pushgateway_url
    delete_metrics(settings.pushgateway_url, IDLE_JOB, timeout=settings.request_timeout_seconds)
