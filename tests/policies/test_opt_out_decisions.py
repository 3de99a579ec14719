"""An idle workload kept out of reclaim by its opt-out is a skipped decision, cause ``opted-out``: the reclaim table
and the audit log say why gpuaas never stops it, where they said nothing before.

Only one idle by every other test: busy, blind or served it is no candidate, so there is nothing to explain. Built
through ``build_snapshot`` -> ``find_idle`` -> ``plan_reclaim`` on the fleet of ``test_opt_out``; no I/O.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from gpuaas.actions import ActionResult
from gpuaas.models import Outcome, SourceStatus
from gpuaas.policies.reclaim import Decision, SkipCause, finalize_decisions, find_idle, plan_reclaim
from gpuaas.policy import Mode, Policy
from gpuaas.snapshot import build_snapshot
from reports.reclaim import headline
from tests.policies.test_opt_out import NOW, _fleet


def _decisions(opt_out: dict[str, str] | None = None, *, busy: bool = False, blind: bool = False) -> list[Decision]:
    _, prom, kube = _fleet(**(opt_out or {}))
    if busy:
        prom.gpus["activity_max"] = 0.9
    if blind:
        prom = replace(prom, gpus=prom.gpus.iloc[:-1])  # one GPU of two reports nothing
    sources = {"kube": SourceStatus("kube", True, 0.1, 0.0), "prometheus": SourceStatus("prometheus", True, 0.1, 5.0)}
    snap = build_snapshot(NOW, [30], sources, kube=kube, prom=prom, policy=Policy())
    return plan_reclaim(snap, find_idle(snap.workloads, Policy(), NOW), Policy(), Mode.dry_run)


@pytest.mark.parametrize("where", ["on_workload", "on_owner", "on_controller"])
def test_an_idle_opted_out_deployment_is_one_skipped_decision_naming_the_annotation(where: str) -> None:
    [d] = _decisions({where: "never"})
    assert (d.kind, d.namespace, d.name, d.outcome, d.cause) == (
        "Deployment", "team-a", "llm", Outcome.skipped, SkipCause.opted_out)
    assert 'gpuaas.io/reclaim: "never"' in d.reason
    assert (d.gpus, d.idle_seconds) == (2.0, 1800.0)  # how long it has sat idle: the window it was quiet over


def test_it_takes_no_place_under_the_cap() -> None:
    [d] = _decisions({"on_workload": "never"})
    [after] = finalize_decisions([d], {}, cap=0)
    assert after.outcome == Outcome.skipped and after.cause == SkipCause.opted_out


@pytest.mark.parametrize("state", ["busy", "blind"])
def test_no_decision_for_one_that_is_not_idle_anyway(state: str) -> None:
    assert _decisions({"on_owner": "never"}, busy=state == "busy", blind=state == "blind") == []
    [d] = _decisions()  # and without the opt-out, idle: planned
    assert d.outcome == Outcome.planned


def _results(decisions: list[Decision]) -> list[ActionResult]:
    return [ActionResult(d, d.outcome, d.reason, None, cause=d.cause) for d in decisions]


@pytest.mark.parametrize("mode", ["apply", "dry-run"])
def test_the_headline_says_it_apart_from_the_targets(mode: str) -> None:
    """Not "stopped 0 idle workloads", nor "the one GPU workload is not idle": it is idle, and opted out."""
    _, prom, kube = _fleet(on_owner="never")
    sources = {"kube": SourceStatus("kube", True, 0.1, 0.0), "prometheus": SourceStatus("prometheus", True, 0.1, 5.0)}
    snap = build_snapshot(NOW, [30], sources, kube=kube, prom=prom, policy=Policy())
    results = _results(plan_reclaim(snap, find_idle(snap.workloads, Policy(), NOW), Policy(), Mode.dry_run))
    assert headline(results, snap, mode) == 'Nothing to reclaim: 1 idle workload opted out (gpuaas.io/reclaim: "never").'



def test_a_target_partly_busy_is_no_opted_out_decision() -> None:
    """A second Workload of the Deployment is busy: its one opted-out idle Workload does not make the whole of it
    (and its GPUs) an idle target kept by an opt-out; as before the opt-out was listed, it gets no decision."""
    _, prom, kube = _fleet(on_workload="never")
    sources = {"kube": SourceStatus("kube", True, 0.1, 0.0), "prometheus": SourceStatus("prometheus", True, 0.1, 5.0)}
    snap = build_snapshot(NOW, [30], sources, kube=kube, prom=prom, policy=Policy())
    idle = find_idle(snap.workloads, Policy(), NOW)
    assert list(idle["idle_opted_out"]) == [True]
    busy = idle.assign(name="pod-llm-1", uid="uid-wl-1", verdict="busy", reason="GPU activity above the threshold",
                       activity_max=0.9, idle_opted_out=False, idle_seconds=float("nan"))
    assert plan_reclaim(snap, pd.concat([idle, busy], ignore_index=True), Policy(), Mode.dry_run) == []
