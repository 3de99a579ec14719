"""The rebalance headline counts cohorts in words that read right for 0, 1 and many: never "each of 1 cohorts"."""

from __future__ import annotations

from gpuaas.models import Outcome
from gpuaas.operations.rebalance import CohortOutcome
from gpuaas.policies.quotas import CohortDemand, QueueDemand, QuotaLimits, plan_quotas
from reports.rebalance import first_line, rebalance_markdown

LIMITS = QuotaLimits(8, 100, 32, 1)
STILL = [QueueDemand("a", {"a100": 7}, {"a100": 7}), QueueDemand("b", {"a100": 7}, {"a100": 7})]
"""Each queue uses its quota: the plan moves nothing."""
MOVING = [QueueDemand("a", {"a100": 7}, {"a100": 8}), QueueDemand("b", {"a100": 7}, {"a100": 6})]
"""``a`` wants one GPU more, ``b`` one less: the plan moves 1 GPU."""


def _cohorts(queues: list[QueueDemand], n: int) -> list[CohortOutcome]:
    return [CohortOutcome(f"c{i}", CohortDemand(f"c{i}", queues, LIMITS, 86400.0, False), plan_quotas(queues, LIMITS))
            for i in range(n)]


def test_no_move_in_no_one_and_many_cohorts() -> None:
    assert first_line([], "dry-run", None) == "Nothing to rebalance: no cohort with GPU quota."
    assert first_line(_cohorts(STILL, 1), "dry-run", None) == (
        "No quota moves: the plan of the 1 cohort keeps its quotas (planned 1).")
    assert first_line(_cohorts(STILL, 3), "dry-run", None) == (
        "No quota moves: the plans of all 3 cohorts keep their quotas (planned 3).")


def test_moves_in_the_only_cohort_and_in_one_of_several() -> None:
    assert first_line(_cohorts(MOVING, 1), "dry-run", None) == (
        "Dry-run: 1 GPU of quota would move in 1 cohort (planned 1); nothing was changed; "
        "to apply: gpuaas rebalance --apply.")
    assert first_line(_cohorts(MOVING, 1) + _cohorts(STILL, 1), "dry-run", None).startswith(
        "Dry-run: 1 GPU of quota would move in 1 of 2 cohorts (planned 2); ")


def test_an_applied_single_gpu_reads_singular() -> None:
    [one] = _cohorts(MOVING, 1)
    applied = CohortOutcome(one.cohort, one.demand, one.plan, plan_id=7, result=Outcome.applied)
    assert first_line([applied], "apply", None) == (
        "1 of 1 planned GPU of quota moved in 1 cohort (applied 1); to reverse: gpuaas undo 7.")
    assert "- **1 GPU** moved; weighted shortfall" in rebalance_markdown([applied], "apply", {}, None)
