"""The load generator's pure parts: the Poisson schedule, the config and loopback rule, a step's row.

Cases: inter-arrival gaps of a long step have a coefficient of variation near 1 and a mean
within 5 % of 1/rate; the schedule is seeded, bounded and open loop (fixed before sending);
a step is never cut short by the request cap (a rate that would need more is refused); loopback
URLs only unless allowed; bad rates name the item; a step whose requests left late, or never
left, is flagged client-limited; a step is judged on its steady part (the warm-up excluded), and
one whose server fell behind or whose latency kept growing fails although its quantile is under
the SLO; prompts are distinct and seeded, with the configured length distributions.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuaas.errors import ActionRefused, ConfigError
from gpuaas.loadtest import (
    LoadTestConfig,
    RequestResult,
    is_loopback,
    parse_rates,
    poisson_schedule,
    step_passes,
    summarize_step,
)


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
def test_schedule_never_exceeds_its_bounds_and_is_never_cut_short(rate: float, duration: float, cap: int,
                                                                   seed: int) -> None:
    n = max(1, int(round(rate * duration)))
    if n > cap:  # refused, never shortened: a cut step would not reach its steady state
        with pytest.raises(ValueError, match="over the cap"):
            poisson_schedule(rate, duration_s=duration, max_requests=cap, seed=seed)
        return
    times = poisson_schedule(rate, duration_s=duration, max_requests=cap, seed=seed)
    assert len(times) == n and all(0 <= t < duration for t in times)
    assert times == sorted(times)


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
    ("5e-324,1", r"rates: item 1 must be at least one request a day \(1.16e-05\)"),
])
def test_bad_rates_name_the_item(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_rates(text)


def test_bad_config_names_the_field() -> None:
    with pytest.raises(ConfigError, match="max_requests_per_step: must be within"):
        _config(max_requests_per_step=0)
    # 30 rps x (10 s warm-up + 60 s) = 2,100 requests: over a cap of 500, refused rather than cut short
    with pytest.raises(ConfigError, match=r"max_requests_per_step: 30 rps x 70 s .* is 2,100 requests, over the "
                                          r"cap of 500; a step is never cut short"):
        _config(rates=(10.0, 30.0), max_requests_per_step=500)
    assert (_config().step_seconds, _config().warmup_seconds) == (60.0, 10.0)  # steady state by default
    with pytest.raises(ConfigError, match="slo_quantile: unknown quantile 'p42'"):
        _config(slo_quantile="p42")


@pytest.mark.parametrize(("field", "value", "message"), [
    ("prompt_tokens", 1_048_577, "must be at most 1,048,576"),
    ("output_tokens", 10**12, "must be at most 1,048,576"),
    ("replicas", 10_000_001, "must be at most 10,000,000"),
    ("gpus", 10**30, "must be at most 10,000,000"),
    ("slo_seconds", 1e308, r"must be at most a day \(86400\)"),
    ("max_lateness_seconds", float("inf"), r"must be within \(0, 3600\]"),
    ("rates", (5e-324, 1.0), r"must be increasing rates of at least one request a day"),
])
def test_a_value_past_its_bound_is_refused_before_anything_is_sent(field: str, value: object, message: str) -> None:
    """The flow's own check, whatever starts it (the CLI's flags are bounded too): past these a step builds absurd
    prompts, or the capacity policy refuses the step's row only after its load was sent."""
    with pytest.raises(ConfigError, match=f"^{field}: {message}"):
        _config(**{field: value})
    if field != "rates":
        bound = {"prompt_tokens": 1_048_576, "output_tokens": 1_048_576, "replicas": 10_000_000,
                 "gpus": 10_000_000, "slo_seconds": 86_400.0, "max_lateness_seconds": 3600.0}[field]
        assert getattr(_config(**{field: bound}), field) == bound  # the bound itself is taken


def _result(i: int, lateness: float | None, e2e: float | None = 0.5, ok: bool = True, at: float | None = None,
            warmup: float = 0.0) -> RequestResult:
    scheduled = i * 0.25 if at is None else at
    return RequestResult(step=0, rate_rps=4, index=i, scheduled_s=scheduled, measured=scheduled >= warmup,
                         prompt_tokens=10, max_tokens=8, lateness_s=lateness, ttft_s=0.1, e2e_s=e2e,
                         itl_s=None if e2e is None else (e2e - 0.1) / 7, output_tokens=8, status=200 if ok else 503,
                         ok=ok, quality_ok=ok)


