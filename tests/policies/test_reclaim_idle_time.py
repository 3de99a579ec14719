"""How long a workload has been idle (``idle_seconds``): the number its reason shows and the cap ranks by.

A longer collected window counts only if the workload was idle over all of it by the same rule that
decides the verdict: quiet GPUs and complete telemetry, and no request served in it (for a serving
kind, a known zero). Hand-built frames from ``tests.policies.test_idle``.
"""

from __future__ import annotations

import pandas as pd

from gpuaas.policies.reclaim import find_idle
from gpuaas.policy import Policy
from tests.policies.test_idle import NOW, verdict, workload


def test_a_serving_workload_that_served_requests_in_the_longer_window_is_not_idle_for_it() -> None:
    # Idle over the rule's 30 minutes (no request), but 40 requests in the last hour: idle 30 minutes, not an hour.
    row = verdict(kind="InferenceService", requests_30m=0.0, requests_60m=40.0)
    assert row["verdict"] == "idle"
    assert row["idle_seconds"] == 1800


def test_a_serving_workload_without_request_metrics_for_the_longer_window_is_not_idle_for_it() -> None:
    row = verdict(kind="InferenceService", requests_30m=0.0, requests_60m=float("nan"))
    assert row["verdict"] == "idle" and row["idle_seconds"] == 1800
    # A known zero over the hour: idle for the hour.
    assert verdict(kind="InferenceService", requests_30m=0.0, requests_60m=0.0)["idle_seconds"] == 3600


def test_any_workload_that_served_requests_in_the_longer_window_is_not_idle_for_it() -> None:
    assert verdict(requests_60m=3.0)["idle_seconds"] == 1800
    assert verdict()["idle_seconds"] == 3600  # no request metrics for a kind that is no serving one: GPUs decide


def test_the_cap_ranks_a_recently_serving_endpoint_below_one_idle_for_longer() -> None:
    frame = find_idle(pd.DataFrame([
        workload("served", kind="InferenceService", requests_30m=0.0, requests_60m=40.0),
        workload("quiet", kind="InferenceService", requests_30m=0.0, requests_60m=0.0),
    ]), Policy(), NOW).set_index("name")
    assert frame.loc["served", "idle_seconds"] < frame.loc["quiet", "idle_seconds"]
