"""One reclaim decision as people and machines read it: the table's short cells, the summary's evidence bullet,
the JSON row. Pure.

The table artifact is read in the Prefect UI, which never wraps a cell: a cell that says everything widens the
table past the screen and hides its last column (the audit id, the one an operator passes to ``undo``). So the
table says what matters in a few words (the result and its ``SkipCause`` in words, and whether the row it points
at is an earlier run's), and the summary artifact's evidence list has the whole reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpuaas.actions import ActionResult
from gpuaas.models import Outcome
from gpuaas.policies.reclaim import SkipCause
from reports._format import brief, counted, duration

__all__ = ["CAUSE_WORDS", "ROW_BUDGET", "decision_dicts", "decision_rows", "evidence_lines", "reason_phrase",
           "result_cell", "row_width"]

CAUSE_WORDS: dict[SkipCause, str] = {
    SkipCause.past_evidence: "evidence too old",
    SkipCause.source_missing: "a source missing",
    SkipCause.degraded: "degraded snapshot",
    SkipCause.stale_telemetry: "stale telemetry",
    SkipCause.keda: "left to KEDA",
    SkipCause.partly_busy: "partly busy",
    SkipCause.owner_missing: "owner not found",
    SkipCause.opted_out: "opted out",
    SkipCause.already_stopped: "already stopped",
    SkipCause.no_workers: "no workers left",
    SkipCause.already_deactivated: "deactivated",
    SkipCause.already_decided: "already decided",
    SkipCause.restored_recently: "restored recently",
    SkipCause.over_cap: "over the cap",
    SkipCause.change_freeze: "change freeze",
    SkipCause.queue_misnamed: "queue misnamed",
    SkipCause.object_deleted: "object deleted",
    SkipCause.no_uid: "no uid known",
    SkipCause.recreated: "recreated",
    SkipCause.changed: "changed since",
    SkipCause.found_stopped: "found stopped",
    SkipCause.being_deleted: "being deleted",
    SkipCause.gitops_managed: "GitOps-managed",
    SkipCause.reverted: "started again",
    SkipCause.stop_not_held: "stop did not hold",
}
"""A skip's or deferral's cause in the table's few words; its reason, with the numbers, is in the summary."""

WORKLOAD_MIN = 24
"""Characters a workload's name keeps however long the rest of its table's rows are."""
CAUSELESS_WORDS = 20
"""Characters of the reason of a result with no ``SkipCause`` (a refused write: ``403 Forbidden …``), cut at a word."""

ROW_BUDGET = 121
"""Characters one table row may hold, counting each column as its widest of header and cell (``row_width``).

Measured in headless Chromium at 1600 px: the decisions table's box is 1044 px wide; its six columns take
about 24 px of padding each and a character about 7 px: a row of 130 characters was 1078 px wide, one of 124
with the widest cause 1048 px. ``tests/e2e/test_reclaim_table_width.py`` opens the longest rows it allows in
Chromium and checks they fit."""


def reason_phrase(r: ActionResult) -> str:
    """Why this workload was a target, with its numbers (``idle 1h00m, max activity 0.00 ≤ 0.05``): the decision's
    reason, as its audit row holds it (``gpuaas.phrases``); a skipped or failed action keeps its own reason."""
    return r.decision.reason if r.result in (Outcome.planned, Outcome.applied) else r.reason


def decision_dicts(results: Sequence[ActionResult]) -> list[dict[str, Any]]:
    """The machine form (``gpuaas reclaim --format json``)."""
    return [{
        "audit_id": r.audit_id, "kind": r.decision.kind, "namespace": r.decision.namespace, "name": r.decision.name,
        "tenant": r.decision.tenant, "gpus": r.decision.gpus, "idle_seconds": r.decision.idle_seconds,
        "action": r.method or "-", "frees": r.frees or "-", "mode": r.decision.mode, "result": r.result,
        "reason": reason_phrase(r), "window_minutes": r.decision.evidence.get("window_minutes"),
        "window_reason": r.decision.evidence.get("window_reason"), "subject": r.decision.subject,
        "cause": r.cause, "unchanged_since": r.unchanged_since.isoformat() if r.unchanged_since else None,
    } for r in results]


def _window(evidence: dict[str, Any]) -> str:
    """The evidence window as every duration is written (``30m``, ``1h00m``)."""
    return duration(float(evidence.get("window_minutes") or 0) * 60)