def test_step_row_quantiles_success_and_client_limit() -> None:
    config = _config(max_lateness_seconds=0.05, warmup_seconds=0.0, step_seconds=2.0)
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


def test_a_step_is_judged_on_its_steady_part() -> None:
    """10 rps: a 2 s warm-up (20 slow requests, 3 s each: excluded), then 10 s of 100 requests answered in
    0.2 s: p95 0.2 s, all completed inside the steady part, no growth; 10 prompt and 8 output tokens each:
    100 and 80 tokens/s; inter-token latency (0.2 - 0.1) / 7."""
    config = _config(warmup_seconds=2.0, step_seconds=10.0, slo_seconds=1.0)
    warm = [_result(i, 0.001, e2e=3.0, at=i * 0.1, warmup=2.0) for i in range(20)]
    steady = [_result(20 + i, 0.001, e2e=0.2, at=2.0 + i * 0.1, warmup=2.0) for i in range(100)]
    row = summarize_step(warm + steady, config, 10.0, [r.scheduled_s for r in warm + steady], wall_s=13)
    assert (row["requests"], row["warmup_requests"], row["latency_p95_s"]) == (100, 20, pytest.approx(0.2))
    assert row["achieved_ratio"] == 1.0 and row["latency_growth"] == pytest.approx(1.0)
    assert (row["input_tokens_per_s"], row["output_tokens_per_s"]) == (100.0, 80.0)
    assert row["itl_p50_s"] == pytest.approx(0.1 / 7)
    assert step_passes(row, config)


def test_a_growing_queue_fails_although_its_p95_is_under_the_slo() -> None:
    """Latency grows 0.1 s -> 0.6 s over the steady part: p95 0.58 s < SLO 1 s, but x6 from its first third
    to its last: not a steady state. And a step whose server answers one request every 0.15 s while they
    are due every 0.1 s fails too: its answers come back at 67 % of the offered rate."""
    config = _config(warmup_seconds=0.0, step_seconds=10.0, slo_seconds=1.0)
    growing = [_result(i, 0.0, e2e=0.1 + 0.5 * i / 99, at=i * 0.1) for i in range(100)]
    row = summarize_step(growing, config, 10.0, [r.scheduled_s for r in growing], wall_s=11)
    assert row["latency_p95_s"] < 1.0 and row["latency_growth"] > 1.5
    assert not step_passes(row, config)
    behind = [_result(i, 0.0, e2e=0.2 + 0.05 * i, at=i * 0.1) for i in range(100)]
    behind_row = summarize_step(behind, config, 10.0, [r.scheduled_s for r in behind], wall_s=15)
    assert behind_row["achieved_ratio"] == pytest.approx(0.1 / 0.15) and not step_passes(behind_row, config)
    # latency that falls over the step (a queue draining) is a negative growth, not a bad row
    draining = [_result(i, 0.0, e2e=0.6 - 0.5 * i / 99, at=i * 0.1) for i in range(100)]
    drained = summarize_step(draining, config, 10.0, [r.scheduled_s for r in draining], wall_s=11)
    assert drained["latency_growth_s"] < 0 and step_passes(drained, config)
    # one slow answer at the end is no backlog: the middle 80 % of the answers kept pace
    straggler = [_result(i, 0.0, e2e=0.2 if i < 99 else 3.0, at=i * 0.1) for i in range(100)]
    assert summarize_step(straggler, config, 10.0, [r.scheduled_s for r in straggler], wall_s=13)[
        "achieved_ratio"] == pytest.approx(1.0)
    import pandas as pd

    from gpuaas.policies.cost import sustainable_capacity

    verdict = sustainable_capacity(pd.DataFrame([behind_row]), slo_quantile="p50", slo_seconds=1.0)
    assert "achieved 66.7% of the offered rate (< 95%): the server did not keep up" in verdict.reason


