"""``gpuaas.operations.rebalance.plan`` as a pure function: a hand-made snapshot in, the decision out.

No cluster, no store, no history (the plan then works from what the snapshot shows now). Cohort
``c``: queue ``a`` holds all 4 of its H100 GPUs with 8 more pending for 2 hours, queue ``b`` holds
none of its 12. ``a``'s workloads use 4 cpu per GPU. Under the default policy (weight 1 each) a
queue below its weighted share whose demand is above its quota regains up to that share in one
plan: ``a``'s share is 16 / 2 = 8, its demand 4 held + 8 pending = 12, so 4 -> 8 and ``b`` 12 -> 8
(4 GPUs moved, within the 8 that a plan with little history may move).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
import pytest

from gpuaas.errors import ConfigError
from gpuaas.models import Outcome, Snapshot, SourceStatus
from gpuaas.operations.rebalance import RebalanceAuditView, history_window, plan
from gpuaas.policy import Policy

NOW = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
GPU = "nvidia.com/gpu"


def cell(queue: str, resource: str, nominal: float, used: float) -> dict[str, object]:
    return {"cluster_queue": queue, "cohort": "c", "flavor": "h100", "resource": resource, "nominal": nominal,
            "borrowing_limit": None, "lending_limit": None, "reserved": used, "usage": used, "borrowed": 0.0}


def snapshot(a_cpu_quota: float, sources: dict[str, SourceStatus] | None = None) -> Snapshot:
    quotas = pd.DataFrame([cell("a", GPU, 4, 4.0), cell("a", "cpu", a_cpu_quota, 16.0), cell("b", GPU, 12, 0.0)])
    queues = pd.DataFrame([{"name": "a", "pending_gpus": 8.0, "oldest_pending_seconds": 7200.0},
                           {"name": "b", "pending_gpus": 0.0, "oldest_pending_seconds": float("nan")}])
    return Snapshot(collected_at=NOW, windows_minutes=(30.0,),
                    sources=sources or {"kube": SourceStatus("kube", ok=True)}, quotas=quotas, queues=queues)


def moves(snap: Snapshot) -> dict[str, tuple[int, int]]:
    [c] = plan(snap, pd.DataFrame(), Policy()).cohorts
    assert c.plan is not None, c.error
    return {ch.queue: (ch.before, ch.after) for ch in c.plan.changes if ch.before != ch.after}


def test_with_cpu_room_the_waiting_queue_gains_one_step() -> None:
    # 32 cpu fit 8 GPUs at 4 each: nothing binds.
    assert moves(snapshot(a_cpu_quota=32.0)) == {"a": (4, 8), "b": (12, 8)}


def test_a_gain_the_cpu_quota_would_stop_is_no_plan_with_that_reason() -> None:
    # 8 GPUs at 4 cpu each need 32 cpu; a's quota is 24.
    result = plan(snapshot(a_cpu_quota=24.0), pd.DataFrame(), Policy())
    [c] = result.cohorts
    assert (c.cohort, c.plan, c.result) == ("c", None, Outcome.no_plan)
    assert c.error == ("a h100: 4 -> 8 GPUs would need about 32 cpu at its workloads' 4 per GPU, above the 24 of "
                       "its quota; the plan is refused until cpu moves too")
    assert result.moved_gpus == 0 and result.degraded is None


def test_a_degraded_snapshot_is_planned_the_same_and_marked_so_that_it_is_never_applied() -> None:
    sources = {"kube": SourceStatus("kube", ok=True),
               "prometheus": SourceStatus("prometheus", ok=False, error="timed out", required=True)}
    result = plan(snapshot(32.0, sources), pd.DataFrame(), Policy(), history_error="connection refused")
    assert result.degraded == "prometheus: timed out; history: connection refused"
    [c] = result.cohorts
    assert c.result == Outcome.planned and c.plan is not None and c.plan.moved_gpus == 4  # shown, as when complete


def test_what_the_audit_log_says_was_moved_lately_reaches_the_planner() -> None:
    # The no-reversal rule's input: the audit view read beforehand, per queue and flavor.
    audit = RebalanceAuditView(recent_change={("a", "h100"): -2, ("b", "h100"): 2})
    [c] = plan(snapshot(32.0), pd.DataFrame(), Policy(), audit=audit).cohorts
    assert {q.name: dict(q.recent_change) for q in c.demand.queues} == {"a": {"h100": -2}, "b": {"h100": 2}}


def test_the_days_moves_reach_the_planner_and_spend_its_steps_and_cap() -> None:
    # Earlier today a plan took a from 4 to 8 (its share) and b from 12 to 8. a still waits for 4 more, and b,
    # allowed to lend below its share here, could give them: a's step, 50 % of its 8, would be 4. But a step
    # is a day's, of the quota before the day's plans: 50 % of 4 is 2, and a gained 4 already.
    audit = RebalanceAuditView(moved_24h={("a", "h100"): (4, 0), ("b", "h100"): (0, 4)})
    # No history at all here: min_history_days 0 lets b lend on it (the rule for a short history is tested on its own).
    policy = Policy.model_validate({"rebalance": {"reclaiming_lends": True, "min_history_days": 0}})
    today = snapshot(64.0)
    today.quotas.loc[today.quotas["resource"] == GPU, "nominal"] = [8, 8]
    [c] = plan(today, pd.DataFrame(), policy, audit=audit).cohorts
    assert {q.name: dict(q.moved_24h) for q in c.demand.queues} == {"a": {"h100": (4, 0)}, "b": {"h100": (0, 4)}}
    assert c.demand.limits.moved_24h_gpus == 4
    assert any(n.startswith("4 GPUs of quota already moved in this cohort in the last 22 hours") for n in c.demand.notes)
    assert c.plan is not None and c.plan.moved_gpus == 0
    [fresh] = plan(today, pd.DataFrame(), policy).cohorts  # the same quotas with no plan today: a takes its step
    assert fresh.plan is not None and fresh.plan.moved_gpus == 4


def test_a_cohort_that_holds_no_gpu_quota_is_named_not_planned_as_nothing() -> None:
    with pytest.raises(ConfigError) as refused:
        plan(snapshot(32.0), pd.DataFrame(), Policy(), cohort="research")
    assert str(refused.value) == "cohort: no cohort 'research' holds nvidia.com/gpu quota in the cluster (those that do: c)"
    [c] = plan(snapshot(32.0), pd.DataFrame(), Policy(), cohort="c").cohorts
    assert c.cohort == "c"


def test_a_history_window_beyond_a_year_is_refused_by_name() -> None:
    assert history_window(None, Policy()) == 7 and history_window(366, Policy()) == 366
    for bad in (0, -1, 366.5, 100_000):
        with pytest.raises(ConfigError, match=r"^history_days: must be above 0 and at most 366 days"):
            history_window(bad, Policy())


@pytest.mark.parametrize(("window_days", "little"), [(None, True), (1.0, False)])
def test_the_runs_history_window_decides_whether_a_days_history_is_short(window_days: float | None,
                                                                         little: bool) -> None:
    """A day of samples is short against the policy's 7-day window, and the whole of a ``--history-days 1``
    run's: the window the flow read reaches the demand."""
    rows = [{"cluster_queue": q, "flavor": "h100", "stat": "history_seconds", "value": 86400.0} for q in ("a", "b")]
    [c] = plan(snapshot(a_cpu_quota=64.0), pd.DataFrame(rows), Policy(), window_days=window_days).cohorts
    assert c.demand.little_history is little
