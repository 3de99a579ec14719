"""What the frontier's reader sees first: the calibration part's evidence and the adaptive rows' gain.

Covers: the spells the calibration part holds, after a quiet two hours and of an hour or more,
counted by hand on a made-up trace (a spell still open at the split counts what it lasted there,
not its whole length); the headline's range and best row over the fixed frontier, computed by
hand; where the best row stands against its context's ceiling, both ways, and each budget's ceiling
over the fixed frontier at its wake-ups; the line that says every
budget matched the fixed rule; each row's wake-ups per workload-day on the scored part, counted by
hand, and the line naming the budgets that ran over; and the replay command printing both before
its table (with the ceiling and rate columns), and the counts, ceilings and rates in its JSON.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app as main_app
from gpuaas.policies.analysis import (
    CalibrationEvidence,
    FrontierRow,
    calibration_evidence,
    ceiling_ratios,
    frontier,
    frontier_headline,
)
from gpuaas.policies.reclaim import idle_runs

MIN = 60.0


def _trace() -> pd.DataFrame:
    """Pod q: one active minute, then 100 idle, six times (spells start at minutes 1, 102, 203, 304,
    405, 506). Pod b: 3 active minutes, then 2 idle, 200 times (spells start at 3, 8, 13, ...)."""
    rows = []
    for k in range(6):
        rows += [("q", 101 * k, 80.0)] + [("q", 101 * k + 1 + m, 0.0) for m in range(100)]
    for k in range(200):
        rows += [("b", 5 * k + m, 70.0) for m in range(3)] + [("b", 5 * k + 3 + m, 0.0) for m in range(2)]
    return pd.DataFrame(rows, columns=["pod", "t", "value"]).assign(t=lambda d: d["t"] * MIN)


def test_calibration_evidence_counts_what_the_part_before_the_split_holds() -> None:
    runs = idle_runs(_trace(), 5.0)
    got = calibration_evidence(runs, 451 * MIN)
    # q: five spells start before minute 451. The first starts with no history (busy), the second
    # after 100 idle minutes of 120 (83 %), the third to fifth after 118 of 120 (98 %): 3 quiet.
    # Four last 100 minutes; the fifth (from 405) has lasted 46 minutes at the split: 4 long.
    # b: spells start at 3 + 5k < 451, 90 of them, each 2 minutes after 3 busy ones.
    assert got == CalibrationEvidence(spells=95, quiet_spells=3, long_spells=4)
    assert calibration_evidence(runs) == CalibrationEvidence(spells=6 + 200, quiet_spells=4, long_spells=6)
    assert got.describe() == ("calibration part: 95 idle spells, 3 after 90% or more of the last 2 h idle, "
                              "4 of 60 min or more")


FIXED = [FrontierRow("fixed", 30.0, 10.0, 100), FrontierRow("fixed", 10.0, 20.0, 200)]
EVIDENCE = CalibrationEvidence(10, 1, 2)


def test_the_headline_gives_the_range_and_the_best_budget() -> None:
    # The fixed frontier is 15 GPU-hours at 150 wake-ups (half way between its windows).
    rows = [*FIXED, FrontierRow("adaptive", 1.0, 18.0, 150, 0.3), FrontierRow("adaptive", 4.0, 15.0, 150, 0.0),
            FrontierRow("adaptive", 0.25, 18.0, 150, 0.3), FrontierRow("adaptive", 16.0, 30.0, 400)]
    lines = frontier_headline(rows, EVIDENCE)
    assert lines[0] == EVIDENCE.describe()
    # 18 / 15 = 1.20x at budgets 0.25 and 1, the same GPU-hours at the same wake-ups: both are named;
    # 15 / 15 = 1.00x; 400 wake-ups lie past the fixed windows and are not compared.
    assert lines[1] == ("adaptive over fixed at equal wake-ups: 1.00x to 1.20x over 3 budgets; best at 0.25 and 1 "
                        "wake-ups per workload-day (the same result at each: 1.20x, 30% of the clairvoyant headroom)")
    # A budget as good at other figures (more GPU-hours for more wake-ups) is a different result:
    # the smaller budget of the best ratio is named alone.
    other = [*FIXED, FrontierRow("adaptive", 1.0, 18.0, 150, 0.3), FrontierRow("adaptive", 0.5, 24.0, 200, 0.4),
             FrontierRow("adaptive", 4.0, 16.0, 160, 0.1)]
    # 18 / 15 at 150 and 24 / 20 at 200 are both 1.20x; 16 / 16 at 160 is 1.00x.
    assert frontier_headline(other, EVIDENCE)[1] == (
        "adaptive over fixed at equal wake-ups: 1.00x to 1.20x over 3 budgets; best at 0.5 wake-ups per "
        "workload-day (1.20x, 40% of the clairvoyant headroom)")


def test_with_no_spell_to_learn_from_the_headline_says_the_rules_window_was_kept() -> None:
    """The budgets fall back to the rule's own window, which a shorter fixed window beats where nothing wakes:
    the line says why the rows are what they are, not that the policy lost."""
    rows = [*FIXED, FrontierRow("adaptive", 1.0, 12.0, 150), FrontierRow("adaptive", 4.0, 12.0, 150)]
    # the fixed frontier at 150 wake-ups: 15 GPU-hours; 12 / 15 = 0.80x
    assert frontier_headline(rows, CalibrationEvidence(0, 0, 0))[1] == (
        "the calibration part holds no idle spell to learn from: every budget keeps the rule's own window, 0.80x "
        "the best fixed window at its wake-ups; backtest a longer history")


def test_the_headline_places_the_best_row_against_its_contexts_ceiling() -> None:
    # Best row: 18 GPU-hours at 150 wake-ups, where the fixed frontier has 15 (1.20x).
    near = [*FIXED, FrontierRow("adaptive", 1.0, 18.0, 150, 0.3, context_ceiling_gpu_hours=18.6)]
    # 18.6 / 15 = 1.24x; 18 / 18.6 = 97 %: at its ceiling, history is not what it lacks.
    assert frontier_headline(near, EVIDENCE)[2] == (
        "its context's ceiling there, windows chosen in hindsight on the scored part: 1.24x; the policy reached 97% "
        "of it: more history cannot add much; the rest of the headroom needs a signal its context does not carry")
    far = [*FIXED, FrontierRow("adaptive", 1.0, 18.0, 150, 0.3, context_ceiling_gpu_hours=24.0)]
    # 24 / 15 = 1.60x; 18 / 24 = 75 %.
    assert frontier_headline(far, EVIDENCE)[2] == (
        "its context's ceiling there, windows chosen in hindsight on the scored part: 1.60x; the policy reached 75% "
        "of it: a longer history to learn from can close the gap")
    assert len(frontier_headline([*FIXED, FrontierRow("adaptive", 1.0, 18.0, 150, 0.3)], EVIDENCE)) == 2


def test_each_budgets_ceiling_is_read_against_the_fixed_frontier_at_its_wakeups() -> None:
    rows = [*FIXED, FrontierRow("adaptive", 1.0, 18.0, 150, 0.3, context_ceiling_gpu_hours=18.6),
            FrontierRow("adaptive", 4.0, 21.0, 200, 0.1, context_ceiling_gpu_hours=22.0),
            FrontierRow("adaptive", 16.0, 30.0, 400, None, context_ceiling_gpu_hours=31.0),
            FrontierRow("adaptive", 0.5, 9.0, 90, None), FrontierRow("clairvoyant", 30.0, 40.0, 100)]
    got = ceiling_ratios(rows)
    # 18.6 / 15 at 150 wake-ups, 22 / 20 at the 10-minute row's 200; 400 lie past the fixed rows;
    # budget 0.5 has no ceiling; the clairvoyant row is no budget.
    assert got.keys() == {1.0, 4.0, 16.0}
    assert got[1.0] == pytest.approx(1.24) and got[4.0] == pytest.approx(1.10) and got[16.0] is None


def test_the_headline_says_when_every_budget_matched_the_fixed_rule() -> None:
    rows = [*FIXED, FrontierRow("adaptive", 1.0, 10.0, 100, 0.0), FrontierRow("adaptive", 2.0, 20.0, 200, 0.0)]
    assert frontier_headline(rows, EVIDENCE)[1].startswith("every budget matched the fixed rule at its wake-ups")
    alone = frontier_headline([*FIXED, FrontierRow("adaptive", 1.0, 0.0, 0)], EVIDENCE)
    assert alone[1] == "no adaptive row falls within the fixed windows' wake-ups: nothing to compare"


def test_the_headline_names_the_budgets_the_scored_part_ran_over() -> None:
    rows = [*FIXED, FrontierRow("adaptive", 1.0, 18.0, 150, 0.3, wakeups_per_workload_day=3.0),
            FrontierRow("adaptive", 0.5, 18.0, 150, 0.3, wakeups_per_workload_day=2.5),
            FrontierRow("adaptive", 4.0, 20.0, 200, 0.2, wakeups_per_workload_day=2.0)]
    # Budget 1 ran at 3 a day (3x), 0.5 at 2.5 (5x); 4 held at 2.
    assert frontier_headline(rows, EVIDENCE)[-1] == (
        "2 of 3 budgets ran over on the scored part (2.5 to 3.0 wake-ups per workload-day, up to 5x the budget): "
        "a budget is chosen on the calibration part's wake-ups, and its windows woke the scored part's workloads "
        "more often")
    held = [*FIXED, FrontierRow("adaptive", 4.0, 20.0, 200, 0.2, wakeups_per_workload_day=4.0)]
    assert not any("ran over" in line for line in frontier_headline(held, EVIDENCE))


def test_every_row_carries_its_wakeups_per_workload_day_on_the_scored_part() -> None:
    """Pod a: one active minute, then 30 idle, 20 times (spells start at 31k + 1 and end at the next
    active sample, 30 minutes on; the last runs to the end of the data at minute 619). Pod c is always
    active: it has no idle run and is no workload of the budget's count."""
    rows = [("a", 31 * k, 90.0) for k in range(20)] + [("a", 31 * k + 1 + m, 0.0) for k in range(20) for m in range(30)]
    rows += [("c", m, 50.0) for m in range(620)]
    trace = pd.DataFrame(rows, columns=["pod", "t", "value"]).assign(t=lambda d: d["t"] * MIN)
    got = {(r.policy, r.parameter): r for r in frontier(idle_runs(trace, 5.0), split_t=310 * MIN)}
    # Scored: the spells from minute 311 (k = 10..19), one workload, from minute 310 to 619: 309 minutes.
    # The 5-minute window wakes a after each of the nine spells that end in activity; the 45-minute
    # window never stops one.
    five, never = got[("fixed", 5.0)], got[("fixed", 45.0)]
    assert (five.wakeups, never.wakeups) == (9, 0)
    assert five.wakeups_per_workload_day == pytest.approx(9 / (309 / 1440))
    assert never.wakeups_per_workload_day == 0.0
    assert all(r.wakeups_per_workload_day == pytest.approx(r.wakeups / (309 / 1440)) for r in got.values())


