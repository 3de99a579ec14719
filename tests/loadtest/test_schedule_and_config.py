"""The load generator's pure parts: the Poisson schedule, the config and loopback rule, a step's row.

Cases: inter-arrival gaps of a long step have a coefficient of variation near 1 and a mean
within 5 % of 1/rate; the schedule is seeded, bounded and open loop (fixed before sending);
the request cap keeps the offered rate; loopback URLs only unless allowed; bad rates name the
item; a step whose requests left late, or never left, is flagged client-limited.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuaas.errors import ActionRefused, ConfigError
from gpuaas.loadtest import LoadTestConfig, RequestResult, is_loopback, parse_rates, poisson_schedule, summarize_step


@pytest.mark.parametrize("rate", [0.5, 4.0, 50.0])
def test_long_step_is_poisson(rate: float) -> None:
    times = poisson_schedule(rate, duration_s=20_000 / rate, max_requests=100_000, seed=7)
    gaps = np.diff([0.0, *times])
    assert len(times) == 20_000
    assert abs(gaps.mean() - 1 / rate) <= 0.05 / rate
    assert 0.95 <= gaps.std() / gaps.mean() <= 1.05
    # exponential, not merely CV 1: the share of gaps above the mean is e^-1
    assert abs((gaps > 1 / rate).mean() - np.exp(-1)) < 0.02


def test_schedule_is_seeded_per_step_and_bounded() -> None:
    a = poisson_schedule(10, duration_s=5, max_requests=1000, seed=1, step=0)
    assert a == poisson_schedule(10, duration_s=5, max_requests=1000, seed=1, step=0)
    assert a != poisson_schedule(10, duration_s=5, max_requests=1000, seed=1, step=1)
    assert a != poisson_schedule(10, duration_s=5, max_requests=1000, seed=2, step=0)
    assert len(a) == 50 and a == sorted(a) and 0 <= a[0] and a[-1] < 5


@settings(max_examples=100, deadline=None)
@given(rate=st.floats(0.1, 500), duration=st.floats(0.1, 100), cap=st.integers(1, 2000), seed=st.integers(0, 99))
def test_schedule_never_exceeds_its_bounds_and_keeps_the_rate(rate: float, duration: float, cap: int,
                                                               seed: int) -> None:
    times = poisson_schedule(rate, duration_s=duration, max_requests=cap, seed=seed)
    assert len(times) <= cap and all(0 <= t < duration for t in times)
    assert times == sorted(times)
    if len(times) == cap:  # capped: the window shrank to cap / rate, the offered rate did not drop
        assert times[-1] <= cap / rate + 1e-9


@pytest.mark.parametrize(("url", "loopback"), [
    ("http://127.0.0.1:8000/v1", True), ("http://127.3.4.5", True), ("http://localhost:1", True),
    ("http://[::1]:9/v1", True), ("http://10.0.0.5:8000", False), ("https://api.example.com/v1", False),
    ("http://127.0.0.1.example.com", False),
])
def test_loopback(url: str, loopback: bool) -> None:
    assert is_loopback(url) is loopback


def _config(**kw: object) -> LoadTestConfig:
    args: dict[str, object] = {"url": "http://127.0.0.1:9/v1", "model": "m", "rates": (1.0, 2.0),
                               "slo_quantile": "p95", "slo_seconds": 1.0, **kw}
    return LoadTestConfig(**args)  # type: ignore[arg-type]


def test_remote_url_is_refused_unless_allowed() -> None:
    with pytest.raises(ActionRefused, match="not a loopback address.*--allow-remote"):
        _config(url="http://vllm.prod.svc:8000/v1").check_target()
    _config(url="http://vllm.prod.svc:8000/v1", allow_remote=True).check_target()
    assert _config().endpoint_url == "http://127.0.0.1:9/v1/completions"
    assert _config(api="chat", url="http://127.0.0.1:9/").endpoint_url == "http://127.0.0.1:9/v1/chat/completions"


@pytest.mark.parametrize(("text", "message"), [
    ("1,2,x", "rates: item 3 is not a number: 'x'"), ("1,0", "rates: item 2 must be a positive rate"),
    ("4,2", "rates: rates must increase"), ("1,1", "rates: rates must increase"),
])
def test_bad_rates_name_the_item(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_rates(text)


def test_bad_config_names_the_field() -> None:
    with pytest.raises(ConfigError, match="max_requests_per_step: must be within"):
        _config(max_requests_per_step=0)
    with pytest.raises(ConfigError, match="slo_quantile: unknown quantile 'p42'"):
        _config(slo_quantile="p42")


def _result(i: int, lateness: float | None, e2e: float | None = 0.5, ok: bool = True) -> RequestResult:
    return RequestResult(step=0, rate_rps=4, index=i, scheduled_s=i * 0.25, lateness_s=lateness, ttft_s=0.1,
                         e2e_s=e2e, output_tokens=8, status=200 if ok else 503, ok=ok, quality_ok=ok)


def test_step_row_quantiles_success_and_client_limit() -> None:
    config = _config(max_lateness_seconds=0.05)
    schedule = [i * 0.25 for i in range(8)]
    on_time = [_result(i, 0.001, e2e=0.1 * (i + 1)) for i in range(7)] + [_result(7, 0.001, None, ok=False)]
    row = summarize_step(on_time, config, 4.0, schedule, wall_s=2.5)
    assert row["requests"] == 8 and row["successes"] == 7 and row["quality"] == 7 / 8
    assert row["latency_p50_s"] == pytest.approx(0.4)  # over the 7 successes only: a fast 503 is no fast answer
    assert row["client_limited"] is False
    late = [_result(i, 0.2 if i == 3 else 0.001) for i in range(8)]
    assert summarize_step(late, config, 4.0, schedule, wall_s=2.5)["client_limited"] is True
    unsent = [_result(i, None if i == 7 else 0.0) for i in range(8)]
    row = summarize_step(unsent, config, 4.0, schedule, wall_s=2.5)
    assert row["unsent"] == 1 and row["client_limited"] is True
    nothing = summarize_step([_result(0, 0.0, None, ok=False)], config, 4.0, [0.0], wall_s=1)
    assert nothing["latency_p95_s"] == float("inf") and nothing["quality"] == 0
