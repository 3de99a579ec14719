"""``gpuaas replay reclaim --frontier`` where every row is 0 says why on its first line, in numbers.

Covers: a trace whose idle spells all start before the split (the default ``--calibrate 0.5``): the first line
names the split's time, the scored hours and the spells, the command exits 0 as a replay with nothing to replay
does, the JSON keeps its keys and gets the line on stderr, and the plot is an empty frame said to be one; the same
fleet history read from Prometheus (``--since 6h``, as a newcomer runs it) points at a longer ``--since``; the
same trace with ``--calibrate 0`` scores every spell and has no such line; and each other reason every row can
be 0 (no samples, no idle spell, spells too short to stop), worded from hand-written inputs.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from gpuaas.cli import replay_cmd
from gpuaas.cli.app import app
from gpuaas.policies.analysis import FrontierRow
from gpuaas.policies.reclaim import idle_runs
from gpuaas.sources.traces import load_utilization
from reports.frontier import nothing_scored_headline

runner = CliRunner()
WIDE = {"COLUMNS": "400"}  # the headline on one line
T0 = int(datetime(2026, 12, 7, 15, 14, tzinfo=UTC).timestamp())
IDLE_FROM_MIN = {"a": 30, "b": 60, "c": 95, "d": 150}
"""Four of eleven pods go idle in the first 3 of 6 hours and stay idle to the end: 18.5 GPU-hours of idle time,
none of it in a spell that starts in the second half."""

SPLIT_LINE = ("Reclaim frontier: no idle spell starts in the scored part (after 18:14 UTC, the last 3.0 h): all 4 "
              "idle spells start before it, so every row is 0; give a longer trace, or --calibrate 0 to score every "
              "spell (then nothing is chosen out of sample).")


def _trace(path: Path, t0: int = T0) -> Path:
    """Six hours at one-minute steps, 15:14 to 21:14 UTC by default."""
    lines = ["timestamp,pod,value"]
    for minute in range(361):
        for pod in "abcdefghijk":
            idle = pod in IDLE_FROM_MIN and minute >= IDLE_FROM_MIN[pod]
            lines.append(f"{t0 + 60 * minute},{pod},{0 if idle else 70}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_spells_that_all_start_before_the_split_are_named_on_the_first_line(tmp_path: Path) -> None:
    plot = tmp_path / "frontier.png"
    result = runner.invoke(app, ["replay", "reclaim", "--utilization", str(_trace(tmp_path / "t.csv")), "--frontier",
                                 "--plot", str(plot)], env=WIDE)
    assert result.exit_code == 0, result.output  # nothing to report is not a failure, as for the plain replay
    assert result.stdout.splitlines()[0] == SPLIT_LINE
    assert "calibration part: 4 idle spells" in result.stderr
    assert "nothing to compare" not in result.stderr  # the first line says why; no second reason beside it
    assert f"wrote {plot} (an empty frame: every row is 0)" in result.stderr.splitlines()
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_the_json_keeps_its_keys_and_the_line_goes_to_stderr(tmp_path: Path) -> None:
    result = runner.invoke(app, ["replay", "reclaim", "--utilization", str(_trace(tmp_path / "t.csv")), "--frontier",
                                 "--plot", str(tmp_path / "f.png"), "--format", "json"], env=WIDE)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == {"calibration", "frontier"}
    assert all(r["reclaimed_gpu_hours"] == 0 and r["wakeups"] == 0 for r in data["frontier"])
    assert SPLIT_LINE in result.stderr.splitlines()


def test_calibrate_0_scores_every_spell_and_says_nothing_of_a_split(tmp_path: Path) -> None:
    result = runner.invoke(app, ["replay", "reclaim", "--utilization", str(_trace(tmp_path / "t.csv")), "--frontier",
                                 "--calibrate", "0", "--plot", str(tmp_path / "f.png")], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "every row is 0" not in result.output
    assert result.stdout.lstrip().startswith("Reclaim frontier, idle <= 5 % (all hours)")
    assert f"wrote {tmp_path / 'f.png'}" in result.stderr.splitlines()


def test_six_hours_from_prometheus_point_at_a_longer_since(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The walkthrough's command: the fleet's history over the last 6 h, every spell begun in the first 3."""

    def history(settings: object, start: datetime, end: datetime, **_: object) -> tuple[pd.DataFrame, int, float]:
        util = load_utilization([_trace(tmp_path / "p.csv", int(start.timestamp()))], unit="auto")
        runs = idle_runs(util, 5.0)
        runs["gpus"] = 1.0
        return runs, 11, 11 * 6 * 3600.0

    monkeypatch.setattr(replay_cmd, "fleet_history", history)
    result = runner.invoke(app, ["replay", "reclaim", "--from-prometheus", "--since", "6h", "--frontier", "--plot",
                                 str(tmp_path / "f.png")], env=WIDE)
    assert result.exit_code == 0, result.output
    assert re.fullmatch(
        r"Reclaim frontier: no idle spell starts in the scored part \(after (\d{4}-\d\d-\d\d )?\d\d:\d\d UTC, the "
        r"last 3\.0 h\): all 4 idle spells start before it, so every row is 0; give a longer --since, or "
        r"--calibrate 0 to score every spell \(then nothing is chosen out of sample\)\.",
        result.stdout.splitlines()[0]), result.stdout.splitlines()[0]


