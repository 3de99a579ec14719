"""The deadline plan (with collect, every 15 minutes): which deadlines hold, the extra GPUs for the rest.

Collect (the collect flow as a subflow; a fresh snapshot, stored, then loaded by id), plan (pure, per
cohort and flavor), publish (an artifact and, on the Pushgateway, ``gpuaas_extra_gpus_needed`` and
``gpuaas_deadlines_at_risk`` — the signal to add GPU nodes on, instead of raw queue length).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from prefect import flow, get_run_logger

from flows.collect import collect
from gpuaas.settings import load_settings
from reports.deadlines import pool_dicts
from tasks._options import retry_options
from tasks.deadlines import plan_deadlines, publish_deadline_artifacts, push_deadline_metrics
from tasks.reclaim import load_snapshot


@flow(name="deadlines", log_prints=False)
def deadlines(at: datetime | None = None) -> dict[str, Any]:
    """Plan deadlines once; returns ``{"snapshot_id", "pools": [...], "pushed_samples"}``."""
    logger = get_run_logger()
    settings = load_settings()
    now = at or datetime.now(UTC)
    started = time.monotonic()
    snapshot_id = collect(at=now)["snapshot_id"]
    snapshot = load_snapshot(settings, snapshot_id)
    logger.info("collect: snapshot %s in %.2fs", snapshot_id, time.monotonic() - started)

    started = time.monotonic()
    pools = plan_deadlines(snapshot)
    logger.info("plan: %d pools, %d extra GPUs needed, %d deadlines at risk in %.2fs", len(pools),
                sum(p.plan.extra_gpus.get(p.problem.flavor, 0) for p in pools),
                sum(p.at_risk_count for p in pools), time.monotonic() - started)
    publish_deadline_artifacts(pools)
    pushed = None
    if settings.pushgateway_url:
        state = push_deadline_metrics.with_options(**retry_options(settings))(settings, pools, return_state=True)
        if state.is_completed():
            pushed = state.result()
        else:  # the plan is still the answer of this run; the Pushgateway keeps the previous figures
            logger.warning("deadline metrics not pushed: %s", state.result(raise_on_failure=False))
    return {"snapshot_id": snapshot_id, "pools": pool_dicts(pools), "pushed_samples": pushed}


if __name__ == "__main__":
    deadlines()
