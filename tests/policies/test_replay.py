"""Replay of reclaim policies: hand-computed cases, the real trace, causality.

Covers: threshold equality is idle; a gap > 2 min ends a run (and a reclaim inside the
2-minute grace before the gap is known); a gap while down resumes the pod (idle after)
or wakes it (active after); a pod that never wakes; a reclaim at exactly the next active
sample does not happen; fixed == bound bit for bit on the real trace; the vectorised
replay equals a sample-by-sample state machine; the adaptive policy beats the fixed one;
truncating the future does not change any earlier decision; loader errors name the file
and column.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpuaas.errors import ConfigError
from gpuaas.models import MAX_GAP_S
from gpuaas.policies.reclaim import AdaptiveWindow, fixed_windows, idle_runs, replay_runs, replay_windows
from gpuaas.sources.traces import load_qps, load_utilization

TRACE = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "traces" / "alibaba-genai-2026"
PARTS = [TRACE / "pod_gpu_duty_cycle_part1.csv", TRACE / "pod_gpu_duty_cycle_part2.csv"]
MIN = 60.0


def _series(pod: str, points: list[tuple[int, float]]) -> pd.DataFrame:
    return pd.DataFrame({"pod": pod, "t": [m * MIN for m, _ in points], "value": [v for _, v in points]})


# Pod a: run 1 = minutes 1-5 (5.0 is idle), ended by the active sample at 6 (L = 5 min);
# run 2 = 7-8, then a 4-minute gap (L = 1 min; the reclaim at 7 + 3 = 10 = 8 + 2 still
# happens: the gap is not known yet); run 3 = 12-17, end of data (L = 5 min, never wakes).
POD_A = _series(
    "a",
    [(0, 50), (1, 0), (2, 5.0), (3, 0), (4, 0), (5, 0), (6, 80), (7, 0), (8, 0)]
    + [(m, 0) for m in range(12, 18)],
)
# Pod b: run 0-4 then a gap; the first sample after the gap is active: a wake-up.
POD_B = _series("b", [(0, 0), (1, 0), (2, 0), (3, 0), (4, 0), (8, 90), (9, 0)])


@pytest.fixture(scope="module")
def trace() -> pd.DataFrame:
    missing = [p for p in PARTS if not p.is_file()]
    if missing:
        pytest.fail(f"trace fixture missing: {missing}")
    return load_utilization(PARTS)


def test_hand_computed_fixed_rule() -> None:
    util = pd.concat([POD_A, POD_B], ignore_index=True)
    runs = idle_runs(util, threshold=5.0)
    assert runs[["pod", "start", "length", "ended_by"]].values.tolist() == [
        ["a", 1 * MIN, 5 * MIN, "active"],
        ["a", 7 * MIN, 1 * MIN, "gap"],
        ["a", 12 * MIN, 5 * MIN, "end"],
        ["b", 0.0, 4 * MIN, "gap"],
        ["b", 9 * MIN, 0.0, "end"],
    ]
    out = replay_runs(runs, fixed_windows(3 * MIN)(runs))
    assert out["reclaimed"].tolist() == [2 * MIN, 0.0, 2 * MIN, 1 * MIN, 0.0]
    assert out["wakeup"].tolist() == [True, False, False, True, False]
    assert out["gap_resume"].tolist() == [False, True, False, False, False]
    assert out["never_woke"].tolist() == [False, False, True, False, False]
    result = replay_windows(util, fixed_windows(3 * MIN), name="fixed", window_min=3, threshold=5)
    assert result.pods == 2
    assert result.observed_gpu_hours == pytest.approx(18 / 60)  # a: 8 + 5 min, b: 4 + 1 min
    assert result.reclaimed_gpu_hours == result.bound_gpu_hours == pytest.approx(5 / 60)
    assert (result.wakeups, result.gap_resumes, result.never_woke, result.reclaims) == (2, 1, 1, 4)


def test_threshold_is_inclusive_and_reclaim_at_the_active_sample_does_not_happen() -> None:
    runs = idle_runs(POD_A, threshold=4.99)  # 5.0 is now active: run 1 splits into 1-2 and 3-6
    assert runs["length"].tolist()[:2] == [1 * MIN, 3 * MIN]
    out = replay_runs(runs, fixed_windows(3 * MIN)(runs))
    assert np.isnan(out["reclaim_at"].iloc[1])  # 3 + 3 = 6 is when the active sample arrives
    assert out["reclaimed"].sum() == 2 * MIN


def _reference(util: pd.DataFrame, threshold: float, base: float, adaptive: bool) -> tuple[float, int, float]:
    """Sample-by-sample state machine, written from the docstring's rules, independently."""
    reclaimed = bound = 0.0
    wakeups = 0
    for _, g in util.sort_values(["pod", "t"]).groupby("pod"):
        t, idle = g["t"].tolist(), (g["value"] <= threshold).tolist()
        start: float | None = None
        down: float | None = None
        longs, w = 0, base

        def close(length: float) -> None:
            nonlocal bound, longs
            bound += max(0.0, length - base)
            longs += length >= 2 * base

        for k in range(len(t)):
            if k and start is not None:
                gap, r = t[k] - t[k - 1], start + w
                if gap <= MAX_GAP_S:
                    if down is None and r < t[k]:
                        down = r
                    if down is not None:
                        reclaimed += t[k] - max(down, t[k - 1])
                elif down is None and r <= t[k - 1] + MAX_GAP_S:
                    down = r
                if gap > MAX_GAP_S or not idle[k]:
                    close((t[k] if gap <= MAX_GAP_S else t[k - 1]) - start)
                    start = None
                    if down is not None:
                        wakeups += not idle[k]
                        down = None
            if idle[k] and start is None:
                start = t[k]
                w = (base / 3 if longs else 4 * base / 3) if adaptive else base
        if start is not None:
            close(t[-1] - start)
    return reclaimed, wakeups, bound


