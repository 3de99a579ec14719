"""The deadline replay runs the deployed code: its tick nudges exactly as the flow's collect-and-plan path
(the kube source over HTTP, ``build_snapshot``, the operation's ``plan``) on the same emulator
state; a hand-checked trace where the flow's hold meets a deadline FIFO misses; one where giving up a
lost deadline meets another, and one where trusting an estimate twice too long would cost a deadline
FIFO meets; a policy that holds nothing gives FIFO's run exactly; the cadence is read from prefect.yaml."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest
import yaml

from gpuaas.cluster.apiserver import ApiServer, ObjectStore
from gpuaas.cluster.deadline_flow_replay import PREFECT_YAML, flow_interval, flow_tick, replay_flow
from gpuaas.cluster.deadline_replay import START, kueue_cluster, replay_deadlines
from gpuaas.cluster.kueue import KueueController
from gpuaas.cluster.kueue.testing import FakeClock, workload
from gpuaas.cluster.traces import TraceJob
from gpuaas.errors import ConfigError
from gpuaas.models import SourceStatus
from gpuaas.operations.deadlines import plan
from gpuaas.policies.deadlines import HOLD_ANNOTATION, Nudge
from gpuaas.policy import DeadlinesPolicy, Policy
from gpuaas.settings import GpuaasSettings
from gpuaas.snapshot import build_snapshot
from gpuaas.sources.kube import read_kube


def _annotated(name: str, gpus: int, runtime: str, deadline_h: float | None) -> dict[str, object]:
    obj = workload("trace", name, "lq", gpus)
    notes = {"gpuaas.io/expected-runtime": runtime}
    if deadline_h is not None:
        notes["gpuaas.io/deadline"] = (START + timedelta(hours=deadline_h)).isoformat()
    obj["metadata"]["annotations"] = notes
    return obj


def key(nudges: list[Nudge]) -> list[tuple[object, ...]]:
    return [(n.action, n.ref, n.outcome, n.release_at) for n in nudges]


def _flow_then_replay(store: ObjectStore, now: datetime, policy: DeadlinesPolicy,
                      tmp_path: Path) -> tuple[list[Nudge], list[Nudge]]:
    """The flow's nudges (the kube source over HTTP, ``build_snapshot``, ``plan``), then the replay's tick on the same state."""
    api = ApiServer(store)
    api.start()
    try:
        kube = read_kube(GpuaasSettings(kubeconfig=api.write_kubeconfig(tmp_path / "kc")))
    finally:
        api.stop()
    snapshot = build_snapshot(now, [30.0], {"kube": SourceStatus("kube", True)}, kube=kube, prom=None,
                              policy=Policy())
    flow = list(plan(snapshot, policy, now).nudges)
    return flow, flow_tick(store, now, policy)


def _cluster(gpus: int, running: tuple[int, str], *pending: tuple[str, int, str, float]
             ) -> tuple[FakeClock, ObjectStore, KueueController]:
    """``gpus`` GPUs with ``a`` admitted (GPUs, run time); one minute later the pending ones (name, GPUs, run time, due in h)."""
    clock, store, kueue = kueue_cluster(gpus)
    store.create(_annotated("a", *running, None))
    assert kueue.reconcile().admitted == ["trace/a"]
    clock.now = START + timedelta(minutes=1)
    for name, need, runtime, due in pending:
        store.create(_annotated(name, need, runtime, due))
    return clock, store, kueue


def test_the_replay_tick_nudges_as_the_flow_plans_on_the_same_state(tmp_path: Path) -> None:
    # 4 GPUs; a runs on 2 for 1h. Pending: slack (2 GPUs, 2h, due at 5h) first, urgent (4 GPUs, 1h, due at 2h).
    clock, store, kueue = _cluster(4, (2, "1h"), ("slack", 2, "2h", 5), ("urgent", 4, "1h", 2))
    policy = DeadlinesPolicy(runtime_estimate_error=1.0)  # the plan's holds with estimates trusted

    flow, replay = _flow_then_replay(store, clock.now, policy, tmp_path)
    assert key(replay) == key(flow)
    # The plan: urgent at 1h (when a ends), slack at 2h; each held until its start minus the 30-min margin.
    assert key(flow) == [("hold", "trace/slack", "planned", START + timedelta(hours=1, minutes=30)),
                         ("hold", "trace/urgent", "planned", START + timedelta(minutes=30))]
    for name in ("slack", "urgent"):
        held = store.get("Workload", "trace", name)
        assert held["spec"]["active"] is False and HOLD_ANNOTATION in held["metadata"]["annotations"]
    assert kueue.reconcile().admitted == []  # slack does not take the GPUs urgent needs at 1h


def test_the_replay_tick_demotes_as_the_flow_plans_on_the_same_state(tmp_path: Path) -> None:
    # 2 GPUs, a runs on both for 30 min. Pending: lost (2 GPUs, 3 h, due at 1 h) first, urgent (2 GPUs, 1 h, due at 2 h).
    clock, store, kueue = _cluster(2, (2, "30m"), ("lost", 2, "3h", 1), ("urgent", 2, "1h", 2))
    flow, replay = _flow_then_replay(store, clock.now, DeadlinesPolicy(), tmp_path)
    assert key(replay) == key(flow) == [("demote", "trace/lost", "planned", clock.now + timedelta(minutes=60))]
    assert store.get("Workload", "trace", "lost")["spec"]["priority"] == -1
    kueue.finish("trace", "a")
    assert kueue.reconcile().admitted == ["trace/urgent"]  # the newer one first: lost was demoted


# 4 GPUs. c (4 GPUs) runs 0-1h. slack (2 GPUs, 2h, due 6h) arrives at 60 s, urgent (4 GPUs, 1h, due 2.5h) at 120 s.
# FIFO at 1h: slack fits and starts (1h-3h), urgent waits until 3h and misses. The flow's tick at 15 min
# holds slack (planned at 2h), so urgent runs 1h-2h; slack is released at 1h30 and runs 2h-4h: both hold.
H = 3600.0
JOBS = [TraceJob("t", 0, H, 4, None), TraceJob("t", 60, 2 * H, 2, 6 * H), TraceJob("t", 120, H, 4, 2.5 * H)]


def test_the_flows_hold_meets_the_deadline_fifo_misses() -> None:
    fifo = replay_deadlines(JOBS, 4, planned=False)
    flow = replay_flow(JOBS, 4, interval=900)
    assert (fifo.met, flow.met) == (1, 2)
    assert flow.avg_jct_s == pytest.approx((H + (4 * H - 60) + (2 * H - 120)) / 3)


def test_estimates_reach_the_plan_only_through_the_annotation() -> None:
    # Told urgent runs 3h (past its deadline): the plan gives it up and holds nothing, so FIFO's order stays.
    fifo = replay_deadlines(JOBS, 4, planned=False)
    told = replay_flow(JOBS, 4, interval=900, estimates=[H, 2 * H, 3 * H])
    assert told.met == fifo.met == 1


def test_giving_up_a_lost_deadline_meets_one_that_fifo_misses() -> None:
    # 2 GPUs busy for 30 min. "lost" (older) runs 3 h and is due 1 h after it is submitted: lost even at
    # half its estimate. "urgent" runs 1 h, due 1 h 40 min after. FIFO runs lost first and urgent misses.
    jobs = [TraceJob("t", 0, H / 2, 2, None), TraceJob("t", 1, 3 * H, 2, 1 + H),
            TraceJob("t", 2, H, 2, 2 + 1.5 * H + H / 6 + H / 6)]
    assert replay_deadlines(jobs, 2, planned=False).met == 0
    given_up = replay_flow(jobs, 2, interval=900)  # the default
    assert given_up.met == 1  # lost demoted at the first run, urgent admitted when the GPUs free, lost after it
    assert given_up.avg_jct_s == pytest.approx((H / 2 + (H / 2 + H - 2) + (H / 2 + H + 3 * H - 1)) / 3)
    assert replay_flow(jobs, 2, interval=900, policy=DeadlinesPolicy(give_up_lost=False)).met == 0


def test_an_estimate_twice_too_long_gives_up_nothing_fifo_meets() -> None:
    # 2 GPUs busy for 30 min. a: runs 1 h, told 2 h, due 1 h 40 min after it is submitted (FIFO meets it);
    # b: runs 1 h, told 2 h, due later. Trusting the estimate (error 1) gives a up and it misses.
    jobs = [TraceJob("t", 0, H / 2, 2, None), TraceJob("t", 1, H, 2, 1 + 1.5 * H + H / 6),
            TraceJob("t", 2, H, 2, 2 + 2.5 * H + H / 6)]
    told = [H / 2, 2 * H, 2 * H]
    assert replay_deadlines(jobs, 2, planned=False).met == 2
    trusting = replay_flow(jobs, 2, interval=900, estimates=told,
                           policy=DeadlinesPolicy(give_up_lost=True, runtime_estimate_error=1.0))
    assert trusting.met == 1
    default_error = DeadlinesPolicy(give_up_lost=True)  # allows estimates twice too long
    assert replay_flow(jobs, 2, interval=900, estimates=told, policy=default_error).met == 2


def test_a_policy_that_holds_nothing_is_fifo() -> None:
    # A queue that builds up and drains; deadlines loose enough that the plan is cheap (EDF proves it).
    jobs = [TraceJob("t", 120.0 * i, 600.0 + 97 * (i % 7), 1 + i % 4, 120.0 * i + 9000 if i % 3 else None)
            for i in range(16)]
    fifo = replay_deadlines(jobs, 4, planned=False).to_dict()
    flow = replay_flow(jobs, 4, interval=300, policy=DeadlinesPolicy(max_holds_per_run=0)).to_dict()
    assert flow.pop("replans") > 0
    fifo.pop("replans")
    assert flow == fifo


def test_the_cadence_is_the_deployments_schedule(tmp_path: Path) -> None:
    doc = yaml.safe_load(PREFECT_YAML.read_text())
    deployed = next(d for d in doc["deployments"] if d["name"] == "deadlines")["schedules"][0]
    assert flow_interval() == float(deployed["interval"])
    path = tmp_path / "prefect.yaml"
    path.write_text("deployments:\n  - name: deadlines\n    schedules:\n      - cron: '*/5 * * * *'\n")
    assert flow_interval(path) == 300.0
    path.write_text("deployments:\n  - name: deadlines\n    schedules:\n      - cron: '0 2 * * *'\n")
    with pytest.raises(ConfigError, match="deadlines"):
        flow_interval(path)
