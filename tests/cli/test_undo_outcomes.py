"""``gpuaas undo``: the headline counts what was asked for by its kind, and the exit code says whether it was done.

An undo asked for and not done (refused over a later change, failed, unknown) exits 1 with one line naming the
ids, after its rows are printed; one with nothing left to undo (undone before, a dry-run) is success. The flow
is replaced here by its answer: the undoers themselves are tested against the cluster in tests/actions.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaas.actions import UndoResult
from gpuaas.cli.app import app
from gpuaas.models import Outcome
from reports.reclaim import undo_headline

runner = CliRunner()

STALE = UndoResult(23, Outcome.skipped, "forecast-cq: a100 quota is 8, not the plan's 7: someone changed a quota "
                   "since; nothing restored", "Cohort", None, "research", None, "quota-plan")
PLAN = UndoResult(24, Outcome.restored, "restored 2 ClusterQueues (a-cq, b-cq)", "Cohort", None, "research", 31,
                  "quota-plan")
RECLAIM = UndoResult(7, Outcome.restored, "restored", "RayCluster", "ml", "train", 40, "reclaim")
AGAIN = UndoResult(7, Outcome.no_op, "already restored by audit #40", "RayCluster", "ml", "train", None, "reclaim")
HOLD = UndoResult(9, Outcome.failed, "API server unavailable", "Workload", "ml", "w", None, "deadline-hold")
LOST = UndoResult(8, Outcome.unknown, "the PATCH got no usable answer", "RayCluster", "ml", "eval", None, "reclaim")
NOTHING = UndoResult(5, Outcome.no_op, "audit #5 is not an action gpuaas can undo (collect, applied): nothing to undo")


@pytest.mark.parametrize(("restores", "line"), [
    ([STALE], "Restored 0 of 1 quota plan. #23 skipped: forecast-cq: a100 quota is 8, not the plan's 7: someone "
              "changed a quota since; nothing restored."),
    ([STALE, PLAN], "Restored 1 of 2 quota plans (audit 24). #23 skipped: forecast-cq: a100 quota is 8, not the "
                    "plan's 7: someone changed a quota since; nothing restored."),
    ([RECLAIM], "Restored 1 of 1 reclaim (audit 7)."),
    ([RECLAIM, LOST, AGAIN], "Restored 1 of 3 reclaims (audit 7). 1 had nothing to undo (nothing of it is in "
                             "place: a dry-run, or undone or rolled back before); #8 unknown: the PATCH got no usable "
                             "answer."),
    ([STALE, LOST, HOLD], "Restored 0 of 3 changes. The other 3: see each row's result."),
    ([HOLD], "Restored 0 of 1 deadline hold. #9 failed: API server unavailable."),
    ([RECLAIM, PLAN], "Restored 2 of 2 changes (audit 7, 24)."),
    ([NOTHING], "Restored 0 of 1 change. 1 had nothing to undo (nothing of it is in place: a dry-run, or "
                  "undone or rolled back before)."),
], ids=["stale-plan", "plans", "reclaim", "reclaims", "refused", "hold", "mixed", "nothing-to-undo"])
def test_the_headline_names_what_was_undone(restores: list[UndoResult], line: str) -> None:
    assert undo_headline(restores) == line


def _undo(monkeypatch: pytest.MonkeyPatch, restores: list[UndoResult], *args: str) -> Any:
    """``gpuaas undo ID...`` with the ids known to the audit log and the flow answering ``restores``."""
    import gpuaas.cli.reclaim_cmd as reclaim_cmd
    import gpuaas.operations.incident as incident

    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    monkeypatch.setattr(incident, "missing_audit_ids", lambda store, ids: [])
    monkeypatch.setattr(reclaim_cmd, "run_flow", lambda flow, what, **kw: {
        "undo": [asdict(r) for r in restores], "headline": undo_headline(restores)})
    return runner.invoke(app, ["undo", *(str(r.audit_id) for r in restores), *args])


@pytest.mark.parametrize(("restores", "line"), [
    ([STALE], "error: 1 of 1 not undone (#23 skipped); see its row's message"),
    ([RECLAIM, LOST, HOLD], "error: 2 of 3 not undone (#8 unknown, #9 failed); see their rows' messages"),
], ids=["refused", "lost-and-failed"])
def test_an_undo_not_done_exits_1_after_its_rows(monkeypatch: pytest.MonkeyPatch, restores: list[UndoResult],
                                                 line: str) -> None:
    result = _undo(monkeypatch, restores)
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [line]
    # the headline (folded to the terminal) and the rows are printed first
    assert " ".join(result.stdout.split()).startswith(" ".join(undo_headline(restores).split()) + " Undo")
    assert all(f" {r.result} " in result.stdout for r in restores)


def test_the_json_rows_come_before_the_error_too(monkeypatch: pytest.MonkeyPatch) -> None:
    result = _undo(monkeypatch, [STALE], "--format", "json")
    assert result.exit_code == 1
    assert [r["result"] for r in json.loads(result.stdout)["undo"]] == ["skipped"]
    assert result.stderr.strip().splitlines()[-1] == "error: 1 of 1 not undone (#23 skipped); see its row's message"


@pytest.mark.parametrize("restores", [[RECLAIM], [AGAIN], [RECLAIM, AGAIN, NOTHING]], ids=["restored", "undone-before",
                                                                                          "restored-and-no-ops"])
def test_an_undo_with_nothing_left_to_undo_is_success(monkeypatch: pytest.MonkeyPatch,
                                                      restores: list[UndoResult]) -> None:
    result = _undo(monkeypatch, restores)
    assert result.exit_code == 0, result.output
    assert "error" not in result.stderr


@pytest.mark.parametrize(("args", "flag"), [
    (["undo", "9" * 5000], "'AUDIT_ID'"),
    (["undo", "9" * 20], "'AUDIT_ID'"),
    (["undo", "\u00b2"], "'AUDIT_ID'"),
    (["undo", "0"], "'AUDIT_ID'"),
    (["undo", "--", "-3"], "'AUDIT_ID'"),
    (["incident", "--undo", "9" * 5000], "'--undo'"),
    (["incident", "--undo", "\u00b2"], "'--undo'"),
], ids=["5000-digits", "past-the-range", "superscript", "zero", "negative", "incident-5000-digits",
        "incident-superscript"])
def test_an_id_outside_the_store_range_is_a_usage_error_naming_the_argument(args: list[str], flag: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    line = result.output.strip().splitlines()[-1]
    assert line.startswith(f"error: Invalid value for {flag}: expected an audit id, a whole number from 1 to "
                           f"{2**63 - 1}"), line
    assert "set_int_max_str_digits" not in result.output and "Traceback" not in result.output
    assert "9" * 101 not in result.output  # a pasted 5000-digit number is not echoed whole


def test_the_largest_id_is_still_an_id() -> None:
    from gpuaas.cli._common import audit_id

    assert audit_id(f"{2**63 - 1}.") == 2**63 - 1 and audit_id("007") == 7
