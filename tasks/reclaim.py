"""Tasks of the reclaim flow around ``gpuaas.operations.reclaim``: load the snapshot, verdicts, recover, decide, act, publish."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import pandas as pd

from gpuaas.actions import ActionResult, Settled, UndoResult, settled_writes
from gpuaas.errors import ActionRefused, ConfigError, NotStored
from gpuaas.models import Snapshot
from gpuaas.operations import incident
from gpuaas.operations import reclaim as operation
from gpuaas.policy import FreezeOn, Mode
from gpuaas.pushgateway import delete_metrics, push_metrics
from gpuaas.settings import GpuaasSettings
from gpuaas.store import load_snapshot as stored_snapshot
from gpuaas.store import open_store
from reports.reclaim import decision_rows, idle_metrics, summary_markdown, undo_markdown
from tasks._artifacts import markdown_artifact, summary_artifact, table_artifact
from tasks._options import current_run_id, gpuaas_task, retry_unless_misconfigured
from tasks.writes import store_and_writer

__all__ = ["IDLE_JOB", "act", "check_undo_ids", "decide", "find_idle_workloads", "load_snapshot", "no_audit_rows",
           "publish_reclaim_artifacts", "publish_undo_artifact", "push_idle_metrics", "recover", "undo_actions",
           "withdraw_idle_metrics"]



@gpuaas_task("load-snapshot", retries=2, retry_delay_seconds=2, retry_condition_fn=retry_unless_misconfigured)
def load_snapshot(settings: GpuaasSettings, snapshot_id: int) -> Snapshot:
    """The collect subflow's snapshot, handed over in memory (``gpuaas.store.load_snapshot``)."""
    with open_store(settings) as store:
        try:
            return stored_snapshot(store, snapshot_id)
        except NotStored as exc:  # a database busy for a moment is a StoreError too, and is tried again
            raise ActionRefused(str(exc)) from exc


@gpuaas_task("find-idle")
def find_idle_workloads(settings: GpuaasSettings, snapshot: Snapshot,
                        adaptive: pd.DataFrame | None = None) -> pd.DataFrame:
    """Idle verdicts; the rows of an adaptive rule are decided again from ``adaptive`` (their history)."""
    return operation.verdicts(snapshot, settings.policy, adaptive)


@gpuaas_task("recover", timeout_seconds=600)
def recover(settings: GpuaasSettings, now: datetime) -> list[Settled]:
    """Close the intents a killed run left open (apply mode, before deciding: it changes what is decided)."""
    with store_and_writer(settings) as (store, writer):
        return settled_writes(operation.recover(store, writer, flow_run_id=current_run_id(), now=now),
                              store.get_audit)


@gpuaas_task("decide")
def decide(settings: GpuaasSettings, snapshot: Snapshot, idle: pd.DataFrame, mode: Mode, now: datetime,
           wall_clock: datetime) -> operation.ReclaimPlan:
    """The whole decision (targets, the audit log's answer for this window, the cap), written nowhere yet."""
    with open_store(settings) as store:
        return operation.decide(snapshot, idle, settings.policy, mode, store, now=now, wall_clock=wall_clock,
                               policy_file=settings.policy_file_name)


@gpuaas_task("act", timeout_seconds=600)
def act(settings: GpuaasSettings, plan: operation.ReclaimPlan, now: datetime) -> list[ActionResult]:
    """Audit every decision and act on the targets. Not retried: a retry of a half-done action is exactly
    what the audit log and the recovery guard against."""
    with store_and_writer(settings, deciding=True) as (store, writer):
        return operation.apply(plan, store, writer, flow_run_id=current_run_id(), now=now)


def no_audit_rows(missing: Sequence[int]) -> str:
    """The refusal of an undo of ids that name no audit row, as ``gpuaas undo`` and the reclaim flow both say it."""
    return f"no audit row {', '.join(f'#{i}' for i in missing)} (see `gpuaas audit list`); nothing undone"


@gpuaas_task("check-undo-ids")
def check_undo_ids(settings: GpuaasSettings, audit_ids: Sequence[int]) -> None:
    """Every id names an audit row, or a ``ConfigError`` naming the missing ones, before anything is undone: an undo
    of an id that names nothing must end Failed, as an incident review's does, not Completed with a skipped row
    (a mistyped id in a deployment's parameters would read as done)."""
    with open_store(settings, read_only=True) as store:
        missing = incident.missing_audit_ids(store, audit_ids)
    if missing:
        raise ConfigError(no_audit_rows(missing), field="undo")


@gpuaas_task("undo", timeout_seconds=600)
def undo_actions(settings: GpuaasSettings, audit_ids: list[int]) -> list[UndoResult]:
    """The undo of ``gpuaas undo`` and of an incident review (``gpuaas.operations.incident.undo``)."""
    with store_and_writer(settings) as (store, writer):
        return incident.undo(store, writer, audit_ids, flow_run_id=current_run_id())


@gpuaas_task("publish-undo-artifact")
def publish_undo_artifact(restores: list[UndoResult]) -> None:
    """What became of each audit id asked for, on the run's page: the rows its headline tells one to see."""
    summary_artifact(key="gpuaas-undo", markdown=undo_markdown(restores))


@gpuaas_task("publish-artifacts")
def publish_reclaim_artifacts(results: list[ActionResult], snapshot: Snapshot, mode: Mode, cap: int,
                              frozen: FreezeOn | None = None, settled: Sequence[Settled] = ()) -> None:
    rows = decision_rows(results)
    if rows:
        table_artifact(key="gpuaas-reclaim-decisions", table=rows,
                       description=f"Reclaim decisions ({mode.value}), most wasteful first")
    else:  # not a one-row table of placeholders: say why there is nothing
        markdown_artifact(key="gpuaas-reclaim-decisions", markdown="No reclaim decisions this run.\n",
                          description=f"Reclaim decisions ({mode.value})")
    summary_artifact(key="gpuaas-reclaim-summary", markdown=summary_markdown(results, snapshot, mode.value, cap,
                                                                                          frozen=frozen, settled=settled))


IDLE_JOB = "gpuaas_reclaim"


@gpuaas_task("push-idle-metrics", io=True)
def push_idle_metrics(settings: GpuaasSettings, idle: pd.DataFrame, mode: Mode = Mode.dry_run,
                      evidence_at: datetime | None = None) -> int:
    """Replace the idle signal with this run's verdicts (only where it may act) and their instant."""
    return push_metrics(settings, IDLE_JOB, idle_metrics(idle, mode=mode.value, evidence_at=evidence_at))


@gpuaas_task("withdraw-idle-metrics", io=True)
def withdraw_idle_metrics(settings: GpuaasSettings) -> None:
    """Delete the idle signal a previous run published: this run cannot vouch for it."""
    delete_metrics(settings, IDLE_JOB)
