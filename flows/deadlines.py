"""The deadline plan (every 15 minutes): which deadlines hold, the extra GPUs for the rest, Kueue nudged.

Release (first, from the API alone: every held Workload whose release time has come is released,
whatever happens later in the run, and without waiting for the writes lock), then, under the store
lock ``cluster-writes`` in apply mode: collect (the collect flow as a subflow; a fresh snapshot,
stored, then loaded by id), plan (pure, per cohort and flavor, and the holds, demotions and releases
that follow; a ``gpuaas.io/deadline-hold`` mark counts as a hold only where the audit log proves gpuaas wrote it),
nudge (audited; holds and demotions written only in apply mode, and there not while a tenant a change
freeze holds back names a ClusterQueue the cluster lacks: the run ends Failed). Then publish (an artifact and, on the
Pushgateway, ``gpuaas_extra_gpus_needed`` and ``gpuaas_deadlines_at_risk`` — the signal to add GPU
nodes on, instead of raw queue length). Each step is a phase of ``gpuaas.operations.deadlines``.
``nudge=False`` plans only and writes nothing (``gpuaas plan deadlines --from-cluster``): its ``would`` lists the
due releases, holds and demotions a run in apply mode would write at that instant;
``undo=[audit ids]`` releases those holds and demotions.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from datetime import UTC, datetime
from typing import Any

from prefect import flow, get_run_logger

from flows._hooks import FLOW_HOOKS
from flows._instant import UtcInstant, decision_instant, far_from_now
from flows._outcome import busy_outcome, failed, finished, freeze_dict
from flows._snapshot import snapshot_for
from gpuaas.actions import new_holder
from gpuaas.models import NOT_OK
from gpuaas.operations.deadlines import DeadlinesResult, would_write
from gpuaas.policy import Mode, WritingFlow
from gpuaas.settings import load_settings
from reports import counted, frozen_lead, kube_unread, misnamed_lead, source_errors, with_failures
from reports.deadlines import (
    deadlines_headline,
    failures_sentence,
    nudge_dicts,
    nudges_sentence,
    object_names,
    pool_dicts,
    would_dicts,
)
from tasks import push_or_warn, unwalked
from tasks.deadlines import (
    apply_deadline_nudges,
    plan_deadline_run,
    publish_deadline_artifacts,
    push_deadline_metrics,
    read_recorded_holds,
    release_due_holds,
    undo_deadline_holds,
)
from tasks.writes import WritesBusy
from tasks.writes import cluster_writes as _writes_lock  # the Prefect slot + store lock reclaim takes too


@flow(name="deadlines", log_prints=False, **FLOW_HOOKS)
def deadlines(apply: bool = False, at: UtcInstant | None = None, nudge: bool = True,
              undo: list[int] | None = None, snapshot_id: int | None = None) -> dict[str, Any]:
    """Plan deadlines once; returns ``{"snapshot_id", "pools", "pushed_samples", "mode", "released", "nudges"}``.

    Args:
        apply: Write the holds the plan proves and the demotions of lost deadlines (off: dry-run, plan and audit only); a change freeze of the policy still holds it back.
        at: Plan at this instant instead of now (empty: now; UTC unless it carries an offset). One in the future is refused, and an apply run refuses one further back than collect.max_staleness_seconds.
        nudge: Decide holds and demotions and release due ones (off: plan only, write nothing).
        undo: Audit ids of earlier holds or demotions to release instead of planning; nothing else runs.
        snapshot_id: Plan on this collect's snapshot instead of collecting again (empty: collect); refused when it was taken further than collect.max_staleness_seconds from the planned instant.
    """
    logger = get_run_logger()
    settings = load_settings()
    holder = new_holder("deadlines")
    if undo:
        try:
            with _writes_lock(settings, holder):
                undone = nudge_dicts(undo_deadline_holds(settings, list(undo)).nudges)
        except WritesBusy as busy:
            return busy_outcome({"undo": []}, busy)
        # ended as any run is (its headline the message and the run's name); a release refused or lost: a red run
        line = (f"Undo of {len(undone)} deadline {'hold or demotion' if len(undone) == 1 else 'holds or demotions'}:"
                + (nudges_sentence([], undone, Mode.apply.value) or " nothing released.") + failures_sentence([], undone))
        undo_end = failed if any(u["result"] in NOT_OK for u in undone) else finished
        return undo_end({"undo": undone}, line)
    wall_clock = datetime.now(UTC)
    mode, frozen = settings.policy.run_mode(WritingFlow.deadlines, apply, wall_clock)
    if frozen:
        logger.warning("%s: dry-run, no hold or demotion written (due releases still are)", frozen)
    # before the releases too: an apply run far from now writes nothing; a plan alone (nudge off) writes nothing at all
    now = decision_instant(at, mode if nudge else Mode.dry_run, settings.policy, wall_clock)
    # a release is written in a dry-run too: a run for another instant (a dry-run, apply is refused above)
    # releases nothing, neither the due ones of its instant nor those its plan no longer needs
    elsewhen = far_from_now(now, settings.policy, wall_clock) is not None
    if elsewhen and nudge:
        logger.warning("at %s is not now: no hold is released this run", now.isoformat())
    released = release_due_holds(settings, now) if nudge and not elsewhen else DeadlinesResult()
    if released.nudges:
        logger.info("release: %s due", counted(len(released.nudges), "held Workload"))

    nudged = DeadlinesResult()
    try:
        with _writes_lock(settings, holder) if nudge and mode is Mode.apply else nullcontext():
            snapshot_id, snapshot = snapshot_for(settings, now, snapshot_id)
            started = time.monotonic()
            recorded = read_recorded_holds(settings, unwalked(snapshot))  # the marks gpuaas wrote: holds; no other
            plan = plan_deadline_run(settings, unwalked(snapshot), now, True, recorded)  # pure: a plan alone shows them too
            logger.info("plan: %s, %s needed, %s at risk in %.2fs", counted(len(plan.pools), "pool"),
                        counted(sum(plan.extra_gpus.values()), "extra GPU"), counted(len(plan.at_risk), "deadline"),
                        time.monotonic() - started)
            if nudge:
                to_apply = plan.releases_withheld(f"at {now.isoformat()} is not now") if elsewhen else plan
                nudged = apply_deadline_nudges(settings, unwalked(to_apply), mode, now)
                logger.info("nudge (%s): %s", mode.value, nudged.counts() or "nothing to do")
    except WritesBusy as busy:  # Completed, nothing collected, planned or written: the next run decides again
        return busy_outcome({"snapshot_id": None, "pools": [], "pushed_samples": None, "mode": mode.value,
                             "released": nudge_dicts(released.nudges), "nudges": []}, busy)
    publish_deadline_artifacts(unwalked(plan.pools))
    pushed = push_or_warn(settings, push_deadline_metrics, unwalked(plan.pools), what="deadline metrics")
    planned = pool_dicts(plan.pools)
    held_back = f"{frozen_lead(frozen)}no hold or demotion written. " if frozen and nudge else ""
    # a frozen tenant's ClusterQueue the cluster lacks: its freeze may miss Workloads, so apply writes no hold
    refused = bool(plan.misnamed) and nudge and mode is Mode.apply
    held_back = misnamed_lead(plan.misnamed, "No hold or demotion written" if refused else None) + held_back
    nudges, freed = nudge_dicts(nudged.nudges), nudge_dicts(released.nudges)
    line = with_failures(held_back + deadlines_headline(planned, unread=kube_unread(snapshot.sources))
                         + nudges_sentence(nudges, freed, mode.value)
                         + failures_sentence(nudges, freed), source_errors(snapshot.sources))
    # a hold, demotion or release refused, or one whose answer was lost and could not be read back: a red run
    end = failed if refused or any(n.result in NOT_OK for n in (*nudged.nudges, *released.nudges)) else finished
    would = {} if nudge else {"would": would_dicts(would_write(plan, snapshot, frozen))}
    return end({"snapshot_id": snapshot_id, "pools": planned, "pushed_samples": pushed, "mode": mode.value,
                "freeze": freeze_dict(frozen), "misnamed_queues": list(plan.misnamed), "refused": refused,
                "released": freed, "nudges": nudges, **would,
                "objects": object_names(snapshot.workloads), "degraded": snapshot.degraded,
                "source_errors": source_errors(snapshot.sources)}, line)


if __name__ == "__main__":
    deadlines()
