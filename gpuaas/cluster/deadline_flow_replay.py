"""The deadline replay of the deployed code: the ``deadlines`` flow's planning and nudging, at its cadence.

Why this loop and not a planner of its own: the number that matters is what the flow, as deployed,
does to Kueue. So every flow interval of simulated time (the ``deadlines`` deployment's schedule in
``prefect.yaml``) one *tick* does what a flow run does, on the Workload objects of an in-memory
``ObjectStore`` that Kueue's model (``KueueController``) schedules:

1. the release sweep: every held Workload whose ``release_at`` has come is released
   (``due_releases``, the rule ``release_due`` applies from the API);
2. the snapshot the collect would build from those objects (the kube source's parsers, then
   ``build_snapshot``): Workloads with their ``gpuaas.io/deadline`` and
   ``gpuaas.io/expected-runtime`` annotations, conditions and admission, the ClusterQueue;
3. the flow's own decision, ``gpuaas.operations.deadlines.plan``, with the policy's settings (so
   the replay and the flow cannot drift apart);
4. the nudges written as the action writes them (``hold_patch``/``release_patch``): a hold or a
   demotion only on the Workload the snapshot read (``changed_since``) that is still pending, active
   and not held (``not_holdable``).

Between ticks Kueue's model admits as it would (a job submitted between two runs may be admitted
before the flow ever sees it) and each job ends after its *true* duration; the expected-runtime
annotation carries the *estimate*. Finished Workloads are deleted (their job is gone), so a tick
reads only what is pending or running. A tick with nothing pending is skipped: with nothing pending
nothing is held, and the plan nudges nothing.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from gpuaas.actions.deadline_holds import (
    changed_since,
    due_releases,
    hold_patch,
    not_holdable,
    prior_state,
    release_patch,
)
from gpuaas.cluster.apiserver import ObjectStore
from gpuaas.cluster.deadline_replay import (
    LOCAL_QUEUE,
    NAMESPACE,
    START,
    JobsDone,
    ReplayStats,
    job_name,
    kueue_cluster,
    replay_stats,
)
from gpuaas.cluster.kueue import KueueController
from gpuaas.cluster.kueue.testing import workload
from gpuaas.cluster.traces import TraceJob
from gpuaas.errors import ConfigError
from gpuaas.models import Outcome, Snapshot
from gpuaas.operations.deadlines import plan
from gpuaas.policies.deadlines import EPS, HOLD_ANNOTATION, Nudge, NudgeAction, parse_hold
from gpuaas.policy import DeadlinesPolicy
from gpuaas.snapshot import kueue_snapshot
from gpuaas.sources import (
    DEADLINE,
    EXPECTED_RUNTIME,
    parse_cluster_queue,
    parse_local_queue,
    parse_resource_flavor,
    parse_workload,
)
from gpuaas.sources.kube import DEFAULT_GPU_RESOURCES, KubeState, with_cluster_queues

__all__ = ["PREFECT_YAML", "flow_interval", "flow_tick", "replay_flow", "store_kube", "store_snapshot"]

PREFECT_YAML = Path(__file__).resolve().parents[2] / "prefect.yaml"


def flow_interval(path: Path = PREFECT_YAML, deployment: str = "deadlines") -> float:
    """Seconds between two runs of ``deployment``: its schedule's ``interval``, or a ``*/M * * * *`` cron."""
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read ({exc})", field="deployments") from exc
    for entry in doc.get("deployments") or []:
        if not isinstance(entry, dict) or entry.get("name") != deployment:
            continue
        for schedule in entry.get("schedules") or []:
            if isinstance(schedule, dict) and schedule.get("interval"):
                return float(schedule["interval"])
            cron = str((schedule or {}).get("cron", "")).split()
            if len(cron) == 5 and cron[1:] == ["*"] * 4 and cron[0].startswith("*/") and cron[0][2:].isdigit():
                return 60.0 * int(cron[0][2:])
        break
    raise ConfigError(f"{path}: deployment {deployment!r} has no interval or */M-minute cron schedule",
                      field=f"deployments.{deployment}.schedules")


def store_kube(store: ObjectStore) -> KubeState:
    """What the kube source reads from these Kueue objects, through its own parsers (read-only, no copies)."""
    gpus = DEFAULT_GPU_RESOURCES
    local_queues = tuple(parse_local_queue(o) for o in store.page("LocalQueue").items)
    return KubeState(
        kueue_version="v1beta2",
        cluster_queues=tuple(parse_cluster_queue(o) for o in store.page("ClusterQueue").items),
        local_queues=local_queues,
        workloads=with_cluster_queues((parse_workload(o, gpus) for o in store.page("Workload").items), local_queues),
        cohorts=(), resource_flavors=tuple(parse_resource_flavor(o) for o in store.page("ResourceFlavor").items),
        owners=(), pods=(), not_installed=(), requests=0,
    )


def store_snapshot(store: ObjectStore, now: datetime) -> Snapshot:
    """The snapshot's Kueue views (``kueue_snapshot``): all the deadline plan reads of a collect."""
    return kueue_snapshot(now, store_kube(store))


