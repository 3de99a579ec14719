"""The reclaim flow (every 15 minutes): stop GPU workloads that hold GPUs and do nothing.

Each phase is a task over ``gpuaas.operations.reclaim``: collect (the collect flow as a subflow: a
fresh snapshot at ``at``, stored, then loaded by id), idle verdicts, recover (apply mode: intents a
killed run left open), decide (the whole decision: targets, the audit log's answer for this window,
the cap), act (intent, write, completion; dry-run audits and writes nothing to the cluster),
publish (artifacts, the idle signal on the Pushgateway). In apply mode everything from the collect
to the act runs under ``tasks.writes.cluster_writes``, the Prefect concurrency slot and store lock
that rebalance and the deadline holds take the same way. ``undo=[audit ids]`` restores earlier reclaims, quota plans
and deadline holds instead and does nothing else. A run that cannot get the writes within ``GPUAAS_WRITES_WAIT_SECONDS`` writes
nothing and says so (``writes_busy``); the next scheduled run decides again.

The idle signal never outlives its evidence: a run that fails withdraws what the previous run
published, one whose snapshot misses a source (or holds stale telemetry) withdraws it instead of
publishing, and every published set carries ``gpuaas_last_success_timestamp_seconds`` so that a
consumer can ignore a set that nobody replaced or withdrew (a crashed worker).
A run that left most GPU workloads ``unknown`` is degraded: its summary says so first.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

import pandas as pd
from prefect import flow, get_run_logger

from flows._hooks import FLOW_HOOKS
from flows._instant import UtcInstant, decision_instant
from flows._outcome import busy_outcome, failed, finished, freeze_dict
from flows._snapshot import snapshot_for
from gpuaas.actions import new_holder
from gpuaas.models import NOT_OK, Snapshot
from gpuaas.policies.reclaim import adaptive_rules, snapshot_problem
from gpuaas.policy import FreezeOn, Mode, WritingFlow
from gpuaas.settings import GpuaasSettings, load_settings
from reports import counted, source_errors
from reports.reclaim import blind_line, decision_dicts, headline, summary_line, undo_headline, undo_line
from tasks import retry_options, unwalked
from tasks.adaptive import adaptive_history
from tasks.reclaim import (
    act,
    check_undo_ids,
    decide,
    find_idle_workloads,
    publish_reclaim_artifacts,
    publish_undo_artifact,
    push_idle_metrics,
    recover,
    undo_actions,
    withdraw_idle_metrics,
)
from tasks.writes import WritesBusy, cluster_writes


@flow(name="reclaim", log_prints=False, **FLOW_HOOKS)
def reclaim(apply: bool = False, at: UtcInstant | None = None, undo: list[int] | None = None,
            snapshot_id: int | None = None) -> dict[str, Any]:
    """Reclaim idle GPUs once; returns ``{"mode", "snapshot_id", "decisions": [...]}``.

    ``apply`` is the operator's explicit choice for this run and overrides the policy's
    dry-run; the cap and every other rule still hold.

    Args:
        apply: Stop the idle workloads found (off: dry-run, only decide and audit). The policy's max_actions_per_run cap and change freezes still hold.
        at: Judge the telemetry window ending at this instant instead of now (empty: now; UTC unless it carries an offset); the same window twice acts once. One in the future is refused, and an apply run refuses one further back than collect.max_staleness_seconds.
        undo: Audit ids of earlier reclaims, quota plans or deadline holds to restore instead of reclaiming (see `gpuaas audit list`); nothing else runs.
        snapshot_id: Judge this collect's snapshot instead of collecting again (empty: collect); refused when it was taken further than collect.max_staleness_seconds from the judged instant.
    """
    logger = get_run_logger()
    settings = load_settings()
    holder = new_holder("reclaim")
    if undo:
        check_undo_ids(settings, list(undo))  # an id that names nothing fails the run before the writes are taken
        try:
            with cluster_writes(settings, holder):
                restores = undo_actions(settings, list(undo))
        except WritesBusy as busy:
            return busy_outcome({"undo": []}, busy)
        for r in restores:
            logger.info("undo %s", undo_line(r))
        publish_undo_artifact(unwalked(restores))
        # an undo the cluster refused, or whose answer was lost: a red run, as for any other write
        undo_end = failed if any(r.result in NOT_OK for r in restores) else finished
        return undo_end({"undo": [asdict(r) for r in restores]}, undo_headline(restores))

    wall_clock = datetime.now(UTC)
    mode, frozen = settings.policy.run_mode(WritingFlow.reclaim, apply, wall_clock)
    if frozen:
        logger.warning("%s: dry-run, nothing written", frozen)
    now = decision_instant(at, mode, settings.policy, wall_clock)
    cap = settings.policy.reclaim.max_actions_per_run
    try:
        with cluster_writes(settings, holder) if mode is Mode.apply else nullcontext(), \
                _signal_withdrawn_on_failure(settings):
            snapshot_id, snapshot = snapshot_for(settings, now, snapshot_id)
            idle = _verdicts(settings, snapshot, now)
            started = time.monotonic()
            settled = recover(settings, now) if mode is Mode.apply else []
            plan = decide(settings, unwalked(snapshot), idle, mode, now, datetime.now(UTC))
            logger.info("decide: %s, %s, %d to act on, in %.2fs", counted(len(idle), "GPU workload"),
                        counted(len(plan.decisions), "idle target"), len(plan.targets), time.monotonic() - started)
            started = time.monotonic()
            results = act(settings, unwalked(plan), now)
            counts: dict[str, int] = {}
            for result in results:
                counts[result.result] = counts.get(result.result, 0) + 1
            logger.info("act (%s): %s in %.2fs", mode.value,
                        ", ".join(f"{n} {result}" for result, n in sorted(counts.items())) or "nothing to do",
                        time.monotonic() - started)
            publish_reclaim_artifacts(unwalked(results), unwalked(snapshot), mode, cap, frozen, settled)
    except WritesBusy as busy:  # nothing collected, decided or written: the next run decides again
        return busy_outcome({"mode": mode.value, "snapshot_id": None, "decisions": []}, busy,
                            "gpuaas-reclaim-summary")
    blind = blind_line(results, snapshot)
    if blind:
        logger.warning("degraded run: %s", blind)
    if settings.pushgateway_url:
        _publish_signal(settings, snapshot, idle, mode, frozen)
    # a refused write, or one whose answer was lost and could not be read back: a red run
    end = failed if any(r.result in NOT_OK for r in results) else finished
    return end({"mode": mode.value, "snapshot_id": snapshot_id, "degraded": bool(blind) or snapshot.degraded,
                "source_errors": source_errors(snapshot.sources), "summary": summary_line(results, snapshot),
                "freeze": freeze_dict(frozen), "decisions": decision_dicts(results),
                "settled": [s._asdict() for s in settled]},
               headline(results, snapshot, mode.value, frozen=frozen, settled=settled))


def _verdicts(settings: GpuaasSettings, snapshot: Snapshot, now: datetime) -> pd.DataFrame:
    """Idle verdicts; an adaptive rule's rows decided again from their history, or unknown without it."""
    adaptive = None
    if adaptive_rules(settings.policy):
        pulled = adaptive_history(settings, now, return_state=True)
        if pulled.is_completed():
            adaptive = pulled.result()
        else:  # no history: the adaptive rows become unknown, never idle
            get_run_logger().warning("adaptive history unavailable (%s): adaptive workloads are unknown this run",
                                     pulled.message)
    idle: pd.DataFrame = find_idle_workloads(settings, unwalked(snapshot), adaptive)
    return idle


