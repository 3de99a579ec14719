"""The preflight's telemetry check, and the cost report's coverage, name each activity metric once.

With ``GPUAAS_METRICS__GPU_ACTIVITY=DCGM_FI_DEV_GPU_UTIL`` (a fleet without profiling metrics) both settings name
GPU_UTIL, and the check said ``no series of DCGM_FI_DEV_GPU_UTIL or DCGM_FI_DEV_GPU_UTIL``.
"""

from __future__ import annotations

import pandas as pd
import pytest

from gpuaas.preflight_checks import SeriesCensus, Verdict, telemetry_check
from gpuaas.settings import MetricNames

UTIL = "DCGM_FI_DEV_GPU_UTIL"


@pytest.mark.parametrize(("metrics", "named"), [
    (MetricNames(gpu_activity=UTIL), UTIL),
    (MetricNames(), f"DCGM_FI_PROF_GR_ENGINE_ACTIVE or {UTIL}"),
], ids=["one-metric", "two-metrics"])
def test_the_metrics_are_named_once_each(metrics: MetricNames, named: str) -> None:
    blind = pd.DataFrame({"telemetry": ["unknown"], "gpus_observed": [0.0]})
    check = telemetry_check(blind, metrics, SeriesCensus(series={}, labelled={}))
    assert check.verdict is Verdict.failed
    assert check.detail.startswith(f"no series of {named} in Prometheus: is dcgm-exporter scraped?"), check.detail


def test_the_sentence_the_cost_reports_coverage_quotes_names_the_metrics_once_each() -> None:
    assert MetricNames(gpu_activity=UTIL).activity_names == UTIL
    assert MetricNames().activity_names == f"DCGM_FI_PROF_GR_ENGINE_ACTIVE or {UTIL}"
