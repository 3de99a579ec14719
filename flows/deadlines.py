"""The deadline plan (every 15 minutes): which deadlines hold, the extra GPUs for the rest, Kueue nudged.

Release (first, from the API alone: every held Workload whose release time has come is released,
whatever happens later in the run), collect (the collect flow as a subflow; a fresh snapshot,
stored, then loaded by id), plan (pure, per cohort and flavor), nudge (holds where the plan is
proven, under the store lock ``cluster-writes``; written only in apply mode), publish (an artifact
and, on the Pushgateway, ``gpuaas_extra_gpus_needed`` and ``gpuaas_deadlines_at_risk`` — the
signal to add GPU nodes on, instead of raw queue length). ``nudge=False`` plans only and writes
nothing (``gpuaas plan deadlines --from-cluster``); ``undo=[audit ids]`` releases those holds.
"""

from __future__ import annotations

import time
import uuid
from contextlib import nullcontext
from datetime import UTC, datetime
from typing import Any

from prefect import flow, get_run_logger

from flows._outcome import finished
from flows._snapshot import snapshot_for
from gpuaas.actions.deadline_holds import NudgeResult
from gpuaas.policy import Mode
from gpuaas.settings import load_settings
from reports import source_errors, with_failures
from reports.deadlines import deadlines_headline, object_names, pool_dicts
from tasks import push_or_warn, unwalked
from tasks.deadlines import (
    decide_nudges,
    nudge_kueue,
    plan_deadlines,
    publish_deadline_artifacts,
    push_deadline_metrics,
    release_due_holds,
    undo_deadline_holds,
)
from tasks.notify import NOTIFY_HOOKS
from tasks.writes import WritesBusy, busy_outcome
from tasks.writes import cluster_writes as _writes_lock  # the Prefect slot + store lock reclaim takes too


def _results(results: list[NudgeResult]) -> list[dict[str, Any]]:
    return [{"action": r.nudge.action, "workload": r.nudge.ref, "result": r.result, "reason": r.reason,
             "audit_id": r.audit_id, "release_at": r.nudge.release_at.isoformat() if r.nudge.release_at else None}
            for r in results]


@flow(name="deadlines", log_prints=False, **NOTIFY_HOOKS)
def deadlines(apply: bool = False, at: datetime | None = None, nudge: bool = True,
              undo: list[int] | None = None, snapshot_id: int | None = None) -> dict[str, Any]:
    """Plan deadlines once; returns ``{"snapshot_id", "pools", "pushed_samples", "mode", "released", "nudges"}``.

    Args:
        apply: Write the holds the plan proves (off: dry-run, plan and audit only).
        at: Plan at this instant instead of now (empty: now).
        nudge: Decide holds and release due ones (off: plan only, write nothing).
        undo: Audit ids of earlier holds to release instead of planning; nothing else runs.
        snapshot_id: Plan on this collect's snapshot instead of collecting again (empty: collect); refused when it was taken further than collect.max_staleness_seconds from the planned instant.
    """
    logger = get_run_logger()
    settings = load_settings()
    if undo:
        try:
            with _writes_lock(settings, f"deadlines-{uuid.uuid4()}"):
                return {"undo": _results(undo_deadline_holds(settings, list(undo)))}
        except WritesBusy as busy:
            return busy_outcome({"undo": []}, busy)
    mode = Mode.apply if apply or settings.policy.deadlines.mode is Mode.apply else Mode.dry_run
    now = at or datetime.now(UTC)
    released = release_due_holds(settings, now) if nudge else []
    if released:
        logger.info("release: %d held Workloads due", len(released))

    snapshot_id, snapshot = snapshot_for(settings, now, snapshot_id)

    started = time.monotonic()
    pools = plan_deadlines(unwalked(snapshot))
    logger.info("plan: %d pools, %d extra GPUs needed, %d deadlines at risk in %.2fs", len(pools),
                sum(p.plan.extra_gpus.get(p.problem.flavor, 0) for p in pools),
                sum(p.at_risk_count for p in pools), time.monotonic() - started)
    results: list[NudgeResult] = []
    if nudge:
        nudges = decide_nudges(settings, unwalked(pools), unwalked(snapshot), now)
        try:
            with _writes_lock(settings, f"deadlines-{uuid.uuid4()}") if mode is Mode.apply else nullcontext():
                results = nudge_kueue(settings, nudges, mode)
        except WritesBusy as busy:  # the plan is still published; no nudge written
            publish_deadline_artifacts(unwalked(pools))
            return busy_outcome({"snapshot_id": snapshot_id, "pools": pool_dicts(pools), "pushed_samples": None,
                                 "mode": mode.value, "released": _results(released), "nudges": []}, busy)
        counts: dict[str, int] = {}
        for r in results:
            counts[f"{r.nudge.action} {r.result}"] = counts.get(f"{r.nudge.action} {r.result}", 0) + 1
        logger.info("nudge (%s): %s", mode.value, counts or "nothing to do")
    publish_deadline_artifacts(unwalked(pools))
    pushed = push_or_warn(settings, push_deadline_metrics, unwalked(pools), what="deadline metrics")
    planned = pool_dicts(pools)
    line = with_failures(deadlines_headline(planned), source_errors(snapshot.sources))
    return finished({"snapshot_id": snapshot_id, "pools": planned, "pushed_samples": pushed, "mode": mode.value,
                     "released": _results(released), "nudges": _results(results), "objects": object_names(
                         snapshot.workloads), "degraded": snapshot.degraded,
                     "source_errors": source_errors(snapshot.sources)}, line)


if __name__ == "__main__":
    deadlines()
