"""Sustainable serving capacity: a pure function of a load-test sweep.

A sweep has one row per measured request rate (``rate_rps``) with the hardware behind it
(``replicas``, ``gpus``) and what was measured there: latency quantiles
(``latency_p50_s``/``latency_p95_s``/``latency_p99_s``), optionally ``ttft_p95_s``, a
``quality`` ratio in 0..1 (success or answer quality) and ``client_limited`` (the load
generator could not keep its schedule at that rate); a load test's sweep also says whether the
step was steady: ``achieved_ratio`` (completions / offered requests in the steady part; under
``MIN_ACHIEVED_RATIO`` the server did not keep up) and ``latency_growth`` / ``latency_growth_s``
(the steady part's last-third median latency over and minus its first-third median; a step whose
latency keeps growing is a queue filling up, not a capacity, even while its quantile is under the SLO).

The sustainable rate is the highest measured rate at which the SLO and the quality floor hold
**at that rate and at every lower measured rate**. Why so strict: a blip that passes above a
failing rate is noise (a lucky step), not capacity, and a planner that sized on it would
under-provision. A client-limited step ends the climb too: past it nothing says whether the
*server* kept up. Nothing is extrapolated beyond the rates measured; ``replicas_needed`` is
``ceil(forecast / per-replica rate)`` at the sustainable row.

Bad input is one ``ConfigError`` naming the row (1-based, as counted below the CSV header)
and the column.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from gpuaas.errors import ConfigError
from gpuaas.models import MAX_GPUS

__all__ = [
    "GROWTH_SLO_SHARE",
    "MAX_LATENCY_GROWTH",
    "MIN_ACHIEVED_RATIO",
    "QUANTILES",
    "CapacityResult",
    "StepVerdict",
    "latency_column",
    "parse_quantile",
    "replicas_needed",
    "sustainable_capacity",
    "validate_sweep",
]

QUANTILES = ("p50", "p95", "p99")
_OPTIONAL = ("latency_p50_s", "latency_p95_s", "latency_p99_s", "ttft_p95_s", "quality", "achieved_ratio",
             "latency_growth", "latency_growth_s", "success_ratio", "requests")
MIN_ACHIEVED_RATIO = 0.95
"""A step whose server completed less than this share of the offered rate did not keep up."""
MAX_LATENCY_GROWTH = 1.5
"""A step whose median latency rose more than this factor from its first third to its last (and by more
than ``GROWTH_SLO_SHARE`` of the SLO, so that jitter on a fast answer does not count) kept queueing."""
GROWTH_SLO_SHARE = 0.25
_EPS = 1e-9


def parse_quantile(value: str) -> str:
    """``p50``/``p95``/``p99`` (also ``P95``, ``0.95``, ``95``) as the canonical name."""
    text = str(value).strip().lower()
    aliases = {"0.5": "p50", "50": "p50", "0.95": "p95", "95": "p95", "0.99": "p99", "99": "p99"}
    text = aliases.get(text, text)
    if text not in QUANTILES:
        raise ConfigError(f"unknown quantile {value!r}; expected one of {', '.join(QUANTILES)}",
                          field="slo_quantile")
    return text


def latency_column(quantile: str) -> str:
    return f"latency_{parse_quantile(quantile)}_s"


@dataclass(frozen=True)
class StepVerdict:
    """One measured rate and why it counts (or stops the climb)."""

    rate_rps: float
    replicas: float
    gpus: float
    latency_s: float
    quality: float | None
    passed: bool
    counted: bool
    """Passed and every lower rate passed: part of the sustainable range."""
    reason: str
    client_limited: bool = False
    """The load generator could not keep its schedule here: the step measured the client, not the server."""


@dataclass(frozen=True)
class CapacityResult:
    slo_quantile: str
    slo_seconds: float
    min_quality: float | None
    forecast_rps: float | None
    met: bool
    """False when even the lowest measured rate misses the SLO or the quality floor."""
    sustainable_rate_rps: float | None
    per_replica_rps: float | None
    per_gpu_rps: float | None
    replicas_needed: int | None
    gpus_needed: int | None
    knee_rate_rps: float | None
    """The first measured rate that stopped the climb (None: every rate held)."""
    reason: str
    steps: list[StepVerdict] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _number(df: pd.DataFrame, i: int, column: str, source: str) -> float:
    raw = df.iloc[i][column]
    where = f"row {i + 1}, column {column}"
    if raw is None or (isinstance(raw, float) and math.isnan(raw)) or (isinstance(raw, str) and not raw.strip()):
        raise ConfigError(f"{where}: empty (a number is required)", file=source)
    if isinstance(raw, bool):
        raise ConfigError(f"{where}: not a number: {raw!r}", file=source)
    try:
        value = float(str(raw).strip())
    except ValueError:
        raise ConfigError(f"{where}: not a number: {str(raw)[:40]!r}", file=source) from None
    if math.isnan(value):
        raise ConfigError(f"{where}: not a number: {str(raw)[:40]!r}", file=source)
    return value


def _flag(df: pd.DataFrame, i: int, column: str, source: str) -> bool:
    raw = df.iloc[i][column]
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes", "1.0"):
        return True
    if text in ("false", "0", "no", "", "nan", "none", "0.0"):
        return False
    raise ConfigError(f"row {i + 1}, column {column}: not true/false: {str(raw)[:40]!r}", file=source)


MAX_RPS = 1e9
"""A rate past a billion requests per second is a typo, and an infinite one has no replica count."""
MIN_RPS = 1 / 86_400
"""A rate under one request a day measured nothing; over a denormal one (5e-324) a forecast needs infinitely
many replicas, and the rate per replica of one rounds to 0."""
MIN_COUNT = 0.001
"""The fewest replicas or GPUs a row may name: a thousandth (a GPU shared by MIG or time-slicing is a seventh,
or a few dozenth, of one); the rate per replica or per GPU over a denormal count is infinite."""
MAX_LATENCY_S = 86_400.0
"""A latency, or its growth within a step, of more than a day is no measurement (an SLO is at most a day too);
``inf``, a step with no answer to time, is read as such."""
_OTHER_RANGES = (("achieved_ratio", 0.0, 10.0, "from 0 to 10 (answers over requests offered)"),
                 ("success_ratio", 0.0, 1.0, "within 0..1 (requests answered without an error, over all)"),
                 ("requests", 0.0, 1e12, "a count of requests, from 0"),
                 ("latency_growth", 0.0, 1e9, "from 0 to 1,000,000,000 (the last third's median over the first's)"),
                 ("latency_growth_s", -MAX_LATENCY_S, MAX_LATENCY_S, "within a day (86400 s) either way"))
"""The step's own columns, each within what a step can measure: a value past it is a typo or an overflow."""


