"""The reclaim decisions table says in a few words why a target was not acted on, and whether its audit id is an
earlier run's row; its rows fit the Prefect UI's box on a 1600-pixel screen however long the workload's name.

Seen in a walkthrough: ``deferred: over the cap of 1 actions per…`` (the reason cut at 40 characters) hid that
the row's audit id was an earlier run's, and the row still widened the table past its box. The summary named
that id twice: ``…(unchanged, as recorded in audit #7 at …); audit #7``.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gpuaas.actions import ActionResult
from gpuaas.models import Outcome
from gpuaas.policies.reclaim import Decision, SkipCause
from reports._reclaim_rows import (
    CAUSE_WORDS,
    ROW_BUDGET,
    WORKLOAD_MIN,
    decision_rows,
    evidence_lines,
    result_cell,
    row_width,
)

EVIDENCE = {"activity_max": 0.0, "threshold": 0.05, "window_minutes": 60, "coverage": 1.0, "gpus_observed": 1,
            "gpus_requested": 1}
EARLIER = datetime(2026, 12, 7, 21, 9, tzinfo=UTC)
UNCHANGED = "over the cap of 1 actions per run (rank 2 by GPUs x idle time) (unchanged, as recorded in audit #7 at " \
            "2026-12-07 21:09 UTC)"


def result(name: str = "llm-legacy", outcome: str = Outcome.deferred, *, kind: str = "InferenceService",
           namespace: str = "platform", cause: SkipCause | None = SkipCause.over_cap, audit_id: int | None = 7,
           since: datetime | None = EARLIER, reason: str = UNCHANGED, method: str | None = None) -> ActionResult:
    decision = Decision(kind=kind, namespace=namespace, name=name, uid="u", tenant="platform", gpus=1,
                        idle_seconds=3600, free="quota", outcome="planned", reason="idle 1h00m", resource_version="1",
                        idempotency_key=name, mode="dry-run", evidence=EVIDENCE)
    return ActionResult(decision, outcome, reason, audit_id, method=method, cause=cause,  # type: ignore[arg-type]
                        unchanged_since=since)


def test_an_unchanged_skip_says_its_cause_and_that_its_row_is_an_earlier_one() -> None:
    assert result_cell(result()) == "deferred: over the cap (unchanged since #7)"
    opted = result("nb", Outcome.skipped, kind="Notebook", cause=SkipCause.opted_out, reason="opted out (...)")
    assert result_cell(opted) == "skipped: opted out (unchanged since #7)"
    # recorded by this run: its own row, nothing to point back at
    assert result_cell(result(since=None, audit_id=16)) == "deferred: over the cap"
    # a planned decision says the stop it makes (the table has no action column)
    planned = result("ray", Outcome.planned, cause=None, since=None, reason="idle", method="deactivate")
    assert result_cell(planned) == "planned: deactivate"
    # a refusal without a cause keeps its reason's first words, cut at a word
    refused = result(outcome=Outcome.failed, cause=None, since=None, reason="403 Forbidden: the service account may "
                                                                            "not patch inferenceservices")
    assert result_cell(refused) == "failed: 403 Forbidden: the …"


@pytest.mark.parametrize("cause", list(SkipCause), ids=str)
def test_every_cause_has_a_few_words(cause: SkipCause) -> None:
    assert 0 < len(CAUSE_WORDS[cause]) <= 17


def test_the_summary_names_an_unchanged_rows_id_once() -> None:
    [line] = evidence_lines([result()])
    assert line.endswith("(unchanged, as recorded in audit #7 at 2026-12-07 21:09 UTC)"), line
    assert line.count("#7") == 1
    [own] = evidence_lines([result(since=None, audit_id=16, reason="over the cap")])
    assert own.endswith("**deferred**: over the cap; audit #16")


LONG = "llm-legacy-chat-completions-llama-3-70b-instruct-canary-0042"


def test_a_row_fits_the_budget_and_a_name_is_shortened_only_when_it_must() -> None:
    walk = [result("ray-hparam-sweep", Outcome.planned, kind="RayCluster", namespace="research", cause=None,
                   since=None, audit_id=16, method="deactivate"), result()]
    rows = decision_rows(walk)
    assert list(rows[0]) == ["workload", "GPUs", "idle", "evidence", "result", "audit id"]
    assert [r["workload"] for r in rows] == ["RayCluster research/ray-hparam-sweep", "InferenceService platform/llm-legacy"]
    assert row_width(rows) <= ROW_BUDGET
    worst = [result(LONG, Outcome.skipped, namespace="platform-inference", cause=SkipCause.already_deactivated,
                    audit_id=123456)]
    rows = decision_rows(worst)
    assert row_width(rows) <= ROW_BUDGET
    name = rows[0]["workload"]
    assert "…" in name and name.startswith("InferenceService pl") and name.endswith("-0042")
    assert len(name) >= WORKLOAD_MIN
