"""``gpuaas cost-report``'s funnel table in a terminal: its stages add up to the hours allocated, and it fits.

Why: the funnel table now has a column per stage (productive, in progress, busy without a verified outcome, busy
with its outcome unknown, idle, no telemetry), eight columns that cannot all fit 80 columns with every word whole.
A stage with no hours in any row adds nothing to the sum, so it is the first to go where the table does not fit
(named under it, ``--wide`` shows it); the stages with hours always stay, so each row still adds up.
The report is ``test_cost_report``'s hand-checked one (tenant a: 19.0 = 5.8 + 2.2 + 7.0 + 4.0).
"""

from __future__ import annotations

import pytest

from gpuaas.cli import _tables
from gpuaas.cli.cost_report_cmd import print_cost_tables
from gpuaas.policies.cost import build_cost_report
from reports.cost_report import cost_report_json
from tests.policies.test_cost_report import POLICY, _inputs


def _funnel(out: str) -> str:
    return out.split("Cost and verified outcomes per tenant")[0]


def test_at_80_columns_the_empty_stages_give_way_and_the_rest_add_up(monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    _tables.set_wide(False)
    print_cost_tables(cost_report_json(build_cost_report(_inputs(), POLICY), None))
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80, out
    funnel = _funnel(out)
    assert "(not shown at 80 columns: in progress GPU-h, busy, outcome unknown GPU-h" in funnel
    for word in ("allocated", "productive", "verified", "idle", "telemetry"):
        assert f" {word} " in funnel or f" {word}\n" in funnel, word
    a = next(line for line in funnel.splitlines() if line.startswith("│ a "))
    cells = [c.strip() for c in a.strip("│").split("│")]
    assert cells[:6] == ["a", "19.0", "5.8", "2.2", "7.0", "4.0"]


def test_at_160_columns_every_stage_is_shown(monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", "160")
    _tables.set_wide(False)
    print_cost_tables(cost_report_json(build_cost_report(_inputs(), POLICY), None))
    funnel = _funnel(capsys.readouterr().out)
    assert "not shown" not in funnel
    a = next(line for line in funnel.splitlines() if line.startswith("│ a "))
    assert [c.strip() for c in a.strip("│").split("│")][:8] == ["a", "19.0", "5.8", "0.0", "2.2", "0.0", "7.0", "4.0"]
