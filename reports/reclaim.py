"""Rows, markdown and metrics for the reclaim flow's artifacts, the CLI and the Pushgateway. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pandas as pd

from gpuaas.actions import ActionResult, Settled, UndoResult
from gpuaas.models import Outcome, Snapshot
from gpuaas.permissions import ROLES, bind_command
from gpuaas.phrases import listed
from gpuaas.policies.reclaim import SkipCause, blind_run_line
from gpuaas.policy import HELD_BACK, FreezeOn
from gpuaas.pushgateway import MetricFamily
from reports._format import (
    brief,
    busy_line,
    counted,
    frozen_lead,
    kube_unread,
    said_frozen,
    source_errors,
    with_failures,
)
from reports._reclaim_rows import (
    decision_dicts,
    decision_rows,
    evidence_lines,
)

__all__ = ["ASSUMED_GPU_HOURLY_PRICE", "SUCCESS_METRIC", "blind_line", "decision_dicts", "decision_rows", "evidence_lines", "gpu_price",
           "headline", "idle_metrics", "settled_line", "summary_line", "summary_markdown", "telemetry_counts", "undo_headline", "undo_line",
           "undo_markdown"]

ASSUMED_GPU_HOURLY_PRICE = 3.0
"""$ per GPU-hour used only when OpenCost has no figure for the fleet at all (the report says so)."""


_OWNER_COLUMNS = (("controller_kind", "controller"), ("owner_kind", "owner_name"), ("root_kind", "root_name"))
"""Where a cost row names an object: OpenCost's controller, and the pod's owner and root owner in the cluster."""


def gpu_price(snapshot: Snapshot, kind: str, namespace: str, name: str) -> tuple[float, str]:
    """$ per GPU-hour for this object and where the figure comes from: its pods' OpenCost rows, found by
    OpenCost's controller or by the pod's owner or root owner (an InferenceService's pods are a Deployment's
    to OpenCost); the fleet's average when none of its pods has a row. Rows whose GPU cost or hours OpenCost
    left null price nothing (that would read as $0 an hour)."""
    costs = snapshot.costs
    if not costs.empty and {"gpu_cost", "gpu_hours"} <= set(costs.columns):
        mine = pd.Series(False, index=costs.index)
        for kind_col, name_col in _OWNER_COLUMNS:
            if {kind_col, name_col} <= set(costs.columns):
                mine |= (costs[name_col] == name) & (costs[kind_col].astype(str).str.lower() == kind.lower())
        priced = costs["gpu_cost"].notna() & costs["gpu_hours"].notna()  # a cost OpenCost left null is not $0
        rows = costs[(costs["namespace"] == namespace) & mine & priced]
        for scope, frame in (("OpenCost, this workload", rows), ("OpenCost, fleet average", costs[priced])):
            hours = float(frame["gpu_hours"].sum())
            if hours > 0:
                return float(frame["gpu_cost"].sum()) / hours, scope
    return ASSUMED_GPU_HOURLY_PRICE, f"assumed ${ASSUMED_GPU_HOURLY_PRICE:g}/GPU-hour (no OpenCost data)"


def _price_sources(sources: list[str]) -> str:
    """``OpenCost (this workload for 2, fleet average for 1)``: each source once, with its count."""
    counts: dict[str, int] = {}
    for source in sources:
        counts[source] = counts.get(source, 0) + 1
    opencost = {k.removeprefix("OpenCost, "): v for k, v in counts.items() if k.startswith("OpenCost, ")}
    parts = [f"OpenCost ({', '.join(f'{k} for {v}' for k, v in sorted(opencost.items()))})"] if opencost else []
    parts += [k for k in sorted(counts) if not k.startswith("OpenCost, ")]
    return "; ".join(parts)


def telemetry_counts(snapshot: Snapshot) -> tuple[int, int]:
    """GPU-holding workloads whose telemetry was incomplete, and all GPU-holding workloads."""
    if "telemetry" not in snapshot.workloads:
        return 0, 0
    telemetry = snapshot.workloads["telemetry"]
    return int((telemetry == "unknown").sum()), int(telemetry.isin(["complete", "unknown"]).sum())


def blind_line(results: Sequence[ActionResult], snapshot: Snapshot) -> str | None:
    """``telemetry incomplete for 19 of 19 GPU workloads — nothing judged idle`` on a degraded run, else None."""
    unknown, total = telemetry_counts(snapshot)
    return blind_run_line(unknown, total, len(results))


def summary_line(results: Sequence[ActionResult], snapshot: Snapshot) -> str:
    """One line for the CLI and logs: the blind-run warning first when there is one."""
    blind = blind_line(results, snapshot)
    if blind:
        return blind
    counts = pd.Series([r.result for r in results], dtype=object).value_counts().to_dict()
    return f"{len(results)} idle targets: " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none")


def _hourly_cost(acted: Sequence[ActionResult], snapshot: Snapshot) -> tuple[float, list[str]]:
    cost, sources = 0.0, []
    for r in acted:
        price, source = gpu_price(snapshot, r.decision.stops[0], r.decision.namespace, r.decision.stops[1])
        cost += price * r.decision.gpus
        sources.append(source)
    return cost, sources


def _nothing_idle(holding: int) -> str:
    """The headline of a run with nothing to decide, saying how many workloads it judged: a bare number
    ("among 23") leaves the reader guessing what was counted, and none at all is a different answer."""
    if not holding:
        return "Nothing to reclaim: no workload holds a GPU."
    if holding == 1:
        return "Nothing to reclaim: the one GPU workload is not idle."
    return f"Nothing to reclaim: none of the {holding:,} GPU workloads is idle."


def headline(results: Sequence[ActionResult], snapshot: Snapshot, mode: str, busy: str | None = None,
             frozen: FreezeOn | None = None, settled: Sequence[Settled] = ()) -> str:
    """The run in one sentence, with numbers and the next step: the CLI's first line, the flow run's state
    message and the summary artifact's first line, so all three say the same. A failed source comes first;
    a change freeze that held the run back to dry-run (``frozen``) comes next, in place of the hint to apply;
    the writes of an interrupted run that this run's recovery closed (``settled``) come last."""
    if busy:
        return f"{busy_line(busy)}; the next run decides again."
    opted_out = _opted_out(results)  # told apart: never a target, so not counted as one
    results = [r for r in results if not _is_opted_out(r)]
    acted = [r for r in results if r.result in (Outcome.applied, Outcome.planned)]
    gpus = sum(r.decision.gpus for r in acted)
    cost, _ = _hourly_cost(acted, snapshot)
    blind = blind_line(results, snapshot)
    applied = [str(r.audit_id) for r in results if r.result == Outcome.applied and r.audit_id]
    if not results and kube_unread(snapshot.sources):
        first = said_frozen("Nothing decided: no workload could be read.", frozen)
    elif not results:
        first = f"Nothing to reclaim (degraded): {blind}." if blind else (
            "Nothing to reclaim:" if opted_out else _nothing_idle(telemetry_counts(snapshot)[1]))
        first = said_frozen(first, frozen)
    elif mode != "apply" and not acted:  # every target skipped (decided before, held back, …): nothing to apply
        first = (f"{frozen_lead(frozen)}no idle workload would be stopped "
                 f"({counted(len(results), 'target')} skipped: see {'its' if len(results) == 1 else 'their'} "
                 "reason); nothing was changed.")
    elif mode == "apply" and not applied and _failures(results):  # nothing stopped: the failures are the news
        first = f"No idle workload stopped{_failures(results)}."
    elif mode == "apply":
        first = (f"Stopped {counted(len(applied), 'idle workload')}, freeing {counted(gpus, 'GPU')} "
                 f"(${cost:,.2f} per hour)" + _failures(results)
                 + (f"; to reverse: gpuaas undo {' '.join(applied)}." if applied else "."))
    else:
        first = (f"{frozen_lead(frozen)}{counted(gpus, 'GPU')} would be freed by stopping "
                 f"{counted(len(acted), 'idle workload')} (${cost:,.2f} per hour); nothing was changed"
                 + ("." if frozen else "; to act: gpuaas reclaim --apply."))
    if blind and results:
        first = f"Degraded run: {blind}. {first}"
    said = f" {_opted_out_phrase(opted_out)}." if opted_out and not results else ""  # alone, they are the news
    return with_failures(first + _held_back(results) + said + settled_line(settled), source_errors(snapshot.sources))


