"""``plan_reclaim`` / ``finalize_decisions``: targets, safety skips, idempotency and the cap. Pure."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pandas as pd

from gpuaas.models import Snapshot, SourceStatus
from gpuaas.policies.reclaim import finalize_decisions, find_idle, plan_reclaim, reclaim_key
from gpuaas.policy import Mode, Policy
from tests.policies.test_idle import NOW, workload

OK = {"kube": SourceStatus("kube", ok=True, staleness_s=0.0), "prometheus": SourceStatus("prometheus", ok=True,
                                                                                          staleness_s=30.0)}


def owner(name: str, kind: str = "RayCluster", **over: Any) -> dict[str, Any]:
    return {"kind": kind, "namespace": "team-a", "name": name, "uid": f"o-{name}", "resource_version": "7",
            "gpus": 2.0, "replicas": 1, "stopped": False, **over}


def snapshot(rows: list[dict[str, Any]], owners: list[dict[str, Any]], sources: dict[str, SourceStatus] = OK
             ) -> Snapshot:
    return Snapshot(collected_at=NOW, windows_minutes=(30.0, 60.0), sources=sources,
                    workloads=pd.DataFrame(rows), owners=pd.DataFrame(owners))


def plan(snap: Snapshot, mode: Mode = Mode.dry_run, policy: Policy | None = None) -> list[Any]:
    policy = policy or Policy()
    return plan_reclaim(snap, find_idle(snap.workloads, policy, NOW), policy, mode)


def test_owner_is_the_target_and_a_workload_without_a_stoppable_owner_is_deactivated() -> None:
    snap = snapshot([workload("nb", kind="Notebook", owner_kind="Notebook", owner_name="nb"),
                     workload("job", kind="Workload", owner_kind="Job", owner_name="job",
                              resource_version="42", api_version="kueue.x-k8s.io/v1beta1")],
                    [owner("nb", kind="Notebook")])
    got = {(d.kind, d.name): d for d in plan(snap)}
    assert set(got) == {("Notebook", "nb"), ("Workload", "job")}
    nb, job = got[("Notebook", "nb")], got[("Workload", "job")]
    assert (nb.uid, nb.resource_version, nb.api_version) == ("o-nb", "7", None)
    # A Workload target carries what the snapshot read: its uid, resourceVersion and negotiated API version.
    assert (job.uid, job.resource_version, job.api_version) == ("u-job", "42", "kueue.x-k8s.io/v1beta1")
    assert all(d.outcome == "planned" for d in got.values())


def test_a_raycluster_is_stopped_through_its_workload_unless_elastic_and_asked_for_compute() -> None:
    """Kueue owns an admitted RayCluster's ``spec.suspend`` (it sets a client's suspend back):
    the stop that frees the quota is the Workload's deactivation, the owner named in the evidence."""
    rows = [workload("wl-ray", owner_name="ray", resource_version="42")]
    [d] = plan(snapshot(rows, [owner("ray")]))
    assert (d.kind, d.name, d.uid, d.resource_version, d.outcome) == ("Workload", "wl-ray", "u-wl-ray", "42", "planned")
    assert d.evidence["owner"] == "RayCluster ray"
    # An elastic one asked to free compute shrinks in place: the RayCluster's workers are the target.
    [d] = plan(snapshot(rows, [owner("ray", elastic=True)]))  # the default goal: compute
    assert (d.kind, d.name, d.uid) == ("RayCluster", "ray", "o-ray")
    [d] = plan(snapshot(rows, [owner("ray", elastic=False)]))
    assert (d.kind, d.name) == ("Workload", "wl-ray")
    quota = Policy.model_validate({"reclaim": {"free": "quota", "kinds": {"RayCluster": {"free": "quota"}}}})
    [d] = plan(snapshot(rows, [owner("ray", elastic=True)]), policy=quota)  # elastic, but the goal is the quota
    assert (d.kind, d.name) == ("Workload", "wl-ray")
    # The owner's opt-out, stop and absence still decide, though the write goes to the Workload.
    [d] = plan(snapshot(rows, [owner("ray", reclaim="never")]))
    assert d.outcome == "skipped" and "opted out on the RayCluster" in d.reason
    [d] = plan(snapshot(rows, []))
    assert d.outcome == "skipped" and "owner not in the snapshot" in d.reason
    # Deactivated already, not yet evicted by Kueue (still admitted in the snapshot): nothing to do.
    [d] = plan(snapshot([{**rows[0], "active": False}], [owner("ray")]))
    assert d.outcome == "skipped" and "already deactivated" in d.reason


def test_a_deployment_is_idle_only_when_every_pod_workload_is() -> None:
    rows = [workload("pod-0", kind="Deployment", owner_kind="Deployment", owner_name="dep", gpus=1.0),
            workload("pod-1", kind="Deployment", owner_kind="Deployment", owner_name="dep", gpus=1.0,
                     activity_max_30m=0.9)]
    [d] = plan(snapshot(rows, [owner("dep", kind="Deployment")]))
    assert d.outcome == "skipped" and "not every Workload" in d.reason and d.gpus == 2.0