@contextmanager
def _signal_withdrawn_on_failure(settings: GpuaasSettings) -> Iterator[None]:
    """A run that fails cannot vouch for the idle signal the previous one left on the Pushgateway."""
    try:
        yield
    except BaseException:
        if settings.pushgateway_url:
            state = withdraw_idle_metrics.with_options(**retry_options(settings))(settings, return_state=True)
            if not state.is_completed():
                get_run_logger().warning("the previous idle signal could not be withdrawn: %s",
                                         state.result(raise_on_failure=False))
        raise


def _publish_signal(settings: GpuaasSettings, snapshot: Snapshot, idle: pd.DataFrame, mode: Mode,
                    frozen: FreezeOn | None) -> None:
    """Replace the idle signal with this run's verdicts, or withdraw it when a source is missing or stale, or
    while a change freeze holds reclaim back (KEDA would otherwise scale on it: the freeze covers it too).

    Either way a Pushgateway that cannot be reached is a warning: the decisions are made and audited,
    and the ScaledObject ignores a signal older than the age it states.
    """
    logger = get_run_logger()
    problem = str(frozen) if frozen else snapshot_problem(snapshot, settings.policy.collect.max_staleness_seconds)
    options = retry_options(settings)
    state: Any
    if problem:
        logger.warning("idle signal withdrawn: %s", problem)
        state = withdraw_idle_metrics.with_options(**options)(settings, return_state=True)
    else:  # a tenant's change freeze withdraws its workloads' signal alone
        held = settings.policy.frozen_tenants(WritingFlow.reclaim, datetime.now(UTC))
        if held:
            logger.warning("idle signal withdrawn for %s", "; ".join(str(f) for f in held.values()))
            idle = idle[~idle["tenant"].isin(sorted(held))]
        state = push_idle_metrics.with_options(**options)(settings, idle, mode, snapshot.collected_at,
                                                          return_state=True)
    if not state.is_completed():
        logger.warning("idle signal not updated on the Pushgateway: %s", state.result(raise_on_failure=False))


if __name__ == "__main__":
    reclaim()
