"""``binding_resources``: a GPU gain the same flavor's cpu or memory quota would stop is named. Pure."""

from __future__ import annotations

import pandas as pd

from gpuaas.policies.quotas import QuotaChange, binding_resources

GPU = ["nvidia.com/gpu"]


def quotas(cpu_nominal: float, cpu_used: float, gpu_used: float) -> pd.DataFrame:
    return pd.DataFrame([
        {"cluster_queue": "a", "flavor": "h100", "resource": "nvidia.com/gpu", "nominal": 8.0, "usage": gpu_used},
        {"cluster_queue": "a", "flavor": "h100", "resource": "cpu", "nominal": cpu_nominal, "usage": cpu_used},
        {"cluster_queue": "b", "flavor": "h100", "resource": "nvidia.com/gpu", "nominal": 8.0, "usage": 0.0},
    ])


GAIN = [QuotaChange("a", "h100", 8, 12, ""), QuotaChange("b", "h100", 8, 4, "")]


def test_a_gain_the_cpu_quota_would_stop_is_named() -> None:
    # a's workloads use 16 cpu for 8 GPUs: 2 a GPU; at 12 GPUs they would need 24 cpu, above its 20.
    assert binding_resources(quotas(20.0, 16.0, 8.0), GAIN, GPU) == [
        "a h100: 8 -> 12 GPUs would need about 24 cpu at its workloads' 2 per GPU, above the 20 of its quota; "
        "the plan is refused until cpu moves too"]


def test_room_enough_or_nothing_in_use_or_a_loss_is_not_named() -> None:
    assert binding_resources(quotas(24.0, 16.0, 8.0), GAIN, GPU) == []  # 24 cpu fit 12 GPUs at 2 each
    assert binding_resources(quotas(20.0, 0.0, 0.0), GAIN, GPU) == []  # no GPU in use: no ratio to go by
    assert binding_resources(quotas(1.0, 16.0, 8.0), [QuotaChange("a", "h100", 8, 4, "")], GPU) == []