def test_never_on_missing_or_stale_parts() -> None:
    rows, owners = [workload("ray")], [owner("ray")]
    down = {**OK, "prometheus": SourceStatus("prometheus", ok=False, error="timeout")}
    assert "did not answer" in plan(snapshot(rows, owners, down))[0].reason
    stale = {**OK, "prometheus": SourceStatus("prometheus", ok=True, staleness_s=3600.0)}
    [d] = plan(snapshot(rows, owners, stale))
    assert d.outcome == "skipped" and "stale" in d.reason
    assert "owner not in the snapshot" in plan(snapshot(rows, []))[0].reason
    assert plan(snapshot(rows, [owner("ray", stopped=True)]))[0].reason == "already stopped"


def test_the_cap_keeps_the_most_wasteful_and_defers_the_rest() -> None:
    rows = [workload("small", gpus=1.0, gpus_observed=1.0), workload("big", gpus=8.0, gpus_observed=8.0),
            workload("mid", gpus=2.0)]
    decisions = plan(snapshot(rows, [owner("small"), owner("big"), owner("mid")]))
    final = finalize_decisions(decisions, {}, cap=2)
    assert [(d.name, d.outcome) for d in final] == [("big", "planned"), ("mid", "planned"), ("small", "deferred")]
    assert "over the cap of 2" in final[2].reason


def test_a_key_already_decided_is_skipped_and_does_not_use_the_cap() -> None:
    decisions = plan(snapshot([workload("a"), workload("b")], [owner("a"), owner("b")]), Mode.apply)
    first = next(d for d in decisions if d.name == "a")
    final = finalize_decisions(decisions, {first.idempotency_key: 41}, cap=1)
    got = {d.name: d for d in final}
    assert got["a"].outcome == "skipped" and "audit #41" in got["a"].reason
    assert got["b"].outcome == "planned"
    assert "/apply/" in first.idempotency_key
    later = plan(replace(snapshot([workload("a")], [owner("a")]), collected_at=NOW + pd.Timedelta(minutes=15)))
    assert later[0].idempotency_key != first.idempotency_key  # a new window is a new decision


def test_an_opt_out_on_the_owner_wins_over_the_workloads_annotation() -> None:
    # The Workload says something else; the team annotated the RayCluster it owns.
    [d] = plan(snapshot([workload("ray", reclaim="allow")], [owner("ray", reclaim="never")]))
    assert d.outcome == "skipped" and "opted out on the RayCluster" in d.reason
    [d] = plan(snapshot([workload("ray")], [owner("ray", reclaim=None)]))
    assert d.outcome == "planned"


def test_apply_on_a_past_window_writes_nothing_but_a_dry_run_may_look() -> None:
    snap = snapshot([workload("ray")], [owner("ray")])
    policy = Policy()
    idle = find_idle(snap.workloads, policy, NOW)
    late = NOW + timedelta(seconds=policy.collect.max_staleness_seconds + 1)
    [d] = plan_reclaim(snap, idle, policy, Mode.apply, late)
    assert d.outcome == "skipped" and "no writes on past evidence" in d.reason
    [d] = plan_reclaim(snap, idle, policy, Mode.dry_run, late)
    assert d.outcome == "planned"
    [d] = plan_reclaim(snap, idle, policy, Mode.apply, NOW + timedelta(seconds=60))
    assert d.outcome == "planned"


def test_an_object_restored_inside_its_window_is_not_reclaimed_again() -> None:
    [d] = plan(snapshot([workload("ray")], [owner("ray")]), Mode.apply)
    key = ("Workload", "team-a", "ray")
    recent = finalize_decisions([d], {}, cap=5, restored={key: (9, NOW - pd.Timedelta(minutes=29))}, now=NOW)
    assert recent[0].outcome == "skipped" and "audit #9" in recent[0].reason
    older = finalize_decisions([d], {}, cap=5, restored={key: (9, NOW - pd.Timedelta(minutes=31))}, now=NOW)
    assert older[0].outcome == "planned"


def test_one_window_end_is_one_key_whatever_its_offset() -> None:
    """12:00+02:00 and 10:00Z are one instant: one decision, so a rerun given either acts once."""
    east = datetime(2026, 3, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    keys = {reclaim_key("apply", "Notebook", "team-a", "nb", "u-1", end)
            for end in (east, datetime(2026, 3, 1, 10, 0, tzinfo=UTC), pd.Timestamp("2026-03-01T10:00:00Z"))}
    assert keys == {"reclaim/apply/Notebook/team-a/nb/u-1/2026-03-01T10:00:00Z"}


def test_a_cap_of_one_reads_in_the_singular() -> None:
    """``over the cap of 1 actions per run`` was the deferral's reason, in the table, the audit row and the summary."""
    rows = [workload("small", gpus=1.0, gpus_observed=1.0), workload("big", gpus=8.0, gpus_observed=8.0)]
    final = finalize_decisions(plan(snapshot(rows, [owner("small"), owner("big")])), {}, cap=1)
    assert final[1].reason == "over the cap of 1 action per run (rank 2 by GPUs x idle time)"