def settled_line(settled: Sequence[Settled]) -> str:
    """`` An interrupted run had left 2 writes open, settled now from the objects: 1 stop had landed (to reverse:
    gpuaas undo 4); 1 had not.``: what a killed run did to the cluster, which this run's own counts leave out
    and which the operator would otherwise find only in the audit log. Empty when there was nothing to settle."""
    if not settled:
        return ""
    stops = [s for s in settled if s.action == "reclaim"]
    landed = [str(s.intent_id) for s in stops if s.outcome == Outcome.applied]
    undos = [s for s in settled if s.action != "reclaim"]
    restored = [s.target for s in undos if s.outcome == Outcome.restored]
    unrestored = [s.target for s in undos if s.outcome != Outcome.restored]
    parts = []
    if landed:
        parts.append(f"{counted(len(landed), 'stop')} had landed (to reverse: gpuaas undo {' '.join(landed)})")
    if len(stops) > len(landed):
        parts.append(f"{counted(len(stops) - len(landed), 'stop')} had not" if landed
                     else f"{counted(len(stops), 'stop')} had not landed")
    if restored:
        parts.append(f"the undo of {listed(restored)} had restored {'it' if len(restored) == 1 else 'them'}")
    if unrestored:
        parts.append(f"the undo of {listed(unrestored)} had not (see gpuaas audit list)")
    return (f" An interrupted run had left {counted(len(settled), 'write')} open, settled now from the objects: "
            + "; ".join(parts) + ".")