def validate_sweep(df: pd.DataFrame, quantile: str, *, need_quality: bool = False,
                   source: str = "sweep") -> pd.DataFrame:
    """The sweep as floats, sorted by rate; a ConfigError names the first bad row and column."""
    column = latency_column(quantile)
    required = ["rate_rps", "replicas", "gpus", column] + (["quality"] if need_quality else [])
    for name in required:
        if name not in df.columns:
            raise ConfigError(f"column {name}: missing (columns present: {', '.join(map(str, df.columns))})",
                              file=source)
    if df.empty:
        raise ConfigError("no rows: a sweep needs at least one measured rate", file=source)
    columns = required + [c for c in _OPTIONAL if c in df.columns and c not in required]
    rows: list[dict[str, Any]] = []
    seen: dict[float, int] = {}
    for i in range(len(df)):
        row: dict[str, Any] = {c: _number(df, i, c, source) for c in columns}
        if not 0 < row["rate_rps"] <= MAX_RPS:
            raise ConfigError(f"row {i + 1}, column rate_rps: must be a positive number, at most {MAX_RPS:,.0f}, "
                              f"got {row['rate_rps']:g}", file=source)
        if row["rate_rps"] < MIN_RPS:
            raise ConfigError(f"row {i + 1}, column rate_rps: must be at least one request a day ({MIN_RPS:.3g}), "
                              f"got {row['rate_rps']:g}", file=source)
        for name in ("replicas", "gpus"):
            if not 0 < row[name] <= MAX_GPUS:
                raise ConfigError(f"row {i + 1}, column {name}: must be > 0, got {row[name]:g}" if row[name] <= 0
                                  else f"row {i + 1}, column {name}: must be at most {MAX_GPUS:,}, got {row[name]:g}",
                                  file=source)
            if row[name] < MIN_COUNT:
                raise ConfigError(f"row {i + 1}, column {name}: must be at least {MIN_COUNT:g} (a thousandth), "
                                  f"got {row[name]:g}", file=source)
        for name in (c for c in columns if c.startswith(("latency_p", "ttft_"))):
            if row[name] < 0:
                raise ConfigError(f"row {i + 1}, column {name}: a latency cannot be negative", file=source)
            if MAX_LATENCY_S < row[name] < math.inf:
                raise ConfigError(f"row {i + 1}, column {name}: must be at most a day ({MAX_LATENCY_S:.0f} s), or inf "
                                  f"for a step with no answer, got {row[name]:g}", file=source)
        for name, low, high, expected in _OTHER_RANGES:
            if name in row and not low <= row[name] <= high:
                raise ConfigError(f"row {i + 1}, column {name}: must be {expected}, got {row[name]:g}", file=source)
        if "quality" in row and not 0.0 <= row["quality"] <= 1.0:
            raise ConfigError(f"row {i + 1}, column quality: must be within 0..1, got {row['quality']:g}",
                              file=source)
        if row["rate_rps"] in seen:
            raise ConfigError(f"row {i + 1}, column rate_rps: duplicate rate {row['rate_rps']:g} "
                              f"(also row {seen[row['rate_rps']] + 1})", file=source)
        seen[row["rate_rps"]] = i
        row["client_limited"] = _flag(df, i, "client_limited", source) if "client_limited" in df.columns else False
        rows.append(row)
    return pd.DataFrame(rows).sort_values("rate_rps", kind="stable").reset_index(drop=True)