def test_the_achieved_rate_is_never_above_the_offered_rate() -> None:
    """A 4 s steady part with 18 requests (4.5 rps offered, a warm-up rate of 5 rps landing 18 in it), every
    one answered in 0.1 s: the server kept pace (ratio 1.0), so its answers came back at 4.5 rps. The rate
    was read as 0.8 x 18 / (the 10th-90th percentile span of the completions) = 4.76 rps, above the offered
    4.5: the span of 18 points between those percentiles is shorter than 80 % of the step. The achieved rate
    is the offered rate times the ratio, the one estimate both columns agree on."""
    config = _config(warmup_seconds=0.0, step_seconds=4.0)
    results = [_result(i, 0.001, e2e=0.1, at=i * 4.0 / 18) for i in range(18)]
    row = summarize_step(results, config, 5.0, [r.scheduled_s for r in results], wall_s=4.2)
    assert row["offered_rps"] == pytest.approx(4.5) and row["achieved_ratio"] == pytest.approx(1.0)
    assert row["achieved_rps"] == pytest.approx(4.5)
    behind = [_result(i, 0.0, e2e=0.2 + 0.05 * i, at=i * 0.1) for i in range(100)]
    behind_row = summarize_step(behind, _config(warmup_seconds=0.0, step_seconds=10.0), 10.0,
                                [r.scheduled_s for r in behind], wall_s=15)
    assert behind_row["achieved_rps"] == pytest.approx(behind_row["offered_rps"] * behind_row["achieved_ratio"])


def test_prompts_are_distinct_seeded_and_follow_their_length_distributions() -> None:
    from gpuaas.loadtest._corpus import request_specs

    specs = request_specs(500, prompt_tokens=100, output_tokens=32, prompt_spread=0.5, output_spread=0.25, seed=3)
    assert len({s.prompt.split()[0:8].__str__() for s in specs}) == 500  # no shared prefix
    assert specs == request_specs(500, prompt_tokens=100, output_tokens=32, prompt_spread=0.5, output_spread=0.25,
                                  seed=3)
    assert specs != request_specs(500, prompt_tokens=100, output_tokens=32, prompt_spread=0.5,
                                  output_spread=0.25, seed=3, step=1)
    lengths = [s.prompt_tokens for s in specs]
    assert all(len(s.prompt.split()) == s.prompt_tokens for s in specs)
    assert min(lengths) >= 50 and max(lengths) <= 150 and abs(np.mean(lengths) - 100) < 5
    assert {s.max_tokens for s in specs} <= set(range(24, 41)) and len({s.max_tokens for s in specs}) > 5
    fixed = request_specs(3, prompt_tokens=16, output_tokens=4)
    assert [(s.prompt_tokens, s.max_tokens) for s in fixed] == [(16, 4)] * 3


def test_a_step_whose_requests_fail_says_so_not_that_the_server_fell_behind() -> None:
    """Every request answered HTTP 500: no success to measure a rate or a latency by, and the reason is the errors
    (before, "the server did not keep up", with the 500s only in requests.csv)."""
    import pandas as pd

    from gpuaas.policies.cost import sustainable_capacity

    row = {"rate_rps": 2.0, "replicas": 1, "gpus": 1, "latency_p95_s": float("inf"), "quality": 0.0,
           "success_ratio": 0.0, "achieved_ratio": 0.0, "client_limited": False}
    verdict = sustainable_capacity(pd.DataFrame([row]), slo_quantile="p95", slo_seconds=1.0)
    assert not verdict.met
    assert "100.0% of its requests failed (their status and error are in requests.csv)" in verdict.reason
    assert "did not keep up" not in verdict.reason
    mostly = sustainable_capacity(pd.DataFrame([{**row, "latency_p95_s": 0.5, "quality": 0.9, "success_ratio": 0.9,
                                                 "achieved_ratio": 0.9}]), slo_quantile="p95", slo_seconds=1.0)
    assert not mostly.met and "10.0% of its requests failed" in mostly.reason



def test_a_step_that_sent_no_request_is_not_called_a_hundred_percent_failed() -> None:
    import pandas as pd

    from gpuaas.policies.cost import sustainable_capacity

    row = {"rate_rps": 0.01, "replicas": 1, "gpus": 1, "latency_p95_s": float("inf"), "success_ratio": 0.0,
           "requests": 0, "client_limited": False}
    verdict = sustainable_capacity(pd.DataFrame([row]), slo_quantile="p95", slo_seconds=1.0)
    assert not verdict.met and "failed" not in verdict.reason and "no answer to measure" in verdict.reason
