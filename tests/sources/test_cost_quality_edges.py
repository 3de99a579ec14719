"""Quality-gated outcomes stay inside the window, on a real Prometheus with backfilled vLLM series.

History: a sample every 60 s on whole minutes, from 2 days and an hour before NOW to 10 minutes after it, of one
service (namespace ``team``, model ``m``, one pod): ``request_success_total`` (``stop``) rising by 30 + 7 x (k mod 11)
requests in minute k, every request within the 2 s SLO (so verified = the requests while quality held), and the
quality gauge ``eval_score`` at 0.9 except at the ``DIPS`` (0.5, under the 0.8 threshold).

The expected figures are computed here from those samples, as docs/cost-report.md defines them: the window's
5-minute steps end at its end and every 5 minutes before it, what is left at its start is a step of its own, and a
step's requests count when no quality sample in it is under the threshold. Subquery steps aligned to whole
5-minute marks instead counted a whole step for a 2-minute window (more verified requests than requests),
requests served while quality was under the threshold after the last mark, and 5 minutes before the window.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuaas.cluster.prometheus import PrometheusServer
from gpuaas.policies.cost import build_cost_report
from gpuaas.settings import GpuaasSettings, MetricNames, load_settings
from gpuaas.sources.cost_window import read_cost_inputs
from tests.sources.helpers import NOW

pytestmark = pytest.mark.integration
MARK = NOW.timestamp()  # a whole 5-minute mark
T0 = MARK - 2 * 86400 - 3600
MINUTES = (2 * 86400 + 3600 + 600) // 60
STEP, THRESHOLD = 300, 0.8
SERIES = {"namespace": "team", "model_name": "m", "pod": "p0"}

# (name, window end, window seconds): ends 1, 2, 3 minutes past a mark, windows under a step, of steps and a
# remainder, and of two days (two periods: the range query's points share the phase)
WINDOWS = [("2m", MARK - 3 * 3600 + 60, 120), ("3m", MARK - 2 * 3600 + 120, 180),
           ("47m", MARK - 3600 + 180, 47 * 60), ("2d", MARK + 60, 2 * 86400)]
DIPS = {MARK - 2 * 3600 + 60,  # inside the 3m window, after its only mark: none of its requests count
        MARK - 3600 + 120,  # the 47m window's last minute but one, after its last mark
        MARK - 3600 + 180 - 47 * 60 + 60,  # the 47m window's first minute: its 2-minute remainder does not count
        *(T0 + 60 * k for k in range(0, MINUTES, 97))}  # a dip every 97 minutes, at every phase of a step


def _served(k: int) -> float:
    return 30.0 + 7.0 * (k % 11)


def _samples() -> tuple[dict[float, float], dict[float, float]]:
    """(time -> requests counter, time -> quality) on every whole minute of the history."""
    counter, quality, total = {}, {}, 0.0
    for k in range(MINUTES + 1):
        ts = T0 + 60 * k
        total += _served(k)
        counter[ts], quality[ts] = total, 0.5 if ts in DIPS else 0.9
    return counter, quality


def _history() -> list[tuple[str, dict[str, str], float, float]]:
    counter, quality = _samples()
    out = []
    for ts, total in counter.items():
        out.append(("vllm:request_success_total", {**SERIES, "finished_reason": "stop"}, total, ts))
        out += [("vllm:e2e_request_latency_seconds_bucket", {**SERIES, "le": le}, total, ts)
                for le in ("1.0", "2.0", "+Inf")]
        out.append(("eval_score", SERIES, quality[ts], ts))
    return out


def _expected(end: float, window_s: float) -> tuple[float, float]:
    """(requests in the window, requests of its steps where quality held), from the samples alone."""
    counter, quality = _samples()
    bounds = sorted({end - window_s, *(end - STEP * j for j in range(int(window_s // STEP) + 1))})
    held = 0.0
    for lo, hi in zip(bounds, bounds[1:]):
        if all(q >= THRESHOLD for ts, q in quality.items() if lo < ts <= hi):
            held += counter[hi] - counter[lo]
    return counter[end] - counter[end - window_s], held


@pytest.fixture(scope="module")
def prom_settings(prometheus_factory: Callable[[Any], PrometheusServer],
                  tmp_path_factory: pytest.TempPathFactory) -> GpuaasSettings:
    prometheus = prometheus_factory(_history())
    tmp = tmp_path_factory.mktemp("quality-edges")
    policy = Path(tmp / "policy.yaml")
    policy.write_text(yaml.safe_dump({
        "tenants": [{"name": "team", "namespaces": ["team"]}],
        "services": [{"name": "svc", "namespace": "team", "model_name": "m", "latency_slo_seconds": 2.0,
                      "quality": {"metric": "eval_score", "threshold": THRESHOLD}}]}))
    return load_settings(prometheus_url=prometheus.url, nvml="off", data_dir=tmp, policy_file=policy,
                         metrics=MetricNames(sample_interval_seconds=60))


@pytest.mark.parametrize(("end", "window_s"), [(end, w) for _, end, w in WINDOWS], ids=[n for n, _, _ in WINDOWS])
def test_verified_requests_are_the_windows_own(prom_settings: GpuaasSettings, end: float, window_s: float) -> None:
    inputs = read_cost_inputs(prom_settings, datetime.fromtimestamp(end, UTC), window_s)
    [svc] = build_cost_report(inputs, prom_settings.policy).services
    requests, held = _expected(end, window_s)
    assert svc["slo_fraction"] == 1.0
    assert svc["requests"] == pytest.approx(requests, abs=0.5)
    assert svc["verified_outcomes"] <= svc["requests"]
    assert svc["verified_outcomes"] == pytest.approx(held, abs=1.0)
    # per period too: each day's steps end at that day's end
    good = inputs.serving[inputs.serving["stat"] == "quality_ok:eval_score"].groupby("day")["value"].sum()
    for day in range(inputs.days):
        period_end = end - (inputs.days - 1 - day) * inputs.period.total_seconds()
        assert good.get(day, 0.0) == pytest.approx(_expected(period_end, inputs.period.total_seconds())[1], abs=1.0)


def test_a_window_of_only_good_minutes_counts_them_all(prom_settings: GpuaasSettings) -> None:
    """The 2m window has no dip: every one of its requests is verified, not the whole step's 5 minutes."""
    end, window_s = WINDOWS[0][1], WINDOWS[0][2]
    [svc] = build_cost_report(read_cost_inputs(prom_settings, datetime.fromtimestamp(end, UTC), window_s),
                              prom_settings.policy).services
    k = int((end - T0) // 60)
    assert svc["verified_outcomes"] == svc["requests"] == _served(k) + _served(k - 1)



def test_requests_in_no_step_are_not_verified_and_noted() -> None:
    """The share of the steps' requests that quality held for, applied to the window's requests (never above 1);
    a key with requests and no step to judge them in counts none, with a note; other services' rows stay."""
    import pandas as pd

    from gpuaas.policy import parse_policy
    from gpuaas.sources._cost_quality import requests_while_held

    policy = parse_policy({"services": [{"name": "svc", "namespace": "team", "model_name": "m",
                                         "latency_slo_seconds": 2.0,
                                         "quality": {"metric": "eval_score", "threshold": THRESHOLD}}]})

    def row(pod: str, stat: str, value: float, model: str = "m") -> dict[str, Any]:
        return {"namespace": "team", "model_name": model, "day": 0, "stat": stat, "finished_reason": "stop",
                "le": "", "value": value, "pod": pod, "service": "", "hist": ""}

    serving = pd.DataFrame([row("a", "requests", 100.0), row("a", "quality_ok:eval_score", 60.0),
                            row("a", "quality_span:eval_score", 120.0),
                            row("b", "requests", 10.0), row("b", "quality_ok:eval_score", 9.0),
                            row("b", "quality_span:eval_score", 8.0),
                            row("c", "requests", 7.0),
                            row("d", "requests", 5.0, model="other")])
    notes: list[str] = []
    out = requests_while_held(serving, policy.services, notes)
    good = out[out["stat"] == "quality_ok:eval_score"].set_index("pod")["value"].to_dict()
    assert good == {"a": 50.0, "b": 10.0, "c": 0.0}
    assert set(out["stat"]) == {"requests", "quality_ok:eval_score"} and len(out[out["stat"] == "requests"]) == 4
    assert notes == ["quality eval_score: 7.0 requests of team/m fall in no 5-minute quality step with two samples "
                     "(a series shorter-lived than a step): not counted as served while quality held"]
