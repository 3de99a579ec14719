"""GPU quotas that are not whole numbers of GPUs (``1500m``, ``2.5``, ``1n``): never rounded, read or written.

Covers, from ClusterQueue objects as the API serves them through the snapshot to the patch gpuaas would
send: a cohort with such a nominal quota, borrowingLimit or lendingLimit gets no plan, and the reason names
the queue, flavor, field and value; every other cohort plans as before; for every cohort that is planned the
cohort's nominal quota per flavor is conserved exactly (against the quantities read, in ``Decimal``) and the
patch writes each planned integer exactly. On the write side alone: an entry's limits move by exact
arithmetic, and a queue edited to a fractional quota after the plan equals no plan's ``before``. Pure.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuaas.actions._quota_patches import gpu_entries, gpu_nominal, moved_entries, quota_patch
from gpuaas.models import Outcome
from gpuaas.operations.rebalance import plan
from gpuaas.policy import Policy
from gpuaas.quantity import parse_quantity_exact
from gpuaas.snapshot import kueue_snapshot
from gpuaas.sources import parse_cluster_queue
from gpuaas.sources.kube import KubeState

NOW = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
GPU = "nvidia.com/gpu"
FLAVORS = ("h100", "a100")
WHOLE = ["0", "1", "2", "3", "8", "4000m", 2, 5]
NOT_WHOLE = ["1500m", "500m", "2.5", "3500m", "1n", "1.0000005"]
FIELDS = ("nominalQuota", "borrowingLimit", "lendingLimit")
POLICY = Policy.model_validate({"rebalance": {"min_history_days": 0, "max_step_percent": 10_000,
                                              "hysteresis_gpus": 0, "reclaiming_lends": True}})


def cluster_queue(name: str, cohort: str, entries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A ClusterQueue as the API serves it: ``entries`` flavor -> its GPU resource's quota fields."""
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": name, "resourceVersion": "7"},
            "spec": {"cohortName": cohort, "preemption": {"reclaimWithinCohort": "Any"}, "namespaceSelector": {},
                     "resourceGroups": [{"coveredResources": [GPU], "flavors": [
                         {"name": f, "resources": [{"name": GPU, **fields}]} for f, fields in entries.items()]}]}}


def snapshot_of(objs: list[dict[str, Any]]) -> Any:
    kube = KubeState("v1beta2", tuple(parse_cluster_queue(o) for o in objs), (), (), (), (), (), (), (), 0)
    return kueue_snapshot(NOW, kube)


def exact(value: Any) -> Decimal:
    return parse_quantity_exact(value)


def history(uses: dict[tuple[str, str], float]) -> pd.DataFrame:
    rows = [{"cluster_queue": q, "flavor": f, "stat": stat, "value": v}
            for (q, f), use in uses.items() for stat, v in (("usage_p", use), ("reservation_p", use),
                                                            ("history_seconds", 7 * 86400.0))]
    return pd.DataFrame(rows, columns=["cluster_queue", "flavor", "stat", "value"])


@st.composite
def fleets(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[tuple[str, str], float]]:
    """One to three cohorts of one to three queues, each with quotas whole or not, limits or none, and a use."""
    objs, uses = [], {}
    for c in range(draw(st.integers(1, 3))):
        flavors = FLAVORS[: draw(st.integers(1, 2))]
        fractional = draw(st.booleans())
        for i in range(draw(st.integers(1, 3))):
            entries: dict[str, dict[str, Any]] = {}
            for f in flavors:
                pool = WHOLE + NOT_WHOLE if fractional else WHOLE
                fields: dict[str, Any] = {"nominalQuota": draw(st.sampled_from(pool))}
                for limit in ("borrowingLimit", "lendingLimit"):
                    if draw(st.integers(0, 3)) == 0:
                        fields[limit] = draw(st.sampled_from(pool))
                if "lendingLimit" in fields and exact(fields["lendingLimit"]) > exact(fields["nominalQuota"]):
                    fields["lendingLimit"] = fields["nominalQuota"]  # Kueue's webhook: lendingLimit <= nominalQuota
                entries[f] = fields
                uses[(f"c{c}-q{i}", f)] = float(draw(st.sampled_from([0, 1, 3, 12])))
            objs.append(cluster_queue(f"c{c}-q{i}", f"cohort-{c}", entries))
    return objs, uses