def _failures(results: Sequence[ActionResult]) -> str:
    """``; 4 failed: 403 Forbidden …, bind gpuaas-reclaimer (kubectl apply -f …)``: writes the cluster refused,
    the first one's reason, and the role to bind where it refused a permission; then the stops whose answer was
    lost and could not be read back (``unknown``): not counted as stopped, yet they may be, so the headline
    says so rather than read "Stopped 0" as nothing done."""
    failed = [r for r in results if r.result == Outcome.failed]
    unknown = sum(r.result == Outcome.unknown for r in results)
    said = ""
    if failed:
        why = brief(failed[0].reason)
        hint = f", {bind_command(ROLES['reclaim'])}" if any("403" in r.reason for r in failed) else ""
        said = f"; {len(failed)} failed: {why}{hint}"
    if unknown:
        said += (f"; {unknown} unknown (the stop's answer was lost and the read-back failed: "
                 f"it may have landed; the next run settles {'it' if unknown == 1 else 'them'} from the object)")
    return said


def _is_opted_out(r: ActionResult) -> bool:
    return r.result == Outcome.skipped and r.cause is SkipCause.opted_out


def _opted_out(results: Sequence[ActionResult]) -> list[ActionResult]:
    return [r for r in results if _is_opted_out(r)]


def _opted_out_phrase(opted_out: Sequence[ActionResult]) -> str:
    """``2 idle workloads opted out (gpuaas.io/reclaim: "never")``: idle, and kept by their teams' choice, which the
    headline says when they are all there is, so that "nothing to reclaim" is not read as "nothing idle" (beside
    targets they are rows of the table, not news)."""
    return f'{counted(len(opted_out), "idle workload")} opted out (gpuaas.io/reclaim: "never")'


