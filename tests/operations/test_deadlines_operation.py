"""``gpuaas.operations.deadlines.plan`` as a pure function: a hand-made snapshot of two pools in, pools,
holds (capped, least urgent first) and what is at risk out; no store, no cluster."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd

from gpuaas.models import Outcome, Snapshot, SourceStatus
from gpuaas.operations.deadlines import plan, would_write
from gpuaas.policy import DeadlinesPolicy, FreezeOn

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
H = 3600.0


def wl(name: str, state: str, gpus: int, cq: str, *, runtime: float = H, deadline_in: float | None = None,
       admitted_ago: float | None = None) -> dict[str, Any]:
    return {"namespace": "ns", "name": name, "state": state, "gpus": float(gpus), "active": True,
            "flavor": "h100" if state == "admitted" else None, "cluster_queue": cq,
            "cohort": {"cq-a": "c", "cq-solo": None}[cq], "runtime_seconds": runtime, "deadline_hold": None,
            "deadline_at": None if deadline_in is None else pd.Timestamp(NOW + timedelta(seconds=deadline_in)),
            "admitted_at": None if admitted_ago is None else pd.Timestamp(NOW - timedelta(seconds=admitted_ago))}


def snapshot() -> Snapshot:
    """Pool c (cq-a, 4 h100): ``run`` holds all 4 for 50 more min; pending ``urgent`` (4 GPUs, 1 h, due in 2 h) and
    ``slack`` (2 GPUs, 1 h, due in 5 h). Pool -cq-solo (2 h100): ``blocker`` holds both for 2 h; pending ``late``
    (2 GPUs, 1 h, due in 90 min)."""
    quotas = pd.DataFrame([
        {"cluster_queue": "cq-a", "cohort": "c", "flavor": "h100", "resource": "nvidia.com/gpu", "nominal": 4.0},
        {"cluster_queue": "cq-solo", "cohort": None, "flavor": "h100", "resource": "nvidia.com/gpu", "nominal": 2.0},
    ])
    frame = pd.DataFrame([
        wl("run", "admitted", 4, "cq-a", admitted_ago=600),
        wl("urgent", "pending", 4, "cq-a", deadline_in=2 * H),
        wl("slack", "pending", 2, "cq-a", deadline_in=5 * H),
        wl("blocker", "admitted", 2, "cq-solo", runtime=2 * H, admitted_ago=0),
        wl("late", "pending", 2, "cq-solo", deadline_in=1.5 * H),
    ])
    frame["deadline_at"] = pd.to_datetime(frame["deadline_at"], utc=True)
    frame["admitted_at"] = pd.to_datetime(frame["admitted_at"], utc=True)
    return Snapshot(collected_at=NOW, windows_minutes=(30.0,), sources={}, workloads=frame, quotas=quotas)


def test_plan_holds_the_least_urgent_first_under_the_cap_and_names_what_is_at_risk() -> None:
    # Pool c: urgent and slack cannot overlap (4 + 2 > 4 GPUs), and slack first would end urgent at 170 min > 120,
    # so urgent starts when run ends (+50 min) and slack after it (+110 min): proven, 0 extra GPUs. With a 30-min
    # margin each is held until its start minus 30 min: urgent until +20 min, slack until +80 min. The cap of 1
    # goes to the least urgent (slack); urgent's hold is deferred.
    # Pool -cq-solo: late cannot start before +120 min (> its 90-min deadline) on its 2 GPUs; 2 more GPUs let it
    # run now. Not proven: nothing held there. So 2 extra h100 in all, and late alone at risk.
    result = plan(snapshot(), DeadlinesPolicy(max_holds_per_run=1, release_margin_minutes=30, runtime_estimate_error=1.0), NOW)

    assert [(p.problem.cohort, p.problem.capacity) for p in result.pools] == [("-cq-solo", 2), ("c", 4)]
    assert [(n.action, n.ref, n.outcome, n.release_at) for n in result.nudges] == [
        ("hold", "ns/slack", Outcome.planned, NOW + timedelta(minutes=80)),
        ("hold", "ns/urgent", Outcome.deferred, NOW + timedelta(minutes=20)),
    ]
    assert [n.ref for n in result.holds] == ["ns/slack"]
    assert result.at_risk == ("ns/late",)
    assert result.extra_gpus == {"h100": 2}


def test_plan_without_nudges_plans_the_same_pools_and_holds_nothing() -> None:
    policy = DeadlinesPolicy(max_holds_per_run=1, release_margin_minutes=30, runtime_estimate_error=1.0)
    only = plan(snapshot(), policy, NOW, nudge=False)
    assert only.nudges == () and only.pools == plan(snapshot(), policy, NOW).pools


def test_on_a_degraded_snapshot_holds_are_shown_never_planned_and_releases_still_are() -> None:
    # The same pools with Prometheus down: the plan is the same, the hold it would write is skipped naming the
    # source, and a hold it no longer needs (``late``, held by an earlier run) is still released.
    base = snapshot()
    base.workloads.loc[base.workloads["name"] == "late", "deadline_hold"] = (
        '{"audit_id": 7, "release_at": "2026-03-10T15:00:00+00:00", "before": {"active": true}}')
    policy = DeadlinesPolicy(max_holds_per_run=1, release_margin_minutes=30, runtime_estimate_error=1.0)
    degraded = replace(base, sources={"kube": SourceStatus("kube", True),
                                      "prometheus": SourceStatus("prometheus", False, error="connection refused")})
    clean, result = plan(base, policy, NOW), plan(degraded, policy, NOW)
    assert result.pools == clean.pools
    assert [(n.action, n.ref, n.outcome) for n in clean.nudges] == [
        ("release", "ns/late", Outcome.planned), ("hold", "ns/slack", Outcome.planned),
        ("hold", "ns/urgent", Outcome.deferred)]
    assert [(n.action, n.ref, n.outcome) for n in result.nudges] == [
        ("release", "ns/late", Outcome.planned), ("hold", "ns/slack", Outcome.skipped),
        ("hold", "ns/urgent", Outcome.skipped)]
    assert result.holds == ()
    assert all(n.reason.startswith("prometheus did not answer") for n in result.nudges if n.action != "release")


def test_what_a_run_would_write_lists_the_sweeps_releases_once_then_the_plan_and_a_freeze_skips_its_holds() -> None:
    # late (pool -cq-solo) held by an earlier run until 11:59: the sweep of a run at NOW releases it, and the plan's
    # own release of it ("in no plan any more") is not listed a second time. ``run`` held until 13:00 is not due.
    base = snapshot()
    mark = '{{"audit_id": {id}, "release_at": "{at}", "before": {{"active": true}}}}'
    base.workloads.loc[base.workloads["name"] == "late", "deadline_hold"] = mark.format(id=7, at="2026-03-10T11:59:00Z")
    base.workloads.loc[base.workloads["name"] == "slack", "deadline_hold"] = mark.format(id=8, at="2026-03-10T13:00:00Z")
    policy = DeadlinesPolicy(max_holds_per_run=1, release_margin_minutes=30, runtime_estimate_error=1.0)
    planned = plan(base, policy, NOW)
    assert ("release", "ns/late") in [(n.action, n.ref) for n in planned.nudges]  # the plan alone would list it too

    would = would_write(planned, base)
    assert [(n.action, n.ref, n.outcome) for n in would] == [
        ("release", "ns/late", Outcome.planned), ("hold", "ns/urgent", Outcome.planned)]
    assert would[0].reason == "release time 2026-03-10T11:59:00Z has come"

    freeze = FreezeOn("year-end", NOW + timedelta(days=1))
    frozen = would_write(planned, base, freeze)
    assert [(n.action, n.outcome) for n in frozen] == [("release", Outcome.planned), ("hold", Outcome.skipped)]
    assert frozen[1].reason.endswith("; not written: change freeze year-end until 2026-03-11 12:00 UTC")
    assert would_write(plan(snapshot(), policy, NOW, nudge=False), snapshot()) == ()
