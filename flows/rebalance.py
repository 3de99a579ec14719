"""The rebalance flow (nightly, and on demand): move nominal GPU quota inside each cohort toward demand.

Collect (the collect flow as a subflow: a fresh snapshot, stored, loaded by id), plan the deadlines
(their GPUs per queue are part of the demand), read the per-queue history (one Prometheus query),
plan the quotas per cohort and apply them (``gpuaas.operations.rebalance``: ``plan`` is pure,
HiGHS; ``apply`` writes in apply mode only), publish (artifacts, Pushgateway). In apply mode the
store lock ``cluster-writes``, which reclaim takes too, is held around collect, plan and apply:
the two never write at the same time, and never on a snapshot the other has outdated. A plan
whose queues changed since it was made is recomputed once from a fresh snapshot, never forced; a
degraded snapshot or missing history is planned and never applied; while a tenant of the policy names a
ClusterQueue the cluster lacks an apply run writes nothing, its headline says which and it ends Failed.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from datetime import UTC, datetime
from typing import Any

import pandas as pd
from prefect import flow, get_run_logger

from flows._hooks import FLOW_HOOKS
from flows._instant import UtcInstant, decision_instant
from flows._outcome import busy_outcome, failed, finished, freeze_dict
from flows._snapshot import snapshot_for
from gpuaas.actions import new_holder
from gpuaas.models import Outcome, Snapshot
from gpuaas.operations.rebalance import RebalancePlan, degraded_reason, history_window
from gpuaas.policies.deadlines import PoolPlan
from gpuaas.policy import Mode, WritingFlow
from gpuaas.settings import GpuaasSettings, load_settings
from gpuaas.sources.queue_history import HISTORY_COLUMNS
from reports import counted, kube_unread, source_errors, with_failures
from reports.rebalance import NAMED_BEFORE, first_line, outcome_dicts
from tasks import push_or_warn, retry_options, unwalked
from tasks.deadlines import plan_deadlines, read_recorded_holds
from tasks.rebalance import (
    apply_rebalance,
    plan_rebalance,
    publish_rebalance_artifacts,
    push_rebalance_metrics,
    read_audit_view,
    read_history,
)
from tasks.writes import WritesBusy
from tasks.writes import cluster_writes as _writes_lock  # the Prefect slot + store lock reclaim takes too


def _plan(settings: GpuaasSettings, now: datetime, cohort: str | None, window_days: float,
          snapshot_id: int | None = None) -> tuple[Snapshot, list[PoolPlan], RebalancePlan]:
    logger = get_run_logger()
    started = time.monotonic()
    snapshot_id, snapshot = snapshot_for(settings, now, snapshot_id)
    recorded = read_recorded_holds(settings, unwalked(snapshot))  # a mark gpuaas did not record holds nothing
    pools = plan_deadlines(unwalked(snapshot), recorded)
    state = read_history.with_options(**retry_options(settings))(settings, now, window_days, return_state=True)
    history_error = None
    if state.is_completed():
        history = state.result()
    else:
        history_error = str(state.result(raise_on_failure=False))[:300]
        history = pd.DataFrame(columns=HISTORY_COLUMNS)
        logger.warning("queue history not read: %s", history_error)
    plan = plan_rebalance(settings, unwalked(snapshot), history, unwalked(pools), read_audit_view(settings, now),
                          cohort, history_error, snapshot_id, window_days)
    logger.info("plan: snapshot %s, %s, %s to move in %.2fs", snapshot_id, counted(len(plan.cohorts), "cohort"),
                counted(plan.moved_gpus, "GPU"), time.monotonic() - started)
    return snapshot, pools, plan


def _not_led(degraded: str | None, snapshot: Snapshot, errors: dict[str, str]) -> str | None:
    """``degraded`` less the failed sources the line is already led by (``with_failures``), so that a failure is
    named once: the history's failure where it is left, else ``NAMED_BEFORE``."""
    led = degraded_reason(snapshot) if errors else None
    if not degraded or not led or not degraded.startswith(led):
        return degraded
    return degraded[len(led):].removeprefix("; ") or NAMED_BEFORE