def _held_back(results: Sequence[ActionResult]) -> str:
    """`` 3 more held back by the change freeze launch of tenant team-a until …``: idle workloads a tenant's change
    freeze kept out of this run, so that the headline's count is not read as the whole fleet's."""
    held = [r.decision.reason.removeprefix(HELD_BACK) for r in results
            if r.result == Outcome.skipped and r.cause is SkipCause.change_freeze]
    if not held:
        return ""
    freezes = sorted(set(held))
    by = f"the {freezes[0]}" if len(freezes) == 1 else f"{len(freezes)} change freezes of their tenants"
    return f" {counted(len(held), 'idle workload')} held back by {by}."


_UNDONE_NOUNS = {"reclaim": ("reclaim", "reclaims"), "quota-plan": ("quota plan", "quota plans"),
                 "deadline-hold": ("deadline hold", "deadline holds"),
                 "deadline-demote": ("deadline demotion", "deadline demotions")}
"""What ``gpuaas undo`` restored, by the audit ``action`` it reversed, as its headline counts it."""


def undo_headline(restores: Sequence[UndoResult]) -> str:
    """``Restored 1 of 2 quota plans (audit 23). #24 skipped: vision-cq: h100 quota is 30, …``: counted by what was
    asked for (reclaims, quota plans, deadline holds or demotions; "changes" for a mix, or an id that names nothing
    undoable), so that an operator who undid a quota plan is not told about reclaims. One id not done is named with
    its result and why; several point at their rows, which follow."""
    nouns = {_UNDONE_NOUNS.get(r.action or "", ("change", "changes")) for r in restores}
    noun, plural = nouns.pop() if len(nouns) == 1 else ("change", "changes")
    done = [r for r in restores if r.result == Outcome.restored]
    idle = sum(r.result == Outcome.no_op for r in restores)
    rest = len(restores) - len(done) - idle
    said = []
    if idle:
        said.append(f"{idle} had nothing to undo (nothing of it is in place: a dry-run, or undone or rolled back "
                    "before)")
    if rest == 1:
        [r] = [r for r in restores if r.result not in (Outcome.restored, Outcome.no_op)]
        said.append(f"#{r.audit_id} {r.result}: {brief(r.message)}")
    elif rest:
        said.append(f"the other {rest}: see each row's result")
    tail = "; ".join(said)
    return (f"Restored {len(done)} of {counted(len(restores), noun, plural)}"
            + (f" (audit {', '.join(str(r.audit_id) for r in done)})." if done else ".")
            + (f" {tail[0].upper()}{tail[1:]}." if tail else ""))


def _undone_parts(r: UndoResult) -> tuple[str, str]:
    """(`` Deployment team-a/dep``, ``restored: restored (resourceVersion 56); restore audit #12``): the object (none
    for an id that names nothing undoable) and what became of it."""
    restore = f"; restore audit #{r.restore_audit_id}" if r.restore_audit_id else ""
    return (f" {r.subject}" if r.subject else ""), f"{r.result}: {r.message}{restore}"


def undo_line(r: UndoResult) -> str:
    """What became of one audit id asked for, as the run logs it: ``#3 Deployment team-a/dep: restored: …``."""
    who, what = _undone_parts(r)
    return f"#{r.audit_id}{who}: {what}"


def undo_markdown(restores: Sequence[UndoResult]) -> str:
    """First line: the undo's headline; then one bullet per audit id asked for, the rows its headline points at.

    A list, not a table: a refusal names the field and its current value, a sentence that a table cell would
    not wrap. The id is code, so that it never reads as a heading."""
    bullets = [f"- `#{r.audit_id}`{who}: {what}" for r in restores for who, what in [_undone_parts(r)]]
    return f"{undo_headline(restores)}\n\n# gpuaas undo\n\n" + "\n".join(bullets) + "\n"