def test_vectorised_replay_matches_the_state_machine(trace: pd.DataFrame) -> None:
    for adaptive in (False, True):
        policy = AdaptiveWindow(1800.0) if adaptive else fixed_windows(1800.0)
        got = replay_windows(trace, policy, name="x", window_min=30, threshold=5)
        rec, wakes, bound = _reference(trace, 5.0, 1800.0, adaptive)
        assert got.reclaimed_gpu_hours == pytest.approx(rec / 3600, rel=1e-12)
        assert got.wakeups == wakes
        assert got.bound_gpu_hours == pytest.approx(bound / 3600, rel=1e-12)


def test_fixed_rule_equals_the_bound_exactly_on_the_real_trace(trace: pd.DataFrame) -> None:
    result = replay_windows(trace, fixed_windows(1800.0), name="fixed", window_min=30, threshold=5)
    assert result.pods == 96
    assert result.reclaimed_gpu_hours == result.bound_gpu_hours  # bit for bit, not approx
    assert result.reclaimed_gpu_hours == pytest.approx(305.319, abs=1e-3)
    assert result.wakeups == 384


@pytest.mark.parametrize("parts", [PARTS, PARTS[:1], PARTS[1:]], ids=["both", "part1", "part2"])
def test_adaptive_beats_fixed(parts: list[Path]) -> None:
    util = load_utilization(parts)
    fixed = replay_windows(util, fixed_windows(1800.0), name="fixed", window_min=30, threshold=5)
    adaptive = replay_windows(util, AdaptiveWindow(1800.0), name="adaptive", window_min=30, threshold=5)
    assert adaptive.reclaimed_gpu_hours >= fixed.reclaimed_gpu_hours
    assert adaptive.wakeups <= fixed.wakeups
    assert (adaptive.reclaimed_gpu_hours, -adaptive.wakeups) != (fixed.reclaimed_gpu_hours, -fixed.wakeups)
    assert adaptive.bound_gpu_hours == fixed.bound_gpu_hours


