"""Per-GPU evidence of a reclaim target: the GPUs of its pods in its namespace, for its window."""

from __future__ import annotations

import pandas as pd

from gpuaas.policies.reclaim import GpuEvidence, gpu_evidence


def _gpus() -> pd.DataFrame:
    rows = []
    for ns, pod, gpu, window, act in [("t1", "job-1-w-b", 1, 30.0, 0.01), ("t1", "job-1-w-a", 0, 30.0, 0.02),
                                      ("t1", "job-1-w-a", 1, 60.0, 0.03), ("t1", "job-10-w-a", 0, 30.0, 0.5),
                                      ("t2", "job-1-w-a", 0, 30.0, 0.9), ("t1", "", 3, 30.0, 0.0)]:
        rows.append({"namespace": ns, "pod": pod, "gpu": gpu, "host": "n1", "uuid": f"GPU-{ns}-{pod}-{gpu}",
                     "window_minutes": window, "activity_max": act, "activity_avg": act / 2,
                     "coverage": float("nan") if act == 0.5 else 1.0})
    return pd.DataFrame(rows)


def test_a_target_gets_its_own_pods_gpus_in_its_namespace_and_window_in_pod_order() -> None:
    evidence = GpuEvidence(_gpus())
    found = evidence.of("t1", "job-1", 30)
    assert [(r["pod"], r["gpu"]) for r in found] == [("job-1-w-a", "0"), ("job-1-w-b", "1")]
    assert found[0] == {"pod": "job-1-w-a", "host": "n1", "gpu": "0", "uuid": "GPU-t1-job-1-w-a-0",
                        "activity_max": 0.02, "activity_avg": 0.01, "coverage": 1.0}
    assert [r["activity_max"] for r in evidence.of("t1", "job-1", 60)] == [0.03]
    assert evidence.of("t1", "job-10", 30)[0]["coverage"] is None  # NaN is unknown, not a number
    assert [r["activity_max"] for r in evidence.of("t2", "job-1", 30)] == [0.9]
    assert evidence.of("t3", "job-1", 30) == []


def test_the_one_target_helper_answers_the_same_and_nothing_for_no_gpus() -> None:
    assert gpu_evidence(_gpus(), "t1", "job-1", 30.0) == GpuEvidence(_gpus()).of("t1", "job-1", 30.0)
    assert gpu_evidence(pd.DataFrame(), "t1", "job-1", 30.0) == []