def _release(store: ObjectStore, nudge: Nudge) -> None:
    obj = store.get("Workload", nudge.namespace, nudge.name)
    hold = parse_hold((obj["metadata"].get("annotations") or {}).get(HOLD_ANNOTATION))
    if hold is not None:
        store.patch("Workload", nudge.namespace, nudge.name, release_patch(obj, hold))


def _hold(store: ObjectStore, nudge: Nudge) -> bool:
    obj = store.get("Workload", nudge.namespace, nudge.name)
    if changed_since(nudge, obj) or not_holdable(obj):
        return False
    mark = {"audit_id": None, "release_at": nudge.release_at.isoformat() if nudge.release_at else None,
            "before": prior_state(obj, nudge.action)}
    store.patch("Workload", nudge.namespace, nudge.name, hold_patch(obj, mark))
    return True


def flow_tick(store: ObjectStore, now: datetime, policy: DeadlinesPolicy) -> list[Nudge]:
    """One run of the ``deadlines`` flow in apply mode on ``store``; returns the nudges it planned."""
    for nudge in due_releases(store.page("Workload").items, now):
        _release(store, nudge)
    nudges = list(plan(store_snapshot(store, now), policy, now).nudges)
    for nudge in nudges:
        if nudge.outcome != Outcome.planned:
            continue
        if nudge.action is NudgeAction.release:
            _release(store, nudge)
        else:
            _hold(store, nudge)
    return nudges


def _trace_workload(job: TraceJob, i: int, estimate: float) -> dict[str, Any]:
    """A bare Workload of the job, annotated as a user would: its deadline and the *estimated* run time."""
    obj = workload(NAMESPACE, job_name(i), LOCAL_QUEUE, job.gpus)
    annotations = {EXPECTED_RUNTIME: f"{max(estimate, 1e-3):.3f}s"}
    if job.deadline is not None:
        annotations[DEADLINE] = (START + timedelta(seconds=job.deadline)).isoformat()
    obj["metadata"]["annotations"] = annotations
    return obj


def replay_flow(jobs: Sequence[TraceJob], gpus: int, *, estimates: Sequence[float] | None = None,
                interval: float | None = None, policy: DeadlinesPolicy | None = None,
                progress: Callable[[str], None] | None = None) -> ReplayStats:
    """Every job once through Kueue on ``gpus`` GPUs, with the ``deadlines`` flow run every ``interval`` seconds.

    ``interval`` defaults to the deployment's schedule in ``prefect.yaml``, ``policy`` to the
    policy model's defaults; ``replans`` in the result counts the ticks that ran; ``progress`` hears each
    tenth of the jobs that ends.
    """
    if not jobs:
        raise ConfigError("the trace has no jobs")
    if gpus < max(j.gpus for j in jobs):
        raise ConfigError(f"{gpus} GPUs cannot run the trace's largest job ({max(j.gpus for j in jobs)} GPUs)",
                          field="--gpus")
    step = flow_interval() if interval is None else interval
    policy = policy or DeadlinesPolicy()
    told = [j.duration for j in jobs] if estimates is None else list(estimates)
    clock, store, kueue = kueue_cluster(gpus)
    tick = JobsDone("flow", len(jobs), progress)
    order = sorted(range(len(jobs)), key=lambda i: (jobs[i].submit, i))
    started: dict[int, float] = {}
    ended: dict[int, float] = {}
    ends: list[tuple[float, int]] = []
    pending = 0
    ticks = 0
    next_submit = 0
    next_tick = step * (jobs[order[0]].submit // step)
    while next_submit < len(order) or ends or pending:
        now = min(jobs[order[next_submit]].submit if next_submit < len(order) else next_tick + step,
                  ends[0][0] if ends else next_tick + step, next_tick)
        clock.now = START + timedelta(seconds=now)
        while ends and ends[0][0] <= now + EPS:
            _, i = heapq.heappop(ends)
            kueue.finish(NAMESPACE, job_name(i))
            store.delete("Workload", NAMESPACE, job_name(i))
            ended[i] = now
            tick(len(ended), now)
        while next_submit < len(order) and jobs[order[next_submit]].submit <= now + EPS:
            i = order[next_submit]
            next_submit += 1
            store.create(_trace_workload(jobs[i], i, told[i]))
            pending += 1
        pending -= _admit(kueue, now, jobs, started, ends)
        if now >= next_tick - EPS:
            next_tick += step
            if pending:
                ticks += 1
                flow_tick(store, clock.now, policy)
                pending -= _admit(kueue, now, jobs, started, ends)
    return replay_stats(jobs, gpus, started, ended, ticks)


def _admit(kueue: KueueController, now: float, jobs: Sequence[TraceJob], started: dict[int, float],
           ends: list[tuple[float, int]]) -> int:
    """One Kueue pass; every Workload it admits starts now and ends after its true duration."""
    admitted = kueue.reconcile().admitted
    for ref in admitted:
        i = int(ref.rsplit("-", 1)[1])
        started[i] = now
        heapq.heappush(ends, (now + jobs[i].duration, i))
    return len(admitted)
