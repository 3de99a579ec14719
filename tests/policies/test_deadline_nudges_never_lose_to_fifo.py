"""The deadlines flow's nudges, replayed through Kueue's model, never meet fewer deadlines than Kueue alone (FIFO).

Why this property: FIFO is the baseline the flow replaces, and each of its rules is a guard for it (a hold only
on a proven plan Kueue cannot undo, with slack for the work ahead running ``runtime_estimate_error`` times longer;
a demotion only of a deadline lost even at that many times shorter). So the property is checked with run times
told exactly and told up to that factor off either way. Random small traces (a few jobs on a few GPUs, run times in
5-minute steps, deadlines some multiple of the run time after submission, some none) are played twice through the
same Kueue model (``gpuaas.cluster.deadline_flow_replay``): once untouched, once with the flow ticking at its
cadence, as deployed (``plan`` of the ``deadlines`` operation on the snapshot of the objects).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuaas.cluster.deadline_flow_replay import replay_flow
from gpuaas.cluster.deadline_replay import replay_deadlines
from gpuaas.cluster.traces import TraceJob
from gpuaas.policy import DeadlinesPolicy

MINUTE = 60.0
ERROR = 2.0
"""The policy's ``runtime_estimate_error`` where estimates are off: the most they are off, either way."""


@st.composite
def traces(draw: st.DrawFn, factors: list[float]) -> tuple[int, list[TraceJob], list[float]]:
    """GPUs, the jobs, and the run time the flow is told of each (the true one times one of ``factors``)."""
    gpus = draw(st.integers(1, 4))
    jobs, told = [], []
    for _ in range(draw(st.integers(1, 7))):
        submit = draw(st.integers(0, 12)) * 5 * MINUTE
        duration = draw(st.integers(1, 24)) * 5 * MINUTE
        slack = draw(st.one_of(st.none(), st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0, 5.0])))
        deadline = None if slack is None else submit + duration * slack
        jobs.append(TraceJob("t", submit, duration, draw(st.integers(1, gpus)), deadline))
        told.append(duration * draw(st.sampled_from(factors)))
    return gpus, jobs, told


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces([1.0]), st.sampled_from([1.0, ERROR]), st.booleans(), st.sampled_from([300.0, 900.0]))
def test_told_the_run_times_the_flows_nudges_meet_at_least_the_deadlines_fifo_meets(
        trace: tuple[int, list[TraceJob], list[float]], error: float, give_up: bool, interval: float) -> None:
    gpus, jobs, told = trace
    fifo = replay_deadlines(jobs, gpus, planned=False)
    policy = DeadlinesPolicy(runtime_estimate_error=error, give_up_lost=give_up)
    flow = replay_flow(jobs, gpus, interval=interval, estimates=told, policy=policy)
    assert flow.met >= fifo.met, (fifo, flow)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces([1 / ERROR, 0.75, 1.0, 1.5, ERROR]), st.booleans(), st.sampled_from([300.0, 900.0]))
def test_told_run_times_off_within_the_policys_error_the_flows_nudges_meet_at_least_the_deadlines_fifo_meets(
        trace: tuple[int, list[TraceJob], list[float]], give_up: bool, interval: float) -> None:
    gpus, jobs, told = trace
    fifo = replay_deadlines(jobs, gpus, planned=False)
    policy = DeadlinesPolicy(runtime_estimate_error=ERROR, give_up_lost=give_up)
    flow = replay_flow(jobs, gpus, interval=interval, estimates=told, policy=policy)
    assert flow.met >= fifo.met, (fifo, flow)