@flow(name="rebalance", log_prints=False, **FLOW_HOOKS)
def rebalance(apply: bool = False, cohort: str | None = None, history_days: float | None = None,
              at: UtcInstant | None = None, snapshot_id: int | None = None) -> dict[str, Any]:
    """Rebalance once; returns ``{"mode", "snapshot_id", "degraded", "cohorts": [...]}``.

    ``apply`` is the operator's explicit choice for this run (overrides a dry-run policy, not a change freeze; every
    limit still holds); ``cohort`` limits the run to one cohort; ``history_days`` overrides the
    policy's ``usage_lookback_days``; ``snapshot_id`` plans on that collect's snapshot instead of
    collecting again (refused when taken further than ``collect.max_staleness_seconds`` from the
    planned instant; a re-plan after a concurrent quota edit always collects afresh); ``at`` plans at that
    instant instead of now (UTC unless it carries an offset): one in the future is refused, and an apply run
    refuses one further back than ``collect.max_staleness_seconds``.
    """
    logger = get_run_logger()
    settings = load_settings()
    wall_clock = datetime.now(UTC)
    mode, frozen = settings.policy.run_mode(WritingFlow.rebalance, apply, wall_clock)
    if frozen:
        logger.warning("%s: dry-run, nothing written", frozen)
    window = history_window(history_days, settings.policy)
    now = decision_instant(at, mode, settings.policy, wall_clock)
    holder = new_holder("rebalance")

    try:
        with _writes_lock(settings, holder) if mode is Mode.apply else nullcontext():
            snapshot, pools, plan = _plan(settings, now, cohort, window, snapshot_id)
            applied = apply_rebalance(settings, plan, mode, now)
            refused = applied.refused  # a tenant's ClusterQueue the cluster lacks: recorded as a dry-run, none written
            for line in refused:
                logger.error("nothing applied: %s", line)
            late: tuple[str, ...] = ()  # the same, found by a re-plan's fresh snapshot: that cohort is not applied
            for row in applied.recovered:
                logger.warning("plan #%s of cohort %s: %s", row.refers_to, row.name, row.reason)
            results = applied.cohorts
            if applied.changed:  # someone edited a quota since the snapshot: plan again on a fresh one, once
                logger.warning("quotas changed since the plan in %s: recomputing once", ", ".join(applied.changed))
                again = datetime.now(UTC) if at is None else now
                for name in applied.changed:
                    snapshot, pools, plan = _plan(settings, again, name, window)
                    redone = apply_rebalance(settings, plan, mode, again)
                    late += redone.refused
                    results = [o for o in results if o.cohort != name] + redone.cohorts
    except WritesBusy as busy:  # Completed, nothing planned or written: the next night plans again
        return busy_outcome({"mode": mode.value, "snapshot_id": None, "degraded": None, "pushed_samples": None,
                             "cohorts": []}, busy, "gpuaas-rebalance-summary")
    counts: dict[str, int] = {}
    for o in results:
        counts[o.result] = counts.get(o.result, 0) + 1
    if refused:
        mode = Mode.dry_run  # what the plans were recorded as, and what the run's result says
    logger.info("act (%s): %s", mode.value, ", ".join(f"{n} {str(k)}" for k, n in sorted(counts.items())) or "no cohort")

    publish_rebalance_artifacts(results, mode, unwalked(pools), plan.degraded, frozen, plan.misnamed, bool(refused))
    pushed = push_or_warn(settings, push_rebalance_metrics, results, what="rebalance metrics")
    errors = source_errors(snapshot.sources)
    line = with_failures(first_line(results, mode.value, _not_led(plan.degraded, snapshot, errors), frozen,
                                    unread=kube_unread(snapshot.sources), misnamed=plan.misnamed,
                                    refused=bool(refused)), errors)
    # a refused write, or an apply refused over a misnamed ClusterQueue: a red run
    end = failed if refused or late or any(o.result == Outcome.failed for o in results) else finished
    return end({"mode": mode.value, "snapshot_id": plan.snapshot_id, "degraded": plan.degraded,
                "pushed_samples": pushed, "source_errors": source_errors(snapshot.sources),
                "freeze": freeze_dict(frozen), "misnamed_queues": list(plan.misnamed), "refused": bool(refused),
                "cohorts": outcome_dicts(results)}, line)


if __name__ == "__main__":
    rebalance()
