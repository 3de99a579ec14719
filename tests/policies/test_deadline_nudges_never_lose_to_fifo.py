"""The deadlines flow's nudges, replayed through Kueue's model, never meet fewer deadlines than Kueue alone (FIFO).

Why this property: FIFO is the baseline the flow replaces, and each of its rules is a guard for it: a hold only on
a proven plan Kueue cannot undo, and only where Kueue's own order, played on the same estimates, misses a deadline
the plan meets; slack for the work ahead running ``runtime_estimate_error`` times longer; a demotion only of a
deadline lost even at that many times shorter, and not where Kueue's order would then meet fewer deadlines. So the
property is checked with run times told exactly and told up to that factor off either way. Small traces (a few
jobs on a few GPUs, run times in 5-minute steps, deadlines some multiple of the run time after submission, some
none) are played twice through the same Kueue model (``gpuaas.cluster.deadline_flow_replay``): once untouched,
once with the flow ticking at its cadence, as deployed (``plan`` of the ``deadlines`` operation on the snapshot of
the objects).

The examples are drawn the same way in every run (``derandomize``), so that the suite answers the same on every
machine; the traces written out are ones where the flow lost to FIFO before those guards.
"""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gpuaas.cluster.deadline_flow_replay import replay_flow
from gpuaas.cluster.deadline_replay import replay_deadlines
from gpuaas.cluster.traces import TraceJob
from gpuaas.policy import DeadlinesPolicy

MINUTE = 60.0
ERROR = 2.0
"""The policy's ``runtime_estimate_error`` where estimates are off: the most they are off, either way."""


def _job(submit: float, duration: float, gpus: int, deadline: float | None) -> TraceJob:
    """A job in minutes."""
    return TraceJob("t", submit * MINUTE, duration * MINUTE, gpus, None if deadline is None else deadline * MINUTE)


# A hold the plan did not need (Kueue's order met every deadline it knew of) left a GPU idle, and E, submitted
# later, paid: FIFO 4, the flow 3 (docs/planners.md, "What limits these numbers").
UNNEEDED_HOLD = [_job(0, 15, 3, None), _job(0, 30, 1, 150), _job(10, 70, 1, 360), _job(30, 30, 2, None),
                 _job(55, 30, 2, 205), _job(35, 30, 2, None), _job(0, 85, 2, 425)]
# Run times told half or twice the truth: a demotion that Kueue's order, played on the estimates, does worse with.
TOLD_WRONG = [_job(60, 5, 1, None), _job(60, 5, 1, None), _job(40, 45, 4, None), _job(0, 115, 4, None),
              _job(0, 5, 1, 2.5), _job(0, 5, 4, None), _job(40, 110, 1, 260)]
TOLD_WRONG_ESTIMATES = [150.0, 150.0, 1350.0, 3450.0, 150.0, 150.0, 3300.0]


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


@settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(traces([1.0]), st.sampled_from([1.0, ERROR]), st.booleans(), st.sampled_from([300.0, 900.0]))
@example((3, UNNEEDED_HOLD, [j.duration for j in UNNEEDED_HOLD]), 1.0, False, 300.0)
def test_told_the_run_times_the_flows_nudges_meet_at_least_the_deadlines_fifo_meets(
        trace: tuple[int, list[TraceJob], list[float]], error: float, give_up: bool, interval: float) -> None:
    gpus, jobs, told = trace
    fifo = replay_deadlines(jobs, gpus, planned=False)
    policy = DeadlinesPolicy(runtime_estimate_error=error, give_up_lost=give_up)
    flow = replay_flow(jobs, gpus, interval=interval, estimates=told, policy=policy)
    assert flow.met >= fifo.met, (fifo, flow)


@settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(traces([1 / ERROR, 0.75, 1.0, 1.5, ERROR]), st.booleans(), st.sampled_from([300.0, 900.0]))
@example((4, TOLD_WRONG, TOLD_WRONG_ESTIMATES), True, 300.0)
def test_told_run_times_off_within_the_policys_error_the_flows_nudges_meet_at_least_the_deadlines_fifo_meets(
        trace: tuple[int, list[TraceJob], list[float]], give_up: bool, interval: float) -> None:
    gpus, jobs, told = trace
    fifo = replay_deadlines(jobs, gpus, planned=False)
    policy = DeadlinesPolicy(runtime_estimate_error=ERROR, give_up_lost=give_up)
    flow = replay_flow(jobs, gpus, interval=interval, estimates=told, policy=policy)
    assert flow.met >= fifo.met, (fifo, flow)