def _evidence_text(evidence: dict[str, Any]) -> str:
    """``max activity 0.00 ≤ 0.05 over 30m, 100% seen``: the numbers behind the verdict (the markdown's evidence)."""
    act = evidence.get("activity_max")
    req = evidence.get("requests")
    window = f"over {_window(evidence)}"
    parts = [f"max activity {act:.2f} ≤ {evidence.get('threshold')} {window}" if act is not None
             else f"no activity data {window}", f"{evidence.get('coverage') or 0:.0%} seen"]
    observed, requested = evidence.get("gpus_observed", 0), evidence.get("gpus_requested", 0)
    if observed != requested:
        parts.append(f"{observed:g} of {requested:g} GPUs reporting")
    if req is not None:
        parts.append(f"{req:g} requests")
    return ", ".join(parts)


def _short_evidence(evidence: dict[str, Any]) -> str:
    """``max 0.00 ≤ 0.05 in 30m``, then only what is unusual (coverage under 100%, GPUs not reporting)."""
    act = evidence.get("activity_max")
    window = f"in {_window(evidence)}"
    parts = [f"max {act:.2f} ≤ {evidence.get('threshold')} {window}" if act is not None else f"no data {window}"]
    coverage = evidence.get("coverage") or 0
    if coverage < 1:
        parts.append(f"{coverage:.0%} seen")
    observed, requested = evidence.get("gpus_observed", 0), evidence.get("gpus_requested", 0)
    if observed != requested:
        parts.append(f"{observed:g}/{requested:g} GPUs")
    return ", ".join(parts)


def result_cell(r: ActionResult) -> str:
    """``planned: deactivate``, ``deferred: over the cap (unchanged since #7)``: the result with the stop it makes,
    or with its cause in a few words and, where this run recorded nothing, the sign that the audit id is an earlier
    run's row that still holds it."""
    if r.result in (Outcome.applied, Outcome.planned) or not (r.reason or r.cause):
        return f"{r.result}: {r.method}" if r.method else str(r.result)
    words = CAUSE_WORDS.get(r.cause) if r.cause is not None else None
    text = f"{r.result}: {words or brief(r.reason, CAUSELESS_WORDS)}"
    if r.unchanged_since is not None and r.audit_id is not None:
        text += f" (unchanged since #{r.audit_id})"
    return text


def _shortened(name: str, room: int) -> str:
    """``name`` in ``room`` characters, its middle left out (``RayCluster research/ray-hpar…sweep-0042``): the kind,
    the namespace, the start and the end stay, the end being where names of one family differ."""
    if len(name) <= room:
        return name
    head = (room - 1) * 3 // 5
    return f"{name[:head]}…{name[len(name) - (room - 1 - head):]}"


def decision_rows(results: Sequence[ActionResult]) -> list[dict[str, Any]]:
    """The people form: the table artifact, six short columns that fit a 1600-pixel screen (``ROW_BUDGET``).

    A workload named so long that its row would not fit is shortened in the middle: the whole name heads its
    bullet in the summary's evidence list (``evidence_lines``), with the tenant, the full evidence and the whole
    reason. No cell is a bare "-": the UI renders that as a bullet.
    """
    rows = [{
        "workload": r.decision.subject, "GPUs": r.decision.gpus,
        "idle": duration(r.decision.idle_seconds) if r.decision.idle_seconds else "",
        "evidence": _short_evidence(r.decision.evidence), "result": result_cell(r),
        "audit id": r.audit_id if r.audit_id is not None else "",
    } for r in results]
    room = max(ROW_BUDGET - row_width([{k: v for k, v in row.items() if k != "workload"} for row in rows]),
               WORKLOAD_MIN)
    return [{**row, "workload": _shortened(str(row["workload"]), room)} for row in rows]


def row_width(rows: Sequence[dict[str, Any]]) -> int:
    """Characters of the table's widest line as the UI lays it out: each column as wide as its widest cell or
    header (the UI sizes columns to their content and never wraps a cell)."""
    if not rows:
        return 0
    return sum(max(len(str(column)), *(len(str(row[column])) for row in rows)) for column in rows[0])


def evidence_lines(results: Sequence[ActionResult]) -> list[str]:
    """One markdown bullet per decision with everything the table leaves out. A result unchanged since an earlier
    run's row names that row in its reason (``as recorded in audit #7 at …``), so the id is not said again."""
    lines = []
    for r in results:
        tenant = f", tenant {r.decision.tenant}" if r.decision.tenant else ""
        action = f"; {r.method} (frees {r.frees})" if r.method else ""
        audit = f"; audit #{r.audit_id}" if r.audit_id is not None and r.unchanged_since is None else ""
        via = f" (its {r.decision.ref})" if r.decision.subject != r.decision.ref else ""
        lines.append(f"- **{r.decision.subject}**{via}{tenant}, {counted(r.decision.gpus, 'GPU')}: "
                     f"{_evidence_text(r.decision.evidence)}"
                     f"{action}; **{r.result}**: {r.reason or 'no reason given'}{audit}")
    return lines
