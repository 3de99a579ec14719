"""Every table at 80 and 120 columns: no word or number split, the least important columns left out first.

Two sources of tables: the commands that need no cluster (``audit list`` with seeded rows, ``plan
quotas`` and ``plan deadlines`` on the examples), run in-process, and the layouts of the
commands that do (reclaim, undo, rebalance, the data-quality and deadline tables) rendered by
``print_table`` with their real columns and long, realistic values. The check: each word and number
of every cell and header appears whole in the output, and no line is wider than the terminal.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpuaas.cli import _common, _tables
from gpuaas.cli.app import app
from gpuaas.settings import load_settings
from gpuaas.store import AuditEntry, open_store

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WIDTHS = (80, 120)
REASON = "every GPU at or below the threshold for the whole window; coverage 0.0355 of 30m; " * 3
LAYOUTS: dict[str, tuple[list[str], list[list[Any]], tuple[str, ...], tuple[str, ...]]] = {
    # name: (columns, rows, optional in drop order, notes), as the commands pass them
    "reclaim": (["audit id", "workload", "tenant", "GPUs", "idle for", "action", "frees", "result", "reason"],
                [[41, "RayCluster research/ray-hparam-sweep", "research", 8, "1h00m", "suspend", "quota", "planned",
                  "idle 1h00m, max activity 0.00 ≤ 0.05"],
                 [42, "InferenceService platform/llm-legacy", "platform", 1, "45m", "stop-annotation", "compute",
                  "skipped", REASON]],
                ("tenant", "idle for", "frees", "action"), ("reason",)),
    "undo": (["audit id", "subject", "result", "restore id", "message"],
             [[41, "RayCluster research/ray-hparam-sweep (Workload raycluster-ray-hparam-sweep-3f2a1)", "restored", 57,
               "spec.suspend back to false"]],
             ("restore id",), ("message",)),
    "audit": (["id", "when (UTC)", "flow", "action", "subject", "mode", "outcome", "reason"],
              [[57, "2026-11-29 02:31:07", "reclaim", "restore",
                "RayCluster research/ray-hparam-sweep (Workload raycluster-ray-hparam-sweep-3f2a1)", "apply",
                "restored", "spec.suspend back to false"]],
              ("action", "flow"), ("reason",)),
    "backlog": (["queue", "cohort", "pending", "pending GPUs", "oldest pending", "admitted GPUs", "nominal GPUs"],
                [["vision-cq", "research", "3", "24", "1h50m", "16", "32"],
                 ["platform-serving-cq", "research", "0", "0", "-", "9", "12"]],
                ("cohort", "admitted GPUs"), ()),
    "incident": (["when (UTC), audit id", "what", "result", "reason / evidence"],
                 [["10:13:01 #14 undoable", "reclaim RayCluster research/ray-hparam-sweep (Workload "
                   "raycluster-ray-hparam-sweep-3f2a1)", "apply: applied", REASON + "; window 30 m, max activity "
                   "0.00 ≤ 0.05, coverage 100 %, 8 GPUs"]],
                 (), ("reason / evidence",)),
    "rebalance": (["cohort", "queue", "flavor", "before", "after", "change", "demand", "shortfall", "reason"],
                  [["research", "vision-cq", "nvidia.com/gpu", 24, 32, "+8", "44", "20 -> 12",
                    "pending GPUs waiting 1h56m; +8 from nlp-cq (step limit 8)"]],
                  ("change", "cohort", "demand"), ("reason",)),
    "quality": (["source", "answered", "latency s", "staleness s", "why not"],
                [["prometheus", "no", "5.29", "-",
                  "Prometheus at http://prometheus.monitoring.svc.cluster.local:9090: name does not resolve"]],
                (), ("why not",)),
    "unjudged": (["workload", "GPUs", "why"],
                 [["InferenceService platform-serving/llm-chat-70b-long-context", "8",
                   "no request metrics for a serving workload"],
                  ["StatefulSet team-b/dark", "1", "telemetry incomplete for the window (no sample in the window, "
                   "0/1 GPUs seen)"]],
                 (), ("why",)),
    "idle": (["kind", "workload", "tenant", "GPUs", "max activity", "verdict", "why"],
             [["RayCluster", "research/ray-hparam-sweep", "research", 8, "0.00", "idle",
               "idle 1h00m, max activity 0.00 ≤ 0.05"],
              ["RayCluster", "vision/vision-train-24", "vision", 4, "0.77", "excluded", "inside the grace period"],
              ["Deployment", "platform/embed-batch", "platform", 1, "", "unknown", REASON]],
             ("tenant", "kind"), ("why",)),
    "deadlines": (["object", "Workload", "GPUs", "start", "end", "deadline", "status"],
                  [["RayCluster research/ray-hparam-sweep", "raycluster-ray-hparam-sweep-3f2a1", 8, "+0m", "+1h00m",
                    "+2h00m", "at risk now"]],
                  ("Workload", "end", "start"), ()),
}


def _words(values: Sequence[Any]) -> set[str]:
    return {w for v in values if v is not None for w in str(v).split()}


def _assert_whole(output: str, words: set[str], width: int) -> None:
    flat = output.replace("\n", " ")
    missing = sorted(w for w in words if w not in flat and w.strip("│┃"))
    assert not missing, f"split or missing at {width} columns: {missing}\n{output}"
    assert max(len(line) for line in output.splitlines()) <= width, output


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_each_layout_keeps_every_word_whole(name: str, width: int, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    columns, rows, optional, notes = LAYOUTS[name]
    monkeypatch.setenv("COLUMNS", str(width))
    _tables.set_wide(False)
    _tables.print_table(name, columns, rows, optional=optional, notes=notes)
    out = capsys.readouterr().out
    dropped = [c for c in optional if c not in out.split("(not shown")[0]]
    shown_words = _words([c for c in columns if c not in dropped]) | _words(
        [v for row in rows for c, v in zip(columns, row, strict=True) if c not in dropped])
    _assert_whole(out, shown_words, width)
    if width == 120 and name != "reclaim":
        assert "not shown" not in out  # nothing is left out where everything fits


def test_the_drop_order_is_the_tables_own(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    columns, rows, optional, notes = LAYOUTS["reclaim"]
    monkeypatch.setenv("COLUMNS", "80")
    _tables.print_table("reclaim", columns, rows, optional=optional, notes=notes)
    out = capsys.readouterr().out
    assert "(not shown at 80 columns: tenant, idle for, action; --wide shows them)" in out
    assert "  42 InferenceService platform/llm-legacy reason: every GPU at or below" in out  # under the table


def test_a_figure_with_its_unit_stays_on_one_line_and_less_important_columns_give_way(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The cost report's per-service table at 80 columns: ``$0.142 per 1,000 requests`` folded one word to a line
    would read as four rows; kept whole, the optional columns are left out to make room, and named."""
    columns = ["service", "requests/jobs", "verified outcomes", "within SLO", "GPU cost", "total cost",
               "cost per outcome (total)"]
    rows = [["llm-chat", "236,303", "212,491", "90.8%", "$29.96", "$29.96", "$0.142 per 1,000 requests"],
            ["llm-legacy", "0", "0", "unknown", "$14.98", "$14.98", "no verified outcome"]]
    monkeypatch.setenv("COLUMNS", "80")
    _tables.set_wide(False)
    _tables.print_table("cost", columns, rows, optional=["GPU cost", "requests/jobs", "within SLO"],
                        whole=["cost per outcome (total)"])
    out = capsys.readouterr().out
    assert "$0.142 per 1,000 requests" in out and "no verified outcome" in out  # each on one line
    assert "(not shown at 80 columns: GPU cost" in out
    assert max(len(line) for line in out.splitlines()) <= 80, out