ZEROS = [FrontierRow(policy, p, 0.0, 0) for policy, p in (("fixed", 5.0), ("adaptive", 1.0), ("clairvoyant", 5.0))]
SPAN = (float(T0), float(T0 + 6 * 3600))


def _runs(*spells: tuple[int, int]) -> pd.DataFrame:
    """Idle spells as (start, length) in minutes from 15:14 UTC."""
    return pd.DataFrame({"pod": [f"p{i}" for i in range(len(spells))],
                         "start": [T0 + 60.0 * s for s, _ in spells], "length": [60.0 * n for _, n in spells]})


@pytest.mark.parametrize(("runs", "pods", "split", "prometheus", "line"), [
    (_runs(), 0, None, False, "Reclaim frontier: nothing to replay, the input holds no duty-cycle samples; check the "
                              "--utilization files."),
    (_runs(), 0, None, True, "Reclaim frontier: nothing to replay, Prometheus returned no GPU duty-cycle samples for "
                             "the --since window (and --namespace, if given)."),
    (_runs(), 11, None, True, "Reclaim frontier: no idle spell (duty cycle <= 5 %) on any of the 11 workloads in the "
                              "6.0 h read: every row is 0; give a longer --since, or a higher --threshold."),
    (_runs(), 1, SPAN[0] + 1800, False, "Reclaim frontier: no idle spell (duty cycle <= 5 %) on the one pod in the "
                                        "6.0 h read: every row is 0; give a longer trace, or a higher --threshold."),
    (_runs((10, 200)), 3, SPAN[0] + 3 * 3600, True,
     "Reclaim frontier: no idle spell starts in the scored part (after 18:14 UTC, the last 3.0 h): the one idle "
     "spell starts before it, so every row is 0; give a longer --since, or --calibrate 0 to score every spell (then "
     "nothing is chosen out of sample)."),
    (_runs((10, 200), (200, 4), (250, 3)), 3, SPAN[0] + 3 * 3600, False,
     "Reclaim frontier: every row is 0: the longest of the 2 idle spells that start in the scored part (after 18:14 "
     "UTC, the last 3.0 h) lasts 4 min, too short for any row to stop; give a longer trace."),
    (_runs((200, 4)), 3, None, False,
     "Reclaim frontier: every row is 0: the one idle spell lasts 4 min, too short for any row to stop; give a longer "
     "trace."),
], ids=["no-samples", "no-samples-prometheus", "no-spell", "no-spell-one-pod", "one-spell-before-the-split",
        "too-short", "too-short-all-hours"])
def test_each_reason_every_row_is_0_is_said_in_numbers(runs: pd.DataFrame, pods: int, split: float | None,
                                                        prometheus: bool, line: str) -> None:
    assert nothing_scored_headline(ZEROS, runs, pods=pods, span=SPAN, split_t=split, threshold_pct=5.0,
                                   from_prometheus=prometheus) == line


def test_a_frontier_with_one_row_above_0_leads_with_its_own_headline() -> None:
    rows = [*ZEROS[:-1], FrontierRow("clairvoyant", 5.0, 0.5, 0)]
    assert nothing_scored_headline(rows, _runs((200, 40)), pods=3, span=SPAN, split_t=None, threshold_pct=5.0,
                                   from_prometheus=False) is None


def test_a_span_across_midnight_dates_the_split() -> None:
    span = (SPAN[0] + 6 * 3600, SPAN[1] + 6 * 3600)  # 21:14 to 03:14 the next day
    line = nothing_scored_headline(ZEROS, _runs((400, 60)), pods=3, span=span, split_t=span[0] + 3 * 3600,
                                   threshold_pct=5.0, from_prometheus=True)
    assert line is not None and "(after 2026-12-08 00:14 UTC, the last 3.0 h)" in line