def offending(objs: list[dict[str, Any]]) -> dict[str, list[tuple[str, str, str]]]:
    """cohort -> (queue, flavor, field) of each GPU quota that is not a whole number, by the quantities alone."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    for obj in objs:
        cohort = obj["spec"]["cohortName"]
        out.setdefault(cohort, [])
        for f in obj["spec"]["resourceGroups"][0]["flavors"]:
            for field in FIELDS:
                value = f["resources"][0].get(field)
                if value is not None and exact(value) != exact(value).to_integral_value():
                    out[cohort].append((obj["metadata"]["name"], f["name"], field))
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets())
def test_only_whole_cohorts_are_planned_their_totals_are_conserved_and_the_patch_writes_the_plan(
        fleet: tuple[list[dict[str, Any]], dict[tuple[str, str], float]]) -> None:
    objs, uses = fleet
    by_name = {o["metadata"]["name"]: o for o in objs}
    bad = offending(objs)
    result = plan(snapshot_of(objs), history(uses), POLICY)
    assert {o.cohort for o in result.cohorts} == set(bad)
    for outcome in result.cohorts:
        if bad[outcome.cohort]:
            assert outcome.plan is None and outcome.result == Outcome.no_plan
            assert outcome.error is not None
            for queue, flavor, field in bad[outcome.cohort]:
                assert f"{queue} {flavor} {field} is " in outcome.error
            assert "not a whole number of GPUs: not planned" in outcome.error
            continue
        assert outcome.plan is not None, outcome.error
        read: dict[str, Decimal] = {}
        planned: dict[str, int] = {}
        written: dict[str, Decimal] = {}
        for change in outcome.plan.changes:
            obj = by_name[change.queue]
            was = gpu_entries(obj, [GPU], [change.flavor])[change.flavor][GPU]["nominalQuota"]
            assert change.before == exact(was)  # the plan's ``before`` is the quantity read, not a rounding of it
            read[change.flavor] = read.get(change.flavor, Decimal(0)) + exact(was)
            planned[change.flavor] = planned.get(change.flavor, 0) + change.after
            patch = quota_patch(obj, {change.flavor: change.after}, 1, [GPU], manage_limits=False)
            [sent] = [r for g in patch["spec"]["resourceGroups"] for f in g["flavors"] if f["name"] == change.flavor
                      for r in f["resources"]]
            assert exact(sent["nominalQuota"]) == change.after and isinstance(change.after, int)
            written[change.flavor] = written.get(change.flavor, Decimal(0)) + exact(sent["nominalQuota"])
        assert planned == read == written  # per flavor, exactly: the cohort's total is conserved
    alone = [o for o in objs if not bad[o["spec"]["cohortName"]]]
    if alone:  # the whole cohorts plan as they would without the others beside them
        assert moves(plan(snapshot_of(alone), history(uses), POLICY).cohorts) == moves(
            [o for o in result.cohorts if not bad[o.cohort]])


def moves(outcomes: list[Any]) -> list[tuple[str, str, str, int, int]]:
    return [(o.cohort, c.queue, c.flavor, c.before, c.after) for o in outcomes for c in o.plan.changes]


def test_the_reviewed_cohort_gets_no_plan_naming_the_quota_and_the_whole_one_beside_it_plans() -> None:
    objs = [cluster_queue("odd-a-cq", "oddco", {"h100": {"nominalQuota": "1500m"}, "a100": {"nominalQuota": "3500m"}}),
            cluster_queue("odd-b-cq", "oddco", {"h100": {"nominalQuota": "0"}, "a100": {"nominalQuota": "1500m"}}),
            cluster_queue("team-a-cq", "c", {"h100": {"nominalQuota": 12}}),
            cluster_queue("team-b-cq", "c", {"h100": {"nominalQuota": 4}})]
    uses = {("odd-b-cq", "a100"): 3.0, ("team-a-cq", "h100"): 0.0, ("team-b-cq", "h100"): 10.0}
    whole, odd = plan(snapshot_of(objs), history(uses), POLICY).cohorts  # sorted by name
    assert odd.cohort == "oddco" and odd.plan is None and odd.result == Outcome.no_plan
    assert odd.error == ("odd-a-cq h100 nominalQuota is 1500m, not a whole number of GPUs: not planned; "
                         "odd-a-cq a100 nominalQuota is 3500m, not a whole number of GPUs: not planned; "
                         "odd-b-cq a100 nominalQuota is 1500m, not a whole number of GPUs: not planned")
    assert whole.cohort == "c" and whole.plan is not None and whole.plan.moved_gpus > 0
    assert sum(c.after for c in whole.plan.changes) == 16


@pytest.mark.parametrize(("limit", "value", "manage", "written"), [
    ("lendingLimit", "1500m", False, "1.5"),        # below the new quota: left as it is, exactly
    ("lendingLimit", "1500m", True, "3.5"),         # moves with the quota (+2): 1.5 + 2
    ("borrowingLimit", "2500m", True, "0.5"),       # moves against it: 2.5 - 2
    ("lendingLimit", "4", True, "6"),               # whole stays whole, in the type it was read with
], ids=["lending-kept", "lending-moves", "borrowing-moves", "whole"])
def test_a_limit_is_moved_by_exact_arithmetic_never_rounded(limit: str, value: str, manage: bool,
                                                           written: str) -> None:
    before = {"h100": {GPU: {"nominalQuota": "4", limit: value}}}
    after = moved_entries(before, {"h100": 6}, manage)["h100"][GPU]
    assert after["nominalQuota"] == "6" and after[limit] == written


def test_a_quota_edited_to_a_fraction_equals_no_whole_plan_before_and_a_fractional_target_is_refused() -> None:
    obj = cluster_queue("q", "c", {"h100": {"nominalQuota": "1500m"}})
    [live] = gpu_nominal(obj, [GPU]).values()
    assert live == Decimal("1.5") and live not in (1, 2)  # the apply compares it with the plan's whole ``before``
    with pytest.raises(TypeError):
        moved_entries(gpu_entries(obj, [GPU], ["h100"]), {"h100": 2.5}, False)  # type: ignore[dict-item]
