"""The incident review's headline counts each action once, and calls a dry-run's rows decisions, never reclaims.

Seen in a walkthrough: ``16 reclaims (15 dry-run, 1 deferred)`` for an hour in which nothing was reclaimed and
the deferred one was a dry-run too. The plot had one unlabelled axis for workloads and GPUs, an empty stretch
before the first collect that read as a quiet fleet, and no mark of any decision.
"""

from __future__ import annotations

import re
from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from gpuaas.models import Outcome
from gpuaas.policies.incident import ActionOutcome, build_review
from reports._incident_plot import figure
from reports.incident import _count_words, action_tally, summary_line
from tests.policies.test_incident_review import AUDIT, END, T0, UNDOABLE, queue_rows, review, tenant_rows


def _actions(*specs: tuple[str, str, str, int]) -> list[ActionOutcome]:
    out, n = [], 0
    for action, mode, result, count in specs:
        for _ in range(count):
            n += 1
            out.append(ActionOutcome(n, action, f"Notebook a/nb{n}", mode, result))
    return out


def _words(actions: list[ActionOutcome]) -> str:
    return _count_words(type("R", (), {"actions": actions})())  # type: ignore[arg-type]


def test_a_dry_run_hour_is_decisions_all_dry_run_each_counted_once() -> None:
    actions = _actions(("reclaim", "dry-run", Outcome.dry_run, 15), ("reclaim", "dry-run", Outcome.deferred, 1))
    assert _words(actions) == "16 reclaim decisions, all dry-run (15 planned, 1 deferred)"


def test_an_apply_hour_leads_with_what_was_applied() -> None:
    actions = _actions(("reclaim", "apply", Outcome.skipped, 2), ("reclaim", "apply", Outcome.applied, 3))
    assert _words(actions) == "3 reclaims applied, 2 skipped"
    assert _words(_actions(("reclaim", "apply", Outcome.skipped, 2))) == "2 reclaim decisions in apply mode (2 skipped)"
    # the hand-checked hour: one apply, one dry-run, one quota plan
    assert summary_line(review()).startswith("2026-12-01 02:00–03:00 UTC: 1 reclaim applied, 1 dry-run reclaim "
                                             "decision (1 planned), 1 quota plan applied; ")


_RESULTS = [Outcome.applied, Outcome.dry_run, Outcome.skipped, Outcome.deferred, Outcome.failed, Outcome.open,
            Outcome.unknown, Outcome.restored]


@given(st.lists(st.tuples(st.sampled_from(["reclaim", "quota-plan", "restore", "deadline-hold"]),
                          st.sampled_from(["apply", "dry-run"]), st.sampled_from(_RESULTS)), max_size=40))
def test_the_counts_partition_the_actions(specs: list[tuple[str, str, str]]) -> None:
    actions = _actions(*((a, m, r, 1) for a, m, r in specs))
    tallies = action_tally(actions)
    assert sum(t.total for t in tallies) == len(actions)  # no action counted twice, none left out
    for t in tallies:
        assert t.total == sum(1 for o in actions if (o.action, o.mode) == (t.action, t.mode))
        assert len({r for r, _ in t.parts}) == len(t.parts)
    # The words say the same: each "N ... decision(s)" total is the sum of the counts in its parentheses, and the
    # counts outside those totals sum to the number of actions.
    text = _words(actions)
    totals = list(re.finditer(r"(\d+) [a-z -]*decisions?[a-z ,-]*\(([^)]*)\)", text))
    for m in totals:
        assert int(m.group(1)) == sum(int(n) for n in re.findall(r"\d+", m.group(2))), text
    parts = sum(int(n) for n in re.findall(r"\d+", text)) - sum(int(m.group(1)) for m in totals)
    assert parts == len(actions), text
    # "reclaim" names a reclaim only where one was applied; otherwise it qualifies "decision"
    assert set(re.findall(r"\breclaims? (\w+)", text)) <= {"applied", "restored", "decision", "decisions"}, text


def test_the_evidence_writes_units_as_the_rest_of_the_cli() -> None:
    [nb] = [e for e in review().events if e.audit_id == 2]
    assert nb.evidence == "window 30m, max activity 0.00 ≤ 0.05, coverage 100%, 2 GPUs"


def test_the_plot_labels_its_axes_shades_the_time_without_data_and_marks_the_decisions() -> None:
    late = build_review(queue_rows(), tenant_rows(), AUDIT, T0 - timedelta(minutes=50), END - timedelta(minutes=50),
                        undoable_actions=UNDOABLE)
    fig = figure(late, "%H:%M")
    assert fig is not None
    backlog, gpus = fig.axes
    assert (backlog.get_ylabel(), gpus.get_ylabel()) == ("backlog (workloads)", "GPUs")
    assert [t.get_text() for t in backlog.texts] == ["no data before 02:00 UTC"]
    assert len(backlog.patches) == 1  # the shaded span, 01:10-02:00
    fig = figure(review(), "%H:%M")
    assert fig is not None
    legend = fig.axes[0].get_legend()
    assert legend is not None
    assert [t.get_text() for t in legend.get_texts()][-2:] == ["applied (2)", "dry-run decisions (1)"]
    assert not fig.axes[0].texts  # the window starts at its first collect: nothing shaded
