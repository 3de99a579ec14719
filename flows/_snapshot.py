"""The snapshot a deciding flow works on: its own fresh collect, or one the caller already took.

Scheduled runs collect for themselves (a fresh snapshot at ``at``). A caller that runs several
stages on the same instant (the bench's full cycle, an operator planning everything after one
collect) passes ``snapshot_id`` instead, so the fleet is read once; such a snapshot is refused
when it is further than ``collect.max_staleness_seconds`` from the instant the run judges, the
same bound no action may cross on telemetry.
"""

from __future__ import annotations

import time
from datetime import datetime

from prefect import get_run_logger

from flows.collect import collect
from gpuaas.errors import ActionRefused
from gpuaas.models import Snapshot
from gpuaas.settings import GpuaasSettings
from tasks.reclaim import load_snapshot

__all__ = ["snapshot_for"]


def snapshot_for(settings: GpuaasSettings, now: datetime, snapshot_id: int | None = None) -> tuple[int, Snapshot]:
    """``(id, snapshot)``: a fresh collect at ``now``, or snapshot ``snapshot_id`` when it was taken close to ``now``."""
    started = time.monotonic()
    if snapshot_id is None:
        snapshot_id = int(collect(at=now)["snapshot_id"])
        snapshot = load_snapshot(settings, snapshot_id)
    else:
        snapshot = load_snapshot(settings, snapshot_id)
        limit = settings.policy.collect.max_staleness_seconds
        apart = abs((now - snapshot.collected_at).total_seconds())
        if apart > limit:
            raise ActionRefused(
                f"snapshot {snapshot_id} was collected at {snapshot.collected_at.isoformat()}, {apart:.0f}s from "
                f"{now.isoformat()} (collect.max_staleness_seconds: {limit:g}): run without snapshot_id to collect afresh")
    get_run_logger().info("snapshot %s in %.2fs", snapshot_id, time.monotonic() - started)
    return snapshot_id, snapshot
