"""The incident review as people read it: one sentence first, then the fleet, the timeline, quotas, undo.

Pure builders (``gpuaas.policies.incident.review.IncidentReview`` in, text, rows and a PNG out); the flow
publishes them as the ``incident-review`` markdown artifact and a table artifact, the CLI prints
the same rows. The plot is rendered by the reports' PNG helper (matplotlib Agg, base64), so
the artifact needs no file next to it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pandas as pd

from gpuaas.models import Outcome
from gpuaas.policies.incident import ActionOutcome, IncidentEvent, IncidentReview
from gpuaas.policy import Mode
from reports._format import counted, gpus
from reports._incident_plot import figure

__all__ = ["REFUSED", "ActionTally", "action_tally", "event_rows", "fleet_rows", "incident_json", "incident_markdown", "plot_png", "quota_rows",
           "summary_line", "undo_line", "window_label"]

_LABELS = {"reclaim": ("reclaim", "reclaims"), "quota-plan": ("quota plan", "quota plans"),
           "restore": ("undo", "undos"), "deadline-hold": ("deadline hold", "deadline holds"),
           "deadline-release": ("deadline release", "deadline releases")}
_RESULT_ORDER: list[str] = [Outcome.applied, Outcome.restored, Outcome.dry_run, Outcome.skipped, Outcome.deferred, Outcome.failed,
                 Outcome.open, Outcome.unknown]
REFUSED = (Outcome.no_op, Outcome.skipped, Outcome.failed, Outcome.unknown)
"""Undo results that changed nothing (``gpuaas.actions.undo.UndoResult.result``)."""
_FLEET_ROWS_SHOWN = 24


def _utc(at: datetime) -> pd.Timestamp:
    return pd.Timestamp(at).tz_convert("UTC") if pd.Timestamp(at).tzinfo else pd.Timestamp(at).tz_localize("UTC")


def window_label(start: datetime, end: datetime) -> str:
    """``2026-12-01 02:00–03:00 UTC``; both dates when the window spans midnight."""
    a, b = _utc(start), _utc(end)
    fmt = "%H:%M:%S" if a.second or b.second else "%H:%M"
    if a.date() == b.date():
        return f"{a:%Y-%m-%d} {a.strftime(fmt)}–{b.strftime(fmt)} UTC"
    return f"{a:%Y-%m-%d} {a.strftime(fmt)} – {b:%Y-%m-%d} {b.strftime(fmt)} UTC"


def _clock(review: IncidentReview, at: datetime) -> str:
    t = _utc(at)
    return f"{t:%H:%M:%S}" if _utc(review.start).date() == _utc(review.end).date() else f"{t:%m-%d %H:%M:%S}"


def _scope_words(review: IncidentReview) -> str:
    parts = []
    if review.scope.namespaces:
        parts.append(("namespace " if len(review.scope.namespaces) == 1 else "namespaces ")
                     + ", ".join(sorted(review.scope.namespaces)))
    if review.scope.queues:
        parts.append(("queue " if len(review.scope.queues) == 1 else "queues ") + ", ".join(sorted(review.scope.queues)))
    return f" ({'; '.join(parts)})" if parts else ""


@dataclass(frozen=True)
class ActionTally:
    """The actions of one kind and mode that began in the window, counted by how each ended."""

    action: str
    mode: str
    parts: tuple[tuple[str, int], ...]
    """(result, count), in ``_RESULT_ORDER``: each action in exactly one part."""

    @property
    def total(self) -> int:
        return sum(n for _, n in self.parts)


def action_tally(actions: Sequence[ActionOutcome]) -> list[ActionTally]:
    """The actions by kind (in the order they first appear), then mode (apply first), then result: a partition,
    so that a headline built on it never counts one action twice (a deferred dry-run is deferred, not also
    dry-run)."""
    groups: dict[tuple[str, str], dict[str, int]] = {}
    for o in actions:
        counts = groups.setdefault((o.action, str(o.mode)), {})
        counts[str(o.result)] = counts.get(str(o.result), 0) + 1
    kinds = list(dict.fromkeys(o.action for o in actions))
    ordered = sorted(groups.items(), key=lambda kv: (kinds.index(kv[0][0]), kv[0][1] == Mode.dry_run, kv[0][1]))
    return [ActionTally(action, mode, tuple(sorted(counts.items(), key=lambda kv: _rank(kv[0]))))
            for (action, mode), counts in ordered]


def _rank(result: str) -> int:
    return _RESULT_ORDER.index(result) if result in _RESULT_ORDER else len(_RESULT_ORDER)


def _said(result: str) -> str:
    """A result as a count reads it: a dry-run decision that nothing closed was planned (its row's word)."""
    return Outcome.planned if result == Outcome.dry_run else result


_DONE = frozenset({Outcome.applied, Outcome.restored, Outcome.released})
"""Results that changed the cluster: an apply-mode count leads with them."""


def _count_words(review: IncidentReview) -> str:
    """``16 reclaim decisions, all dry-run (15 planned, 1 deferred)``, ``3 reclaims applied, 2 skipped``: each
    action that began in the window counted once, under its mode and its result (``action_tally``). A dry-run
    changed nothing, so its rows are decisions, never "reclaims"; its planned ones are not also counted as
    dry-run beside its deferred ones."""
    phrases = []
    tallies = action_tally(review.actions)
    for t in tallies:
        one, many = _LABELS.get(t.action, (t.action, f"{t.action}s"))
        parts = ", ".join(f"{n} {_said(result)}" for result, n in t.parts)
        if t.mode == Mode.dry_run:
            alone = sum(1 for other in tallies if other.action == t.action) == 1
            decisions = counted(t.total, f"{one} decision")
            phrases.append(f"{decisions}, all dry-run ({parts})" if alone
                           else f"{counted(t.total, f'dry-run {one} decision')} ({parts})")
        elif t.parts[0][0] in _DONE:  # what was done first: "3 reclaims applied, 2 skipped"
            (result, n), rest = t.parts[0], t.parts[1:]
            phrases.append(f"{counted(n, one, many)} {result}" + "".join(f", {c} {r}" for r, c in rest))
        else:  # nothing done: not "2 reclaims skipped", which reads as two reclaims
            phrases.append(f"{counted(t.total, f'{one} decision')} in apply mode ({parts})")
    return ", ".join(phrases) or "no gpuaas decisions or actions"


def _peak(series: pd.Series, at: pd.Series) -> tuple[float, datetime] | None:
    known = series.dropna()
    if known.empty:
        return None
    index = known.idxmax()
    return float(known[index]), at[index]


def undo_line(undo: Sequence[Mapping[str, Any]] | None, busy: str | None = None) -> str:
    if busy:
        return f"nothing undone ({busy})"
    if not undo:
        return ""
    done = sum(1 for u in undo if u["result"] == Outcome.restored)
    refused = len(undo) - done
    return f"undo: {done} restored, {refused} refused"


def summary_line(review: IncidentReview, undo: Sequence[Mapping[str, Any]] | None = None,
                 undo_busy: str | None = None) -> str:
    """The one sentence that says what happened in the window (and what this run undid)."""
    text = f"{window_label(review.start, review.end)}{_scope_words(review)}: {_count_words(review)}"
    fleet = review.fleet
    if fleet.empty:
        text += "; no stored fleet history in the window"
    else:
        backlog = _peak(fleet["pending_workloads"], fleet["at"])
        idle = _peak(fleet["idle_gpus"], fleet["at"])
        if backlog is not None and backlog[0] > 0:
            text += (f"; backlog peaked at {backlog[0]:g} workload{'' if backlog[0] == 1 else 's'} "
                     f"({_clock(review, backlog[1])[:-3]})")
        elif backlog is not None:
            text += "; no backlog"
        text += f", idle GPUs at most {idle[0]:g}" if idle is not None else ", idle GPUs unknown"
        text += f" over {len(fleet)} collect{'' if len(fleet) == 1 else 's'}"
    extra = undo_line(undo, undo_busy)
    return text + (f"; {extra}" if extra else "") + "."


# -- rows ----------------------------------------------------------------------------------------

def _then(review: IncidentReview, at: datetime) -> str:
    """The fleet at the latest collect at or before ``at`` (the state the decision was made in)."""
    fleet = review.fleet
    if fleet.empty:
        return ""
    index = int(fleet["at"].searchsorted(_utc(at), side="right")) - 1
    if index < 0:
        return ""
    row = fleet.iloc[index]
    idle = "" if math.isnan(row["idle_gpus"]) else f", {gpus(row['idle_gpus'])} idle GPUs"
    n = row["pending_workloads"]
    return f"backlog {gpus(n)} workload{'' if n == 1 else 's'}{idle} at {_clock(review, row['at'])}"


def _what(e: IncidentEvent) -> str:
    return e.action + (f" (of #{e.refers_to})" if e.refers_to is not None else "")


def event_rows(review: IncidentReview) -> list[dict[str, Any]]:
    """One row per audit row in the window, oldest first (the timeline table artifact): short cells only.

    The Prefect UI never wraps a table cell, so a reason or an evidence sentence in one widened the table
    past a 1600-pixel screen and hid the columns after it, ``undoable`` among them; both are on each
    row's line of the review's markdown, where the words wrap.
    """
    return [{"time (UTC)": _clock(review, e.at), "audit id": e.audit_id, "flow": e.flow, "action": _what(e),
             "object": e.subject, "mode": e.mode, "outcome": e.outcome, "undoable": "yes" if e.undoable else "no"}
            for e in review.events]


def _known(value: float) -> str:
    text = gpus(value)
    return Outcome.unknown if text == "-" else text


def fleet_rows(review: IncidentReview, limit: int | None = _FLEET_ROWS_SHOWN) -> list[dict[str, Any]]:
    """The collects at which the backlog, idle GPUs or quota changed (and the first and last).

    Shortened to about ``limit`` rows, it never drops silently: the first and last collects, the
    peak of each column and the collect before and after every applied action stay, and each gap
    is a row saying how many collects it left out.
    """
    fleet = review.fleet
    cols = ["pending_workloads", "pending_gpus", "idle_gpus", "nominal_gpus"]
    rows: list[dict[str, Any]] = []
    at: list[pd.Timestamp] = []
    previous: tuple[Any, ...] | None = None
    for i, r in fleet.iterrows():
        key = tuple(None if math.isnan(r[c]) else r[c] for c in cols)
        if key != previous or i == len(fleet) - 1:
            rows.append({"time (UTC)": _clock(review, r["at"]), "backlog": _known(r["pending_workloads"]),
                         "pending GPUs": _known(r["pending_gpus"]), "idle GPUs": _known(r["idle_gpus"]),
                         "unobserved GPUs": _known(r["unknown_gpus"]), "nominal GPUs": _known(r["nominal_gpus"])})
            at.append(r["at"])
        previous = key
    if limit is None or len(rows) <= limit:
        return rows
    return _shortened(review, rows, at, limit)


def _shortened(review: IncidentReview, rows: list[dict[str, Any]], at: list[pd.Timestamp],
               limit: int) -> list[dict[str, Any]]:
    keep = {0, len(rows) - 1}
    for column in ("backlog", "pending GPUs", "idle GPUs"):
        values = [float(r[column]) if r[column] != Outcome.unknown else -math.inf for r in rows]
        if max(values) > -math.inf:
            keep.add(values.index(max(values)))
    for e in review.events:
        if e.outcome == Outcome.applied:
            when = _utc(e.at)
            before = max((i for i, t in enumerate(at) if t <= when), default=0)
            keep.update({before, min(before + 1, len(rows) - 1)})
    spare = max(limit - len(keep), 0)
    keep.update(range(min(spare // 2, len(rows))))
    keep.update(range(max(len(rows) - (spare - spare // 2), 0), len(rows)))
    out: list[dict[str, Any]] = []
    last = -1
    for i in sorted(keep):
        if i - last > 1:
            out.append({k: "" for k in rows[0]} | {"time (UTC)": f"({i - last - 1} collects left out)"})
        out.append(rows[i])
        last = i
    return out


def quota_rows(review: IncidentReview, changed_only: bool = True) -> list[dict[str, Any]]:
    out = []
    for line in review.quotas:
        if changed_only and not line.changes:
            continue
        moves = "; ".join(f"{_clock(review, c.at)} {gpus(c.before)} -> {gpus(c.after)}" for c in line.changes)
        out.append({"queue": line.queue, "flavor": line.flavor or "(none)", "at start": gpus(line.first),
                    "changes": moves or "none", "at end": gpus(line.last)})
    return out


# -- the plot --------------------------------------------------------------------------------------

def plot_png(review: IncidentReview) -> str | None:
    """Backlog (workloads) and GPUs over the window as base64 PNG, on their own axes; the part of the window before
    the first stored collect shaded; the window's decisions marked (``reports._incident_plot``). None without
    history."""
    same_day = _utc(review.start).date() == _utc(review.end).date()
    fig = figure(review, "%H:%M" if same_day else "%m-%d %H:%M")
    if fig is None:
        return None
    from reports._plots import png_base64

    fig.axes[0].set_title(f"Backlog and GPUs, {window_label(review.start, review.end)}")
    return png_base64(fig)


# -- markdown and JSON -----------------------------------------------------------------------------

def _table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    if not rows:
        return []
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lines.append("| " + " | ".join(str(r[c]).replace("|", "\\|") for c in head) + " |")
    return lines


def _event_line(review: IncidentReview, e: IncidentEvent) -> str:
    text = f"- **{_clock(review, e.at)}** `#{e.audit_id}` {_what(e)} {e.subject} — {e.mode}, **{e.outcome}**"
    if e.reason:
        text += f": {e.reason}"
    starts = e.audit_id in {o.audit_id for o in review.actions}  # its completions and steps repeat it
    if e.evidence and e.evidence not in e.reason and (starts or e.refers_to is None):
        text += f" · evidence: {e.evidence}"
    then = _then(review, e.at) if starts or e.refers_to is None else ""
    if then:
        text += f" · fleet then: {then}"
    if e.undoable:
        text += f" · undoable (`undo: [{e.audit_id}]`)"
    return text


def _undo_lines(undo: Sequence[Mapping[str, Any]] | None, busy: str | None) -> list[str]:
    if busy:
        return ["## Undo", "", f"Nothing was undone: {busy}.", ""]
    if not undo:
        return []
    lines = ["## Undo", ""]
    for u in undo:
        what = u.get("subject") or ""
        if u["result"] == Outcome.restored:
            lines.append(f"- undone: `#{u['audit_id']}` {what}: {u['message']}"
                         + (f" (audit #{u['restore_audit_id']})" if u.get("restore_audit_id") else ""))
        else:
            lines.append(f"- refused: `#{u['audit_id']}` {what}".rstrip() + f" ({u['result']}): {u['message']}")
    return lines + [""]


QUOTA_SEEN = ("As the collects saw it: a change shows at the first collect after it (gpuaas's own quota plans are "
              "in the timeline above at the time they were applied).")
"""Why the quota table's times are the collects', not the changes': said under its title."""


def incident_markdown(review: IncidentReview, plot: str | None = None,
                      undo: Sequence[Mapping[str, Any]] | None = None, undo_busy: str | None = None) -> str:
    """The timeline a person reads top to bottom; ``plot`` is ``plot_png``'s base64 (left out when None)."""
    lines = [f"**{summary_line(review, undo, undo_busy)}**", ""]
    lines += _undo_lines(undo, undo_busy)
    lines += ["## Fleet over the window", ""]
    if plot:
        lines += [f"![backlog and idle GPUs](data:image/png;base64,{plot})", ""]
    elif not review.fleet.empty:
        lines += ["(The plot of backlog and idle GPUs is in the flow run's `incident-review` artifact.)", ""]
    rows = fleet_rows(review)
    if rows:
        left_out = sum(1 for r in rows if str(r["time (UTC)"]).startswith("("))
        lines += ["Collects at which something changed (backlog in workloads; GPUs summed over queues and flavors)"
                  + (f"; shortened: the peaks, the first and last, and the collects around every applied action are "
                     f"kept, {left_out} gap{'' if left_out == 1 else 's'} say{'s' if left_out == 1 else ''} how many "
                     "collects were left out (all of them: `--format json`)" if left_out else "") + ":",
                  ""] + _table(rows)
    else:
        lines.append("No stored fleet history in the window.")
    lines.append("")
    lines += [f"- {n}" for n in review.notes] + ([""] if review.notes else [])
    steps = len(review.events) - len(review.actions)
    lines += ["## What gpuaas decided and did, oldest first", ""]
    if review.events:
        lines += [f"{len(review.events)} audit row{'' if len(review.events) == 1 else 's'}: {len(review.actions)} "
                  f"decision{'' if len(review.actions) == 1 else 's'} or action{'' if len(review.actions) == 1 else 's'}"
                  f" begun in the window, {steps} step{'' if steps == 1 else 's'} or completion"
                  f"{'' if steps == 1 else 's'}. `undo: [id]` reverses an undoable one.", ""]
    lines += [_event_line(review, e) for e in review.events] or ["No audit rows in the window for this scope."]
    lines += ["", "## Quota per queue (nominal GPUs)", ""]
    changed = quota_rows(review)
    if changed:
        lines += [QUOTA_SEEN, ""]
    lines += _table(changed) or ["No nominal quota changed in the window."]
    unchanged = len(review.quotas) - len(changed)
    if changed and unchanged:
        lines += ["", f"{unchanged} other queue and flavor cell{'' if unchanged == 1 else 's'} unchanged."]
    return "\n".join(lines) + "\n"


def incident_json(review: IncidentReview, undo: Sequence[Mapping[str, Any]] | None = None,
                  undo_busy: str | None = None) -> dict[str, Any]:
    """The whole review as plain JSON (``--format json``, the flow's return value)."""
    fleet = review.fleet.astype(object).where(review.fleet.notna(), None)
    return {
        "summary": summary_line(review, undo, undo_busy),
        "start": _utc(review.start).isoformat(), "end": _utc(review.end).isoformat(),
        "namespaces": sorted(review.scope.namespaces), "queues": sorted(review.scope.queues),
        "fleet": [{**r, "at": _utc(r["at"]).isoformat()} for r in fleet.to_dict(orient="records")],
        "fleet_changes": fleet_rows(review, limit=None),
        "quota": [{"queue": q.queue, "flavor": q.flavor, "at_start": q.first, "at_end": q.last,
                   "changes": [{"at": _utc(c.at).isoformat(), "before": c.before, "after": c.after}
                               for c in q.changes]} for q in review.quotas],
        "events": [{"at": _utc(e.at).isoformat(), "audit_id": e.audit_id, "flow": e.flow, "flow_run_id": e.flow_run_id,
                    "action": e.action, "kind": e.kind, "namespace": e.namespace, "name": e.name,
                    "object": e.object_ref, "subject": e.subject, "mode": e.mode, "outcome": e.outcome,
                    "reason": e.reason, "evidence": e.evidence, "refers_to": e.refers_to, "undoable": e.undoable}
                   for e in review.events],
        "actions": [{"audit_id": o.audit_id, "action": o.action, "object": o.object_ref, "subject": o.subject,
                     "mode": o.mode, "result": o.result} for o in review.actions],
        "notes": list(review.notes),
        "undo": [dict(u) for u in undo or []],
        "writes_busy": undo_busy,
    }