def test_replay_prints_the_headline_before_the_table_and_the_counts_in_json(tmp_path: Path) -> None:
    trace = _trace()
    csv = tmp_path / "duty.csv"
    pd.DataFrame({"value": trace["value"], "timestamp_anon": trace["t"] + 1.6e9,
                  "container_ip": trace["pod"]}).to_csv(csv, index=False)
    args = ["replay", "reclaim", "--utilization", str(csv), "--frontier", "--plot", str(tmp_path / "f.png")]
    runner = CliRunner()
    text = runner.invoke(main_app, args, env={"COLUMNS": "200"})
    assert text.exit_code == 0, text.output
    headline = [line for line in text.stderr.splitlines() if line.startswith("calibration part:")]
    assert len(headline) == 1, text.stderr
    # The data span minutes 0 to 999 (b's last sample), so the split of --calibrate 0.5 falls at
    # minute 499.5: q's five spells from 1 to 405 (the last ended at 505, open at the split for 94.5
    # minutes: long), and b's 100 spells from 3 to 498.
    assert headline[0].startswith("calibration part: 105 idle spells, 3 after 90% or more")
    assert headline[0].endswith("5 of 60 min or more")
    assert text.stderr.index("calibration part:") < text.stderr.index("wrote ")
    assert "context ceiling" in text.stdout and "workload-day" in text.stdout
    assert "GPU-hours reclaimed" in text.stdout and "reclaimed_gpu_hours" not in text.stdout  # words, not fields
    cells = [[c.strip() for c in line.split("│")[1:3]] for line in text.stdout.splitlines() if line.startswith("│")]
    assert ["fixed", "5 min"] in cells and ["adaptive", "1/day"] in cells and ["clairvoyant", "at 30 min"] in cells
    data = json.loads(runner.invoke(main_app, [*args, "--format", "json"]).stdout)
    assert data["calibration"] == {"spells": 105, "quiet_spells": 3, "long_spells": 5}
    assert [r["policy"] for r in data["frontier"]][:1] == ["fixed"]
    assert all(r["wakeups_per_workload_day"] is not None for r in data["frontier"])
    ceilings = {r["policy"]: r["context_ceiling_gpu_hours"] for r in data["frontier"]}
    assert ceilings["fixed"] is None and ceilings["clairvoyant"] is None and ceilings["adaptive"] is not None
