"""The sustainable-capacity policy: hand-computed sweeps, malformed ones, and properties.

Cases: every rate passes; the knee; a blip that passes above a failing rate (not counted);
the quality floor; a client-limited step ends the climb; never meets the SLO; forecast sizing
(ceil, also on float noise); each malformed input names its row and column.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuaas.errors import ConfigError
from gpuaas.policies.cost import sustainable_capacity


def sweep(*rows: tuple[float, float], replicas: float = 2, gpus: float = 4, **extra: list[object]) -> pd.DataFrame:
    """Rows of ``(rate_rps, latency_p95_s)`` on the same hardware."""
    df = pd.DataFrame({"rate_rps": [r for r, _ in rows], "replicas": replicas, "gpus": gpus,
                       "latency_p95_s": [lat for _, lat in rows]})
    for name, values in extra.items():
        df[name] = values
    return df


@pytest.mark.parametrize(
    ("rows", "want_rate", "want_knee"),
    [
        ([(1, 0.5), (2, 0.6), (4, 0.8), (8, 0.95)], 8, None),
        ([(1, 0.5), (2, 0.6), (4, 0.9), (8, 3.0)], 4, 8),
        # a blip: 16 rps passes again after 8 failed; it must not count
        ([(1, 0.5), (2, 0.6), (4, 0.9), (8, 3.0), (16, 0.7)], 4, 8),
        # rows out of order are sorted by rate first
        ([(8, 3.0), (1, 0.5), (4, 0.9), (2, 0.6)], 4, 8),
        # exactly at the SLO holds
        ([(1, 0.5), (2, 1.0), (4, 1.0001)], 2, 4),
    ],
    ids=["all-pass", "knee", "blip-above-failure", "unsorted", "at-the-slo"],
)
def test_sustainable_rate_is_the_top_of_the_unbroken_passing_range(
        rows: list[tuple[float, float]], want_rate: float, want_knee: float | None) -> None:
    result = sustainable_capacity(sweep(*rows), slo_quantile="p95", slo_seconds=1.0)
    assert result.met
    assert result.sustainable_rate_rps == want_rate
    assert result.knee_rate_rps == want_knee
    assert result.per_replica_rps == want_rate / 2
    assert result.per_gpu_rps == want_rate / 4


def test_blip_is_reported_as_passing_but_not_counted() -> None:
    result = sustainable_capacity(sweep((1, 0.5), (2, 3.0), (4, 0.5)), slo_quantile="p95", slo_seconds=1.0)
    blip = result.steps[2]
    assert (blip.passed, blip.counted) == (True, False)
    assert "lower rate (2 rps) failed" in blip.reason
    assert result.sustainable_rate_rps == 1


def test_quality_floor_stops_the_climb() -> None:
    df = sweep((1, 0.5), (2, 0.5), (4, 0.5), quality=[1.0, 0.97, 1.0])
    assert sustainable_capacity(df, slo_quantile="p95", slo_seconds=1, min_quality=0.99).sustainable_rate_rps == 1
    # no floor given: quality is not checked
    assert sustainable_capacity(df, slo_quantile="p95", slo_seconds=1).sustainable_rate_rps == 4


def test_client_limited_step_is_never_the_servers_capacity() -> None:
    df = sweep((1, 0.5), (2, 0.5), (4, 0.5), client_limited=["false", "true", "false"])
    result = sustainable_capacity(df, slo_quantile="p95", slo_seconds=1)
    assert result.sustainable_rate_rps == 1 and result.knee_rate_rps == 2
    assert "client could not keep its schedule" in result.reason


def test_other_quantile_reads_its_own_column() -> None:
    df = sweep((1, 0.5), (2, 0.6), latency_p99_s=[0.9, 1.5])
    assert sustainable_capacity(df, slo_quantile="p99", slo_seconds=1).sustainable_rate_rps == 1
    assert sustainable_capacity(df, slo_quantile="p95", slo_seconds=1).sustainable_rate_rps == 2


def test_never_meeting_the_slo_says_so() -> None:
    result = sustainable_capacity(sweep((1, 2.0), (2, 0.5)), slo_quantile="p95", slo_seconds=1, forecast_rps=10)
    assert not result.met
    assert result.sustainable_rate_rps is None and result.replicas_needed is None
    assert result.reason.startswith("never meets the SLO: at the lowest rate 1 rps")


@pytest.mark.parametrize(
    ("rate", "replicas", "gpus", "forecast", "want_replicas", "want_gpus"),
    [(4, 2, 4, 10, 5, 10), (4, 2, 4, 8, 4, 8), (4, 2, 4, 8.1, 5, 10), (4, 2, 4, 0, 0, 0),
     (0.1, 1, 1, 3 * 0.1, 3, 3),  # 0.30000000000000004 / 0.1 = 3.0000000000000004: 3 replicas, not 4
     (6, 3, 3, 7, 4, 4),
     (100_000, 1, 1, 0.00001, 1, 1)],  # one request a day on a 100,000 rps replica: 1e-10 of it, still one replica
    ids=["round-up", "exact", "just-over", "no-demand", "float-noise", "one-gpu-per-replica", "tiny-demand"],
)
def test_replicas_needed_is_the_ceiling_of_forecast_over_per_replica(
        rate: float, replicas: float, gpus: float, forecast: float, want_replicas: int, want_gpus: int) -> None:
    df = sweep((rate, 0.5), replicas=replicas, gpus=gpus)
    result = sustainable_capacity(df, slo_quantile="p95", slo_seconds=1, forecast_rps=forecast)
    assert (result.replicas_needed, result.gpus_needed) == (want_replicas, want_gpus)


@pytest.mark.parametrize(
    ("df", "kwargs", "message"),
    [
        (sweep((1, 0.5)).drop(columns="gpus"), {}, "column gpus: missing"),
        (sweep((1, 0.5)), {"slo_quantile": "p90"}, "unknown quantile 'p90'"),
        (sweep((1, 0.5), (2, 0.6)).drop(columns="latency_p95_s"), {}, "column latency_p95_s: missing"),
        (sweep((1, 0.5), (2, 0.6)).astype({"latency_p95_s": str}).replace({"0.6": "fast"}), {},
         "row 2, column latency_p95_s: not a number: 'fast'"),
        (sweep((1, 0.5), (2, 0.6)).astype(str).replace({"0.6": ""}), {}, "row 2, column latency_p95_s: empty"),
        (sweep((1, 0.5), replicas=0), {}, "row 1, column replicas: must be > 0"),
        (sweep((1, 0.5), gpus=0), {}, "row 1, column gpus: must be > 0"),
        (sweep((1, 0.5), (2, 0.6), (1, 0.7)), {}, "row 3, column rate_rps: duplicate rate 1 (also row 1)"),
        (sweep((1, 0.5)), {"min_quality": 0.9}, "column quality: missing"),
        (sweep((1, 0.5), quality=[1.5]), {}, "row 1, column quality: must be within 0..1"),
        (sweep((-1, 0.5)), {}, "row 1, column rate_rps: must be a positive number"),
        (sweep((1, 0.5), client_limited=["maybe"]), {}, "row 1, column client_limited: not true/false"),
        (sweep().iloc[0:0], {}, "no rows"),
        (sweep((5e-324, 0.5)), {"forecast_rps": 5}, "row 1, column rate_rps: must be at least one request a day"),
        (sweep((1, 0.5), replicas=5e-324), {}, "row 1, column replicas: must be at least 0.001"),
        (sweep((1, 0.5), gpus=1e-4), {}, "row 1, column gpus: must be at least 0.001"),
        (sweep((1, 1e308)), {}, "row 1, column latency_p95_s: must be at most a day (86400 s), or inf"),
        (sweep((1, 0.5), latency_growth=[1e308]), {}, "row 1, column latency_growth: must be from 0 to"),
    ],
    ids=["no-gpus", "bad-quantile", "no-latency", "non-numeric", "empty-cell", "zero-replicas", "zero-gpus",
         "duplicate-rate", "quality-floor-without-column", "quality-range", "negative-rate", "bad-flag", "empty",
         "denormal-rate", "denormal-replicas", "tiny-gpus", "huge-latency", "huge-growth"],
)
def test_malformed_sweep_names_row_and_column(df: pd.DataFrame, kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"slo_quantile": "p95", "slo_seconds": 1.0, "source": "s.csv", **kwargs}
    with pytest.raises(ConfigError) as err:
        sustainable_capacity(df, **args)  # type: ignore[arg-type]
    assert message in str(err.value)
    assert "\n" not in str(err.value)


_rates = st.lists(st.integers(1, 500), min_size=1, max_size=12, unique=True)


@settings(max_examples=200, deadline=None)
@given(rates=_rates, data=st.data())
def test_every_rate_up_to_the_answer_passes_and_the_next_one_fails(rates: list[int], data: st.DataObject) -> None:
    latencies = data.draw(st.lists(st.floats(0, 3, allow_nan=False), min_size=len(rates), max_size=len(rates)))
    forecast = data.draw(st.floats(0, 1000, allow_nan=False))
    df = sweep(*zip(rates, latencies, strict=True), replicas=3, gpus=6)
    result = sustainable_capacity(df, slo_quantile="p95", slo_seconds=1.0, forecast_rps=forecast)
    ordered = sorted(zip(rates, latencies, strict=True))
    if not result.met:
        assert ordered[0][1] > 1.0
        return
    assert result.sustainable_rate_rps is not None and result.per_replica_rps is not None
    assert all(lat <= 1.0 for rate, lat in ordered if rate <= result.sustainable_rate_rps)
    above = [lat for rate, lat in ordered if rate > result.sustainable_rate_rps]
    assert not above or above[0] > 1.0
    assert result.replicas_needed is not None
    # enough replicas for the forecast, and one fewer would not be
    assert result.replicas_needed * result.per_replica_rps >= forecast - 1e-6
    assert (result.replicas_needed - 1) * result.per_replica_rps < forecast or result.replicas_needed == 0
    assert result.gpus_needed == math.ceil(result.replicas_needed * 2 - 1e-9)
