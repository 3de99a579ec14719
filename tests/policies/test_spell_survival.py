"""The survival window: its context, its fit, its reasons, causality, and the live decision.

Covers: the recent idle share of a hand-made workload (hand-computed); the fit gives a quiet
context a short window and a busy one none of its spells pays for, with the expected saving and
wake-ups in the reason; "never" only where the history shows that no stop pays, and past the
longest spell it saw the break-even instead (also as a property); a context seen few times is shrunk
toward the whole history; a window never depends on samples after its spell starts
(property: truncating the trace there changes nothing); the live state reclaims at the
replay's minute with the survival rule; a spell still open when the history ends counts as the
ended spells that outlasted it did; one evidence fits every price as a fit from scratch does
(property); the budget falls back to the fixed rule when the
survival window fitted on the earlier half of the history loses to it on the later half.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gpuaas.policies.reclaim import (
    FixedWindow,
    RunStream,
    SurvivalEvidence,
    adaptive_state,
    choose_for_budget,
    context_band,
    fit_survival,
    idle_runs,
    recent_idle_share,
    replay_runs,
)

MIN = 60.0


def _pod(points: list[tuple[int, float]], pod: str = "p") -> pd.DataFrame:
    return pd.DataFrame({"pod": pod, "t": [m * MIN for m, _ in points], "value": [v for _, v in points]})


def _cycle(first: int, busy: int, idle: int, times: int) -> list[tuple[int, float]]:
    """``times`` x (``busy`` active minutes, then ``idle`` idle minutes), from minute ``first``."""
    out: list[tuple[int, float]] = []
    m = first
    for _ in range(times):
        out += [(m + k, 80.0) for k in range(busy)]
        out += [(m + busy + k, 0.0) for k in range(idle)]
        m += busy + idle
    return out


def test_recent_idle_share_counts_only_idle_time_before_the_spell() -> None:
    # Idle 10-39 (30 min), active 40, idle 41-49, active 50, idle from 51.
    points = [(m, 50.0) for m in range(10)] + [(m, 0.0) for m in range(10, 40)] + [(40, 90.0)]
    points += [(m, 0.0) for m in range(41, 50)] + [(50, 90.0)] + [(m, 0.0) for m in range(51, 60)]
    runs = idle_runs(_pod(points), 5.0)
    assert runs["start"].tolist() == [10 * MIN, 41 * MIN, 51 * MIN]
    # At minute 41: 30 of the last 60 minutes idle (the run ended by the active sample at 40).
    # At minute 51: 30 + 9 idle minutes. Lookback 20 min at 51: minutes 31-39 and 41-49 = 18.
    assert recent_idle_share(runs, 3600.0).tolist() == pytest.approx([0.0, 0.5, 39 / 60])
    assert recent_idle_share(runs, 1200.0).tolist() == pytest.approx([0.0, 19 / 20, 18 / 20])
    assert context_band(runs, 3600.0, (0.5, 0.8, 0.9)).tolist() == [0, 1, 1]
    assert context_band(runs).tolist() == [0, 0, 0]  # 2 h look-back, one band from 90 %


def _quiet_and_busy() -> pd.DataFrame:
    """Pod q: long spells (100 min) after one active minute, so each starts after a quiet hour;
    pod b: 2-minute spells between 3-minute bursts, all day."""
    return pd.concat([_pod(_cycle(0, 1, 100, 12), "q"), _pod(_cycle(0, 3, 2, 240), "b")], ignore_index=True)


def test_fit_gives_quiet_contexts_a_short_window_and_says_what_it_expects() -> None:
    runs = idle_runs(_quiet_and_busy(), 5.0)
    rule = fit_survival(runs, price_gpu_min=30.0, shrink=0.0)
    bands = context_band(runs)
    quiet = runs["pod"].to_numpy() == "q"
    # From its third spell on, q starts after 118 idle minutes of the last 120 (its second: 100 of
    # 120); b is idle 2 minutes in 5.
    assert set(bands[quiet][2:]) == {1} and set(bands[quiet][:2]) == {0} and set(bands[~quiet]) == {0}
    windows = rule(runs)
    assert set(windows[quiet][2:]) == {60.0}  # the shortest stop: 99 GPU-min saved per spell, wake-ups cost 30
    busy_out = replay_runs(runs, windows)[~quiet]
    assert not busy_out["wakeup"].any() and busy_out["reclaimed"].sum() == 0  # 2-minute spells never pay
    q_reason = rule.why(runs)[int(np.flatnonzero(quiet)[2])]
    # 10 spells: nine of 100 min ended by activity, the last (99 min) still open at the end of the
    # data: it counts as the ended spells that outlasted it did (its own end is not known).
    assert "spells after >= 90% of the last 2 h idle last 1 h 40 m at the median (10 seen)" in q_reason
    assert "stopping after 1 min saves 99.0 GPU-min for 1.00 expected wake-ups at 30 GPU-min each" in q_reason


def test_never_only_where_the_history_shows_it_and_the_break_even_past_the_history() -> None:
    # Alone, b's 2-minute spells say nothing of a stop after 2 min: every one of them scores 0 there,
    # never included. Past them the window is the break-even: 30 GPU-min per wake-up after the first
    # stop none of them reached (2 min), 32 min, so the first candidate at or after it, 45 min.
    busy = idle_runs(_pod(_cycle(0, 3, 2, 240), "b"), 5.0)
    alone = fit_survival(busy, price_gpu_min=30.0)
    assert set(alone(busy)) == {45 * MIN}
    assert alone.why(busy)[-1].endswith("no stop past the longest of them can be ranked on the history: stopping "
                                        "after 45 min, the break-even at 30 GPU-min per wake-up beyond every spell "
                                        "seen")
    assert replay_runs(busy, alone(busy))["wakeup"].sum() == 0  # what it did on the history is unchanged
    # Spells of 250 min, each ended by activity: a stop at any candidate (240 min included) saves less
    # than a wake-up at 300 GPU-min costs, and the history shows it: never.
    long = idle_runs(_pod(_cycle(0, 1, 250, 4), "l"), 5.0)
    rule = fit_survival(long, price_gpu_min=300.0)
    assert np.isinf(rule(long)).all()
    assert rule.why(long)[-1].endswith("no stop time saves more than its wake-ups cost at 300 GPU-min each: never")
    assert np.isfinite(fit_survival(long, price_gpu_min=200.0)(long)).all()  # 250 - 1 > 200: worth a stop


@settings(max_examples=40, deadline=None)
@given(idle=st.lists(st.integers(1, 100), min_size=1, max_size=12), price=st.floats(0.0, 100.0))
def test_a_history_of_short_spells_never_gives_never(idle: list[int], price: float) -> None:
    # Spells of at most 100 min: the first stop none reached is at most 120 min, and the break-even
    # 100 GPU-min after it is within the candidates (240 min), so no context gets "never".
    points, m = [], 0
    for length in idle:
        points += [(m, 80.0)] + [(m + 1 + k, 0.0) for k in range(length)]
        m += 1 + length
    points.append((m, 80.0))
    runs = idle_runs(_pod(points), 5.0)
    rule = fit_survival(runs, price_gpu_min=price)
    assert all(np.isfinite(o.window_s) for o in rule.outlooks), rule
    longest = max(idle) * MIN
    assert all(o.window_s >= longest or not o.beyond_history for o in rule.outlooks)


def test_a_context_seen_rarely_is_shrunk_toward_the_whole_history() -> None:
    runs = idle_runs(_quiet_and_busy(), 5.0)
    # Alone, q's 10 quiet spells pay best stopped after 1 min; the whole history (240 spells of
    # 2 min that a 1-min stop would wake) pays best at 2 min. Shrunk hard, the band follows it.
    alone = fit_survival(runs, price_gpu_min=30.0, shrink=0.0)
    shrunk = fit_survival(runs, price_gpu_min=30.0, shrink=10_000.0)
    assert alone.outlooks[-1].window_s == 60.0 and alone.outlooks[-1].spells == 10
    assert shrunk.outlooks[-1].window_s == 120.0


def test_an_open_spell_counts_as_the_ended_spells_that_outlasted_it() -> None:
    # Four pods: a 100-minute spell and a 3-minute one, both ended by activity, then a spell still
    # open after 59 minutes when the data ends. Only the 100-minute spells outlasted the open ones:
    # stopping after 3 min saves 97 GPU-min for a wake-up in 8 spells of 12, nothing in the other 4.
    one = [(0, 80.0)] + [(m, 0.0) for m in range(1, 101)] + [(101, 80.0)] + [(m, 0.0) for m in range(102, 105)]
    one += [(105, 80.0)] + [(m, 0.0) for m in range(106, 166)]
    runs = idle_runs(pd.concat([_pod(one, f"p{i}") for i in range(4)], ignore_index=True), 5.0)
    assert runs["ended_by"].tolist().count("end") == 4 and runs["length"].max() == 100 * MIN
    rule = fit_survival(runs, price_gpu_min=30.0, shrink=0.0, edges=())
    (outlook,) = rule.outlooks
    assert outlook.window_s == 3 * MIN
    assert outlook.saved_gpu_min == pytest.approx(97.0 * 8 / 12)  # dropping the open spells: 97 x 4 / 8
    assert outlook.wakeups == pytest.approx(8 / 12)
    # An open spell longer than every ended one counts what it has saved so far, and a wake-up.
    longer = pd.concat([_pod(one, "p0"), _pod([(0, 80.0)] + [(m, 0.0) for m in range(1, 160)], "q")],
                       ignore_index=True)
    runs = idle_runs(longer, 5.0)
    rule = fit_survival(runs, price_gpu_min=0.0, shrink=0.0, edges=())
    # Stopping after 1 min: 99 + 2 (ended), 99 (p0's open spell, as its 100-minute one), 158 - 1 (q's).
    assert rule.outlooks[0].window_s == MIN
    assert rule.outlooks[0].saved_gpu_min == pytest.approx((99 + 2 + 99 + 157) / 4)
    # Savings are learnt per GPU: r (4 GPUs, open after 58 min) learns from p0's 100-minute spell (1 GPU).
    sized = idle_runs(pd.concat([_pod(one, "p0"), _pod([(0, 80.0)] + [(m, 0.0) for m in range(1, 60)], "r")],
                                ignore_index=True), 5.0)
    sized = sized.assign(gpus=np.where(sized["pod"] == "r", 4.0, 1.0))
    rule = fit_survival(sized, price_gpu_min=0.0, shrink=0.0, edges=())
    assert rule.outlooks[0].window_s == MIN
    assert rule.outlooks[0].saved_gpu_min == pytest.approx((99 + 2 + 99 + 4 * 99) / 4)


@st.composite
def series(draw: st.DrawFn) -> pd.DataFrame:
    frames = []
    for pod in draw(st.lists(st.sampled_from("abc"), min_size=1, max_size=3, unique=True)):
        steps = draw(st.lists(st.sampled_from([60, 60, 60, 60, 180]), min_size=2, max_size=120))
        values = draw(st.lists(st.sampled_from([0.0, 0.0, 0.0, 50.0]), min_size=len(steps), max_size=len(steps)))
        frames.append(pd.DataFrame({"pod": pod, "t": np.cumsum(steps).astype(float), "value": values}))
    return pd.concat(frames, ignore_index=True)


@settings(max_examples=50, deadline=None)
@given(util=series(), cut_share=st.floats(0.1, 1.0))
def test_a_spells_window_depends_on_nothing_after_it_starts(util: pd.DataFrame, cut_share: float) -> None:
    rule = fit_survival(idle_runs(_quiet_and_busy(), 5.0), price_gpu_min=30.0, shrink=0.0)
    whole = idle_runs(util, 5.0)
    cut = float(util["t"].min() + (util["t"].max() - util["t"].min()) * cut_share)
    seen = idle_runs(util[util["t"] <= cut], 5.0)
    full = pd.Series(rule(whole), index=pd.MultiIndex.from_frame(whole[["pod", "start"]]))
    early = pd.Series(rule(seen), index=pd.MultiIndex.from_frame(seen[["pod", "start"]]))
    assert early.to_dict() == full.reindex(early.index).to_dict()


@settings(max_examples=40, deadline=None)
@given(util=series(), prices=st.lists(st.sampled_from([0.0, 1.0, 15.0, 60.0, 300.0]), min_size=2, max_size=5),
       shrink=st.sampled_from([0.0, 5.0]), cut_share=st.floats(0.0, 1.0))
@example(util=pd.DataFrame({"pod": ["a", "a"], "t": [60.0, 120.0], "value": [50.0, 50.0]}),  # no idle run
         prices=[0.0, 15.0], shrink=0.0, cut_share=0.0)
def test_one_evidence_fits_every_price_as_a_fit_from_scratch(util: pd.DataFrame, prices: list[float], shrink: float,
                                                             cut_share: float) -> None:
    # A budget fits its whole price ladder on one evidence: no fit may change what the next one reads.
    runs = idle_runs(util, 5.0)
    start = runs["start"].to_numpy(dtype=float)
    cut = start.min() + (start.max() - start.min()) * cut_share if len(start) else 0.0  # no idle run: empty
    mask = start <= cut
    evidence = SurvivalEvidence.of(runs, mask=mask, shrink=shrink)
    for price in prices:
        fresh = fit_survival(runs, price_gpu_min=price, mask=mask, shrink=shrink)
        assert repr(evidence.fit(price)) == repr(fresh)  # repr: a context with no spell has a NaN median


def test_live_state_reclaims_at_the_replays_minute_with_the_survival_rule() -> None:
    rule = fit_survival(idle_runs(_quiet_and_busy(), 5.0), price_gpu_min=30.0, shrink=0.0)
    util = _pod(_cycle(0, 1, 100, 3), "q")
    whole = idle_runs(util, 5.0)
    replayed = replay_runs(whole, rule(whole))
    minute = int(replayed["reclaim_at"].dropna().iloc[-1] // MIN)
    assert minute == 203 + 1  # the third spell starts at 203, after two quiet hours: its window is 1 min

    def state_at(m: int) -> pd.Series:
        stream = RunStream(5.0)
        stream.add(util[util["t"] <= m * MIN])
        runs = stream.runs()
        return adaptive_state(runs, stream.last_samples(), m * MIN, rule, rule.why(runs), threshold=5.0).iloc[0]

    assert not state_at(minute - 1)["due"]
    now = state_at(minute)
    assert now["due"] and now["window_seconds"] == 60.0 and "saves 99.0 GPU-min" in now["why"]


def test_budget_falls_back_to_the_fixed_rule_when_the_earlier_half_misleads() -> None:
    # Earlier half: pod a's short and 110-minute spells, pod b's 12-minute spells between bursts;
    # later half: pod c, busy 130 minutes between 200-minute spells, and nothing else.
    a = _cycle(0, 1, 9, 13) + _cycle(130, 1, 110, 12) + _cycle(1462, 1, 9, 30) + [(1762, 80.0)]
    b = _cycle(0, 3, 12, 97)
    c = _cycle(1462, 130, 200, 10) + [(4762, 80.0)]
    runs = idle_runs(pd.concat([_pod(a, "a"), _pod(b, "b"), _pod(c, "c")], ignore_index=True), 5.0)
    later = (runs["start"] >= (runs["start"].min() + runs["end"].max()) / 2).to_numpy()
    assert set(runs.loc[later, "pod"]) == {"c"}
    early = fit_survival(runs, price_gpu_min=30.0, mask=~later)
    fitted, five = replay_runs(runs, early(runs)), replay_runs(runs, np.full(len(runs), 300.0))
    # On the later half the window fitted early wakes c as often as the fixed 5-minute rule and saves less.
    assert fitted["wakeup"][later].sum() == five["wakeup"][later].sum() > 0
    assert fitted["reclaimed"][later].sum() < five["reclaimed"][later].sum()
    days = float(runs["end"].max() - runs["start"].min()) / 86400
    choice = choose_for_budget(runs, workloads=3, days=days, cold_start_gpu_minutes=30.0)
    assert isinstance(choice.policy, FixedWindow)
    assert "reclaimed less than the fixed rule on the later half" in choice.policy.why(runs)[0]