def _ceil(value: float) -> int:
    """Ceiling that does not turn 2.0000000001 (float noise) into 3."""
    return max(0, math.ceil(value - _EPS))


def replicas_needed(forecast_rps: float, per_replica_rps: float) -> int:
    """``ceil(forecast / per-replica rate)``: what a forecast needs at a measured per-replica rate; any demand
    above zero needs one replica at least (the float-noise allowance must not round a tiny share down to none)."""
    if not per_replica_rps > 0:
        raise ValueError(f"per-replica rate must be > 0, got {per_replica_rps}")
    needed = _ceil(forecast_rps / per_replica_rps)
    return max(needed, 1) if forecast_rps > 0 else needed


def sustainable_capacity(df: pd.DataFrame, *, slo_quantile: str, slo_seconds: float,
                         min_quality: float | None = None, forecast_rps: float | None = None,
                         source: str = "sweep") -> CapacityResult:
    """The highest rate at which the SLO and the quality floor hold there and at every lower rate."""
    quantile = parse_quantile(slo_quantile)
    if not 0 < slo_seconds <= 86_400:
        raise ConfigError(f"must be above 0 and at most a day (86400), got {slo_seconds}", field="slo_seconds")
    if min_quality is not None and not 0.0 <= min_quality <= 1.0:
        raise ConfigError(f"must be within 0..1, got {min_quality}", field="min_quality")
    if forecast_rps is not None and not 0 <= forecast_rps <= MAX_RPS:
        raise ConfigError(f"must be from 0 to {MAX_RPS:,.0f} requests per second, got {forecast_rps}",
                          field="forecast_rps")
    sweep = validate_sweep(df, quantile, need_quality=min_quality is not None, source=source)
    column = latency_column(quantile)
    steps: list[StepVerdict] = []
    best: dict[str, Any] | None = None
    knee: float | None = None
    stop_reason = ""
    for row in sweep.to_dict("records"):
        quality = row.get("quality")
        problems = []
        if not math.isfinite(row[column]):
            problems.append(f"no answer to measure its {quantile} latency by")
        elif row[column] > slo_seconds:
            problems.append(f"{quantile} {row[column]:.3g}s > SLO {slo_seconds:g}s")
        if min_quality is not None and quality is not None and quality < min_quality:
            problems.append(f"quality {quality:.3g} < {min_quality:g}")
        if row["client_limited"]:
            problems.append("the client could not keep its schedule (a client limit, not the server's)")
        if row.get("success_ratio", 1.0) < MIN_ACHIEVED_RATIO and row.get("requests", 1.0) > 0:  # errors, not slow
            problems.append(f"{100 * (1 - row['success_ratio']):.1f}% of its requests failed (their status and "
                            "error are in requests.csv)")
        elif row.get("achieved_ratio", 1.0) < MIN_ACHIEVED_RATIO:
            problems.append(f"achieved {100 * row['achieved_ratio']:.1f}% of the offered rate "
                            f"(< {100 * MIN_ACHIEVED_RATIO:g}%): the server did not keep up")
        if (row.get("latency_growth", 1.0) > MAX_LATENCY_GROWTH
                and row.get("latency_growth_s", math.inf) > GROWTH_SLO_SHARE * slo_seconds):
            problems.append(f"latency kept growing within the step (x{row['latency_growth']:.2f} from its first "
                            "third to its last): not a steady state")
        passed = not problems
        counted = passed and knee is None
        if counted:
            best = row
        elif knee is None:
            knee = row["rate_rps"]
            stop_reason = "; ".join(problems)
        reason = "ok" if passed else "; ".join(problems)
        if passed and not counted:
            reason = f"passes, but a lower rate ({knee:g} rps) failed: not counted"
        steps.append(StepVerdict(row["rate_rps"], row["replicas"], row["gpus"], row[column], quality,
                                 passed, counted, reason, bool(row["client_limited"])))
    base: dict[str, Any] = {"slo_quantile": quantile, "slo_seconds": slo_seconds, "min_quality": min_quality,
                            "forecast_rps": forecast_rps, "knee_rate_rps": knee, "steps": steps}
    if best is None:
        return CapacityResult(met=False, sustainable_rate_rps=None, per_replica_rps=None, per_gpu_rps=None,
                              replicas_needed=None, gpus_needed=None,
                              reason=f"never meets the SLO: at the lowest rate {knee:g} rps, {stop_reason}", **base)
    rate = float(best["rate_rps"])
    per_replica = rate / best["replicas"]
    per_gpu = rate / best["gpus"]
    need_replicas = need_gpus = None
    if forecast_rps is not None:
        need_replicas = replicas_needed(forecast_rps, per_replica)
        need_gpus = _ceil(need_replicas * best["gpus"] / best["replicas"])
    reason = (f"holds up to {rate:g} rps (every measured rate)" if knee is None
              else f"holds up to {rate:g} rps; at {knee:g} rps {stop_reason}")
    return CapacityResult(met=True, sustainable_rate_rps=rate, per_replica_rps=per_replica, per_gpu_rps=per_gpu,
                          replicas_needed=need_replicas, gpus_needed=need_gpus, reason=reason, **base)