def _body(out: str) -> list[str]:
    """The table's data rows, as printed (each cell's text between the rules, trailing spaces cut)."""
    return [" ".join(c.strip() for c in line.split("│")[1:-1]) for line in out.splitlines() if line.startswith("│")]


def test_a_column_that_tells_two_rows_apart_is_never_left_out(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """An InferenceService and the Deployment of the same name differ only in their kind: left out at 80
    columns, the idle table would print one row twice, and a reader could not tell which one is idle."""
    columns = ["kind", "workload", "tenant", "GPUs", "max activity", "verdict", "why"]
    name = "research-platform/llm-chat-70b-long-context"
    why = "idle 1h00m, max activity 0.00 ≤ 0.05"
    rows = [["InferenceService", name, "research-platform", 8, "0.00", "idle", why],
            ["Deployment", name, "research-platform", 8, "0.00", "idle", why]]
    monkeypatch.setenv("COLUMNS", "80")
    _tables.set_wide(False)
    _tables.print_table("idle", columns, rows, optional=("tenant", "kind"), notes=("why",))
    out = capsys.readouterr().out
    assert _body(out) == [f"InferenceService {name} 8 0.00 idle", f"Deployment {name} 8 0.00 idle"], out
    assert "(not shown at 80 columns: tenant; --wide shows them)" in out  # the tenant tells no row apart

    # Rows that are the same in every column are the same: nothing is kept for them.
    _tables.print_table("idle", columns, [rows[1], rows[1]], optional=("tenant", "kind"), notes=("why",))
    out = capsys.readouterr().out
    assert _body(out) == [f"{name} 8 0.00 idle"] * 2, out
    assert "(not shown at 80 columns: tenant, kind; --wide shows them)" in out


def test_a_message_under_the_undo_table_names_the_subject(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    # The subject wraps between its words in the table, and leads the row's message under it.
    columns, rows, optional, notes = LAYOUTS["undo"]
    monkeypatch.setenv("COLUMNS", "60")
    _tables.print_table("undo", columns, rows, optional=optional, notes=notes)
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 60, out
    flat = " ".join(out.split())
    assert "41 RayCluster research/ray-hparam-sweep (Workload raycluster-ray-hparam-sweep-3f2a1) message: spec.suspend" \
        in flat


def test_a_reason_under_the_table_names_its_row(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    # The idle table's first column is a kind, which several rows share: the workload names the row.
    columns, rows, optional, notes = LAYOUTS["idle"]
    monkeypatch.setenv("COLUMNS", "80")
    _tables.print_table("idle", columns, rows, optional=optional, notes=notes)
    out = capsys.readouterr().out
    assert "  RayCluster research/ray-hparam-sweep why: idle 1h00m, max activity 0.00 ≤ 0.05" in out
    assert "  RayCluster vision/vision-train-24 why: inside the grace period" in out
    assert "  Deployment platform/embed-batch why: every GPU at or below" in out


def test_the_unjudged_table_says_how_many_it_leaves_out(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from gpuaas.cli.collect_cmd import print_collect

    monkeypatch.setenv("COLUMNS", "120")
    listed = [{"workload": f"Notebook team-a/nb-{i:02d}", "gpus": 1.0, "why": "no sample"} for i in range(50)]
    print_collect({"queues": [], "sources": {}, "unjudged": listed, "unjudged_count": 60})
    out = capsys.readouterr().out
    assert "60 GPU workloads gpuaas cannot judge, so never reclaims (the 50 with the most GPUs listed):" in out
    assert "nb-00" in out and "nb-49" in out
    print_collect({"queues": [], "sources": {}, "unjudged": [], "unjudged_count": 0})
    assert "cannot judge" not in capsys.readouterr().out


def test_brackets_in_a_cell_or_an_error_are_printed_as_they_are(monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Cells and errors hold text from the cluster and from files, which the console must not read as
    its markup: ``[stop, length]`` would vanish as a style, and ``[/x]`` end the command with a traceback."""
    monkeypatch.setenv("COLUMNS", "120")
    _tables.print_table("reasons [bold]", ["service", "reasons"], [["chat", "finished [stop, length] or [/x]"]])
    out = capsys.readouterr().out
    assert "finished [stop, length] or [/x]" in out and "reasons [bold]" in out
    _common.fail("[/x].yaml: cannot read policy file")
    assert capsys.readouterr().err.strip() == "error: [/x].yaml: cannot read policy file"


def test_control_characters_are_written_out_not_sent_to_the_terminal(monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A NUL would vanish on the screen and an escape sequence (clear the screen, recolour) be obeyed."""
    monkeypatch.setenv("COLUMNS", "120")
    _tables.print_table("pods \x1b[2J", ["pod", "reason"], [["caf\x00e", "idle\x1b[31m since 02:00\x07"]])
    out = capsys.readouterr().out
    assert "\x00" not in out and "\x1b" not in out and "\x07" not in out
    assert "caf\\x00e" in out and "idle\\x1b[31m since 02:00\\x07" in out and "pods \\x1b[2J" in out
    _common.fail("team\x00a: no such queue")
    assert capsys.readouterr().err.strip() == "error: team\\x00a: no such queue"
    assert _common.visible("tab\tand\nnewline stay") == "tab\tand\nnewline stay"


@given(st.text())
@settings(deadline=None, max_examples=200)
@example("caf\x00e \x1b[2J\x9b31m\r\ttab\nline")
def test_visible_leaves_no_control_character_but_tab_and_newline(text: str) -> None:
    shown = _common.visible(text)
    assert not [c for c in shown if unicodedata.category(c) == "Cc" and c not in "\t\n"]
    plain = all(unicodedata.category(c) != "Cc" or c in "\t\n" for c in text)
    assert (shown == text) == plain  # text without control characters is left exactly as it is


def _seed_audit() -> None:
    store = open_store(load_settings())
    reason = "\n".join(f"line {k}: coverage 0.0355 below 0.9 for RayCluster research/ray-hparam-sweep"
                       for k in range(10))
    for mode, outcome in (("dry-run", "planned"), ("apply", "applied")):
        store.append(AuditEntry(flow="reclaim", flow_run_id=None, action="reclaim", kind="RayCluster",
                                namespace="research", name="ray-hparam-sweep", uid="u1", mode=mode, outcome=outcome,
                                reason=reason, created_at=datetime(2026, 12, 1, 21, 3, 50, tzinfo=UTC)))
    store.close()


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("argv", [["audit", "list"], ["plan", "quotas", str(EXAMPLES / "quota_problem.yaml")],
                                  ["plan", "deadlines", str(EXAMPLES / "deadline_problem.yaml")]],
                         ids=["audit", "plan-quotas", "plan-deadlines"])
def test_commands_keep_every_word_whole(argv: list[str], width: int) -> None:
    if argv[0] == "audit":
        _seed_audit()
    result = CliRunner().invoke(app, argv, env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    wide = CliRunner().invoke(app, [*argv, "--wide"], env={"COLUMNS": "400"}).stdout
    cells = {w for line in wide.splitlines() for cell in line.split("│")[1:-1] for w in cell.split()}
    dropped = result.stdout.split("(not shown at")[-1] if "(not shown at" in result.stdout else ""
    kept = {w for w in cells if not any(w in d for d in dropped.split(";")[0].split(", "))} if dropped else cells
    _assert_whole(result.stdout, {w for w in kept if w not in ("…",)} - _dropped_values(wide, dropped), width)
    if argv[0] == "audit":
        assert "dry-run" in result.stdout and "apply" in result.stdout  # the audit log never hides the mode


def _dropped_values(wide: str, dropped: str) -> set[str]:
    """Words that appear only in the columns the narrow table left out (read from the wide one)."""
    names = [n.strip() for n in dropped.split(";")[0].split(",") if n.strip()] if dropped else []
    lines = wide.splitlines()
    header = next((line for line in lines if line.startswith("┃")), "")
    heads = [h.strip() for h in header.split("┃")[1:-1]]
    out: set[str] = set()
    for line in lines:
        if line.startswith("│"):
            cells = line.split("│")[1:-1]
            for head, cell in zip(heads, cells, strict=False):
                if head in names:
                    out |= set(cell.split())
    return out


def test_a_reason_that_would_fold_into_a_narrow_column_moves_under_the_table(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A table that fits only with its reason folded to five lines a row does not fit: the reason goes under it,
    as where the table is wider than the terminal. A reason of two lines stays in its column."""
    columns = ["queue", "flavor", "before", "after", "change", "shortfall", "reason"]
    long = "team-b a100: 8 -> 12 (+4 from team-a): demand 20, shortfall 12 -> 8; limited by the step of 4 (50% of 8)"
    rows = [["team-b", "a100", 8, 12, "+4", 8, long]]
    monkeypatch.setenv("COLUMNS", "80")
    _tables.set_wide(False)
    _tables.print_table("plan", columns, rows, notes=("reason",))
    out = capsys.readouterr().out
    assert "reason" not in next(line for line in out.splitlines() if line.startswith("┃")), out
    assert "  team-b reason: team-b a100: 8 -> 12" in out
    assert _body(out) == ["team-b a100 8 12 +4 8"], out

    monkeypatch.setenv("COLUMNS", "120")
    _tables.print_table("plan", columns, rows, notes=("reason",))
    out = capsys.readouterr().out
    assert "team-b reason:" not in out and len(_body(out)) <= _tables.NOTE_LINES, out
    _tables.set_wide(True)  # --wide: everything in the table, on one line
    try:
        monkeypatch.setenv("COLUMNS", "80")
        _tables.print_table("plan", columns, rows, notes=("reason",))
        out = capsys.readouterr().out
        assert "team-b reason:" not in out and long in out
    finally:
        _tables.set_wide(False)


def test_a_detail_as_wide_as_most_of_the_terminal_stays_beside_its_check(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A preflight's detail folds to five lines in a column 90 wide; under the table it would take four, apart
    from the check it explains: it stays in the table."""
    detail = " ".join(["none of the 12 GPU workloads' pods is named by the DCGM_FI_DEV_GPU_UTIL series"] * 5)
    monkeypatch.setenv("COLUMNS", "120")
    _tables.set_wide(False)
    _tables.print_table("Preflight", ["check", "verdict", "detail"], [["GPU telemetry", "failed", detail]],
                        notes=("detail",))
    out = capsys.readouterr().out
    assert "detail" in next(line for line in out.splitlines() if line.startswith("┃")), out
    assert "GPU telemetry detail:" not in out and len(_body(out)) > _tables.NOTE_LINES, out


def test_the_incident_timeline_moves_its_reasons_and_evidence_under_the_table(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``gpuaas incident`` at 100 columns: the reason and evidence of each row under the table, not six lines a row."""
    from gpuaas.cli.incident_cmd import _tables as incident_tables

    def event(audit_id: int, at: str) -> dict[str, Any]:
        return {"at": f"2026-12-01T{at}+00:00", "audit_id": audit_id, "undoable": audit_id == 14,
                "action": "reclaim", "refers_to": None, "subject": "RayCluster research/ray-hparam-sweep",
                "mode": "apply", "outcome": "applied",
                "reason": "idle 1h00m, max activity 0.00 ≤ 0.05; every GPU at or below the threshold for the whole "
                          "window",
                "evidence": "window 30 m, max activity 0.00 ≤ 0.05, coverage 100 %, 8 GPUs"}

    result = {"summary": "2 audit rows in the window", "undo": [], "fleet_changes": [], "quota": [], "notes": [],
              "events": [event(14, "10:13:01"), event(15, "10:43:01")]}
    monkeypatch.setenv("COLUMNS", "100")
    _tables.set_wide(False)
    incident_tables(result)
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 100, out
    assert "reason / evidence" not in next(line for line in out.splitlines() if line.startswith("┃")), out
    assert len(_body(out)) == 2, out  # one line a row
    flat = " ".join(out.split())
    assert ("10:13:01 #14 undoable reason / evidence: idle 1h00m, max activity 0.00 ≤ 0.05; every GPU at or below "
            "the threshold for the whole window; window 30 m") in flat, out
    assert "10:43:01 #15 reason / evidence: idle 1h00m" in flat, out