def summary_markdown(results: Sequence[ActionResult], snapshot: Snapshot, mode: str, cap: int,
                     busy: str | None = None, frozen: FreezeOn | None = None, settled: Sequence[Settled] = ()) -> str:
    """First line: the run's headline. ``busy``: another run held the cluster writes; ``frozen``: a change
    freeze held it back to dry-run; ``settled``: an interrupted run's writes this run's recovery closed."""
    title = f"# gpuaas reclaim ({mode})"
    if busy:
        return f"{headline(results, snapshot, mode, busy)}\n\n{title}\n"
    acted = [r for r in results if r.result in (Outcome.applied, Outcome.planned)]
    gpus = sum(r.decision.gpus for r in acted)
    idle_hours = sum(r.decision.gpus * r.decision.idle_seconds / 3600 for r in acted)
    _, sources = _hourly_cost(acted, snapshot)
    counts = pd.Series([r.result for r in results], dtype=object).value_counts().to_dict()
    quota = sum(r.decision.gpus for r in acted if r.frees == "quota")
    lines = [headline(results, snapshot, mode, frozen=frozen, settled=settled), "", title, ""]
    if acted:
        lines += [
            f"- **{gpus:g}** GPUs: **{quota:g}** with their quota returned to the queue, "
            f"**{gpus - quota:g}** compute only (the reservation is kept)",
            f"- **{idle_hours:.1f}** GPU-hours had already been held idle by them",
            f"- price per GPU-hour: {_price_sources(sources)}",
        ]
    lines.append(f"- results: {', '.join(f'{k} {v}' for k, v in sorted(counts.items())) or 'none'}"
                 f" (cap {cap} actions per run)")
    if snapshot.degraded:
        lines.append("- **Warning:** degraded snapshot: no action was taken on its missing parts")
    if results:
        lines += ["", "## Evidence per decision", "", *evidence_lines(results)]
    return "\n".join(lines) + "\n"


SUCCESS_METRIC = "gpuaas_last_success_timestamp_seconds"


def idle_metrics(idle: pd.DataFrame, *, mode: str = "dry-run", evidence_at: datetime | None = None) -> list[MetricFamily]:
    """Per GPU-holding object (the Workload's owner, named as ``kubectl`` names it): idle 1/0 and
    idle seconds, for Grafana and a KEDA ScaledObject; and when the evidence was taken.

    Only where the signal may act: objects whose rule says ``actuator: keda`` always, the others in
    apply mode only (a dry-run must change nothing, and KEDA acts on whatever is published).
    ``gpuaas_last_success_timestamp_seconds`` is the instant of the snapshot the verdicts come from:
    consumers ignore verdicts older than they tolerate (the shipped ScaledObject: 30 minutes).
    """
    labels = ("namespace", "kind", "name", "tenant")
    flag = MetricFamily("gpuaas_workload_idle", "1 when every GPU of the workload was idle for the whole window",
                        labels)
    seconds = MetricFamily("gpuaas_workload_idle_seconds", "How long the workload has been idle (0 when not idle)",
                           labels)
    success = MetricFamily(SUCCESS_METRIC, "Unix time of the snapshot behind the idle verdicts of the last good run")
    families = [flag, seconds] + ([success.add(evidence_at.timestamp())] if evidence_at is not None else [])
    if not idle.empty and mode != "apply":
        idle = idle[idle.get("actuator", pd.Series("gpuaas", index=idle.index)) == "keda"]
    if idle.empty:
        return families
    frame = idle.assign(
        target=idle["owner_name"].where(idle["owner_name"].notna(), idle["name"]),
        is_idle=(idle["verdict"] == "idle").astype(float),
        idle_s=idle["idle_seconds"].where(idle["verdict"] == "idle", 0.0).astype(float),
        tenant=idle["tenant"].astype(object).where(idle["tenant"].notna(), ""))
    # One series per object gpuaas would stop (a Deployment has one Workload per pod): idle only if all are.
    grouped = frame.groupby(["namespace", "kind", "target", "tenant"], sort=True).agg(
        is_idle=("is_idle", "min"), idle_s=("idle_s", "min"))
    row: Any
    for row in grouped.reset_index().itertuples(index=False):
        values = (str(row.namespace), str(row.kind), str(row.target), str(row.tenant))
        flag.add(float(row.is_idle), *values)
        seconds.add(float(row.idle_s) if row.is_idle else 0.0, *values)
    return families
