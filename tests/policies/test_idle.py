"""``find_idle``: idle only on positive evidence, with the rule resolved defaults -> kind -> tenant.

Hand-built workload frames (one 30-minute window); expectations computed by hand.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
import pytest

from gpuaas.policies.reclaim import find_idle, resolve_rule
from gpuaas.policy import FreeGoal, Policy, parse_policy

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def workload(name: str = "w", **over: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "kind": "RayCluster", "namespace": "team-a", "name": name, "uid": f"u-{name}", "tenant": "team-a",
        "queue": "team-a-queue", "cluster_queue": "team-a-cq", "state": "admitted", "gpus": 2.0,
        "owner_kind": "RayCluster", "owner_name": name, "created_at": NOW - timedelta(hours=2),
        "admitted_at": NOW - timedelta(hours=2), "reclaim": None, "gpus_observed": 2.0,
        "activity_max_30m": 0.01, "activity_avg_30m": 0.005, "coverage_30m": 1.0, "requests_30m": float("nan"),
        "activity_max_60m": 0.02, "activity_avg_60m": 0.01, "coverage_60m": 1.0, "requests_60m": float("nan"),
    }
    row.update(over)
    return row


def verdict(policy: Policy | None = None, **over: Any) -> pd.Series:
    frame = find_idle(pd.DataFrame([workload(**over)]), policy or Policy(), NOW)
    return frame.iloc[0]


CASES = [
    ({}, "idle", "every GPU"),
    ({"coverage_30m": 0.5}, "unknown", "telemetry incomplete"),
    ({"gpus_observed": 1.0}, "unknown", "telemetry incomplete"),
    ({"activity_max_30m": float("nan"), "coverage_30m": float("nan")}, "unknown", "telemetry incomplete"),
    ({"reclaim": "never"}, "excluded", "opted out"),
    ({"admitted_at": NOW - timedelta(minutes=20)}, "excluded", "grace period"),
    ({"admitted_at": None, "created_at": None}, "excluded", "grace period"),  # an age nobody recorded: not past it
    ({"activity_max_30m": 0.05}, "idle", "every GPU"),  # equal to the threshold counts as idle
    ({"activity_max_30m": 0.0501}, "busy", "above the threshold"),
    ({"kind": "InferenceService", "requests_30m": 12.0}, "busy", "served requests"),
    ({"kind": "InferenceService"}, "unknown", "no request metrics"),
    ({"kind": "InferenceService", "requests_30m": 0.0}, "idle", "every GPU"),
]


@pytest.mark.parametrize(("over", "expected", "reason"), CASES,
                         ids=["idle", "low-coverage", "gpu-unseen", "no-series", "opt-out", "grace", "no-age", "threshold-equal",
                              "above-threshold", "serving-traffic", "serving-no-metrics", "serving-idle"])
def test_verdicts(over: dict[str, Any], expected: str, reason: str) -> None:
    row = verdict(**over)
    assert row["verdict"] == expected and reason in row["reason"]


def test_an_incomplete_verdict_says_what_the_window_held() -> None:
    assert verdict(coverage_30m=0.5)["reason"] == "telemetry incomplete for the window (coverage 50%, 2/2 GPUs seen)"
    unseen = verdict(activity_max_30m=float("nan"), coverage_30m=float("nan"), gpus_observed=0.0)
    assert unseen["reason"] == "telemetry incomplete for the window (no sample in the window, 0/2 GPUs seen)"


def test_a_workload_its_job_no_longer_owns_is_named_with_the_step_that_frees_its_quota() -> None:
    left = {"kind": "Workload", "name": "statefulset-sts-1a2b3", "owner_kind": None, "owner_name": None,
            "job_owner_gvk": "apps/v1, Kind=StatefulSet", "job_owner_name": "sts", "gpus": 1.0, "gpus_observed": 0.0,
            "activity_max_30m": float("nan"), "coverage_30m": float("nan")}
    row = verdict(**left)
    assert row["verdict"] == "unknown" and not row["activity_decides"]
    assert row["reason"] == ("Kueue left this Workload without an owner after StatefulSet team-a/sts scaled to zero: "
                             "nothing will delete it and it keeps 1 GPU of quota; delete it (kubectl delete workload "
                             "-n team-a statefulset-sts-1a2b3)")
    # Still owned, or a Workload no job made: the usual verdicts.
    assert "telemetry incomplete" in verdict(**{**left, "owner_kind": "StatefulSet", "owner_name": "sts"})["reason"]
    assert "telemetry incomplete" in verdict(**{**left, "job_owner_gvk": None, "job_owner_name": None})["reason"]
    assert verdict()["verdict"] == "idle"  # a frame without the columns at all (an older snapshot)


def test_serving_kinds_need_a_known_zero_request_count() -> None:
    """A vLLM Deployment is a serving endpoint once the policy says so: no request metrics, no verdict."""
    assert verdict(kind="Deployment")["verdict"] == "idle"  # by default judged on GPU activity alone
    serving = parse_policy({"reclaim": {"serving_kinds": ["InferenceService", "Deployment"]}})
    row = verdict(serving, kind="Deployment")
    assert row["verdict"] == "unknown" and "no request metrics" in row["reason"]
    assert verdict(serving, kind="Deployment", requests_30m=0.0)["verdict"] == "idle"


def test_excluded_namespace_and_queue() -> None:
    assert verdict(Policy.model_validate({"reclaim": {"exclude_namespaces": ["team-a"]}}))["verdict"] == "excluded"
    assert verdict(Policy.model_validate({"reclaim": {"exclude_queues": ["team-a-cq"]}}))["verdict"] == "excluded"


def test_rule_precedence_defaults_then_kind_then_tenant() -> None:
    policy = parse_policy({"reclaim": {
        "window_minutes": 30, "activity_threshold": 0.05, "free": "quota",
        "kinds": {"RayCluster": {"window_minutes": 60, "activity_threshold": 0.1, "free": "compute"}}},
        "tenants": [{"name": "team-a", "namespaces": ["team-a"], "reclaim": {"activity_threshold": 0.2}}]})
    assert resolve_rule(policy, "Notebook", "team-b").window_minutes == 30
    rule = resolve_rule(policy, "RayCluster", "team-b")
    assert (rule.window_minutes, rule.activity_threshold, rule.free) == (60, 0.1, FreeGoal.compute)
    rule = resolve_rule(policy, "RayCluster", "team-a")
    assert (rule.window_minutes, rule.activity_threshold, rule.free) == (60, 0.2, FreeGoal.compute)
    row = verdict(policy)
    assert row["window_minutes"] == 60 and row["activity_max"] == 0.02  # evidence from the kind's 60 m window


def test_idle_seconds_is_the_longest_quiet_window_and_nan_unless_idle() -> None:
    assert verdict()["idle_seconds"] == 3600  # the 60 m window is quiet too
    assert verdict(activity_max_60m=0.5)["idle_seconds"] == 1800
    assert pd.isna(verdict(activity_max_30m=0.5)["idle_seconds"])


def test_workloads_that_hold_no_gpus_are_not_listed() -> None:
    frame = find_idle(pd.DataFrame([workload(gpus=0.0), workload("p", state="pending")]), Policy(), NOW)
    assert frame.empty


def test_nan_activity_with_full_coverage_is_unknown_never_idle() -> None:
    """Prometheus counts NaN samples in count_over_time but averages them to nothing."""
    row = verdict(activity_max_30m=float("nan"), activity_avg_30m=float("nan"))
    assert row["verdict"] == "unknown" and "telemetry incomplete" in row["reason"]
    assert verdict(activity_max_30m=float("inf"))["verdict"] == "busy"


@pytest.mark.parametrize("reading", [-1.0, -0.001, -1e308, float("-inf")], ids=["-1", "just-below-0", "-1e308", "-inf"])
def test_activity_below_zero_is_unknown_never_idle(reading: float) -> None:
    """A duty cycle is never below 0: such a reading (a recording rule that subtracts, a metric that is not
    activity) is no evidence of a quiet GPU, and the reason says what was read."""
    row = verdict(activity_max_30m=reading, activity_max_60m=reading)
    assert row["verdict"] == "unknown" and not row["activity_decides"]
    assert "below 0" in row["reason"] and "GPUAAS_METRICS__GPU_ACTIVITY" in row["reason"]
    assert pd.isna(row["idle_seconds"])


def test_nan_activity_says_its_samples_hold_no_value() -> None:
    row = verdict(activity_max_30m=float("nan"), activity_avg_30m=float("nan"))
    assert "no activity value" in row["reason"]