def test_truncating_the_future_changes_no_earlier_decision(trace: pd.DataFrame) -> None:
    policy = AdaptiveWindow(1800.0)
    full_runs = idle_runs(trace, 5.0)
    full = replay_runs(full_runs, policy(full_runs))
    t0, t1 = trace["t"].min(), trace["t"].max()
    for cut in np.linspace(t0, t1, 7)[1:-1]:
        part_runs = idle_runs(trace[trace["t"] < cut], 5.0)
        part = replay_runs(part_runs, policy(part_runs))
        started = full[full["start"] < cut].reset_index(drop=True)
        assert started[["pod", "start", "window"]].equals(part[["pod", "start", "window"]])
        before = [full["reclaim_at"] < cut, part["reclaim_at"] < cut]
        assert full.loc[before[0], ["pod", "reclaim_at"]].values.tolist() == (
            part.loc[before[1], ["pod", "reclaim_at"]].values.tolist()
        )


def test_qps_loader_drops_unattributed_rows_and_sums(tmp_path: Path) -> None:
    csv = tmp_path / "qps.csv"
    csv.write_text("timestamp_anon,value,container_ip,request_type\n1,0.5,,API\n2,0.1,p,G\n2,0.2,p,A\n")
    qps = load_qps(csv)
    assert qps.values.tolist() == [["p", 2.0, pytest.approx(0.3)]]


@pytest.mark.parametrize(("text", "match"), [
    ("timestamp_anon,value,container_ip\n1,0.5,p\n2,-0.1,p\n", "q.csv: line 3: value: negative request rate, got '-0.1'"),
    ("timestamp_anon,value,container_ip\n1,0.5,p,x\n", "q.csv: line 2: 4 fields, header has 3"),
    ("timestamp_anon,value,container_ip\n-1,0.5,p\n", "q.csv: line 2: timestamp_anon: must be a finite number from 0"),
], ids=["negative-rate", "extra-field", "negative-time"])
def test_qps_loader_names_the_line_of_a_bad_row(tmp_path: Path, text: str, match: str) -> None:
    bad = tmp_path / "q.csv"
    bad.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_qps(bad)


def test_fraction_units_are_scaled_and_parts_concatenate(tmp_path: Path) -> None:
    one, two = tmp_path / "1.csv", tmp_path / "2.csv"
    one.write_text("value,timestamp_anon,container_ip\n0.5,0,p\n")
    two.write_text("value,timestamp,pod\n0.02,60,q\n0.5,0,p\n")
    util = load_utilization([one, two])
    assert util.values.tolist() == [["p", 0.0, 50.0], ["q", 60.0, 2.0]]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("value,timestamp_anon\n1,2\n", "bad.csv: container_ip or pod: missing column"),
        ("value,timestamp_anon,container_ip\nabc,2,p\n", "bad.csv: line 2: value: not a number: 'abc'"),
        ("value,timestamp_anon,container_ip\n1,,p\n", "bad.csv: line 2: timestamp_anon: not a number"),
        ("value,timestamp_anon,container_ip\n-1,2,p\n", "bad.csv: line 2: value: negative"),
        ("value,timestamp_anon,container_ip\n1,2,\n", "bad.csv: line 2: container_ip: empty pod id"),
        ("value,timestamp_anon,container_ip\n1,2,p\n\n1,x,p\n", "bad.csv: line 4: timestamp_anon: not a number"),
        ("value,timestamp_anon,container_ip\n1,2,p,q\n", "bad.csv: line 2: 4 fields, header has 3"),
    ],
    ids=["no-pod-column", "text-value", "empty-time", "negative", "empty-pod", "after-a-blank-line", "extra-field"],
)
def test_malformed_csv_names_file_and_column(tmp_path: Path, text: str, match: str) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_utilization([bad])
