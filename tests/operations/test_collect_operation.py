"""``gpuaas.operations.collect.plan`` as a pure function: a snapshot built from records in, the idle candidates,
the history rows and whether the full document is kept out; no store, no source."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from gpuaas.models import ClusterQueue, PodGpus, QuotaEntry, Snapshot, SourceStatus, Workload, WorkloadState
from gpuaas.operations.collect import apply, plan
from gpuaas.policy import Policy, Tenant
from gpuaas.snapshot import build_snapshot
from gpuaas.sources.kube import KubeState
from gpuaas.sources.prometheus import PrometheusReading
from gpuaas.store import Store
from tests.test_snapshot import NOW, _gpu

POLICY = Policy(tenants=[Tenant(name="research", namespaces=["team-a"])])
OK = {"kube": SourceStatus("kube", True, 0.1, 0.0), "prometheus": SourceStatus("prometheus", True, 0.2, 12.0)}


def _wl(name: str, state: WorkloadState, gpus: float, owner: str | None = None) -> Workload:
    """A Workload of team-a in cq-a, 90 minutes old (past any grace period), not opted out."""
    return Workload("RayCluster" if owner else "Workload", "team-a", name, f"uid-{name}", "lq-a", "cq-a", 0, None,
                    state, True, gpus, "h100", NOW - timedelta(minutes=90), None,
                    "RayCluster" if owner else None, owner, ())


def snapshot(sources: dict[str, SourceStatus] = OK) -> Snapshot:
    """cq-a (8 h100): ``idle`` (2 GPUs, both seen at 0 % for the whole window), ``busy`` (2 GPUs at 60 %),
    ``blind`` (2 GPUs at 0 %, one seen for half the window), pending ``wait`` (4 GPUs)."""
    owners = ("rc-idle", "rc-busy", "rc-blind")
    kube = KubeState(
        "v1beta2", (ClusterQueue("cq-a", "all", (QuotaEntry("h100", "nvidia.com/gpu", 8, usage=6),)),), (),
        (*(_wl(o.removeprefix("rc-"), WorkloadState.admitted, 2, o) for o in owners),
         _wl("wait", WorkloadState.pending, 4)),
        (), (), (), tuple(PodGpus("team-a", f"{o}-0", "n1", 2, "RayCluster", o, "RayCluster", o) for o in owners),
        (), 0)
    gpus = pd.DataFrame([_gpu("rc-idle-0", "0", 1.0, 0.0), _gpu("rc-idle-0", "1", 1.0, 0.0),
                         _gpu("rc-busy-0", "2", 1.0, 0.6), _gpu("rc-busy-0", "3", 1.0, 0.6),
                         _gpu("rc-blind-0", "4", 1.0, 0.0), _gpu("rc-blind-0", "5", 0.5, 0.0)])
    serving = pd.DataFrame(columns=["namespace", "pod", "model_name", "window_minutes", "stat", "finished_reason",
                                    "le", "value"])
    prom = PrometheusReading(gpus=gpus, kueue=pd.DataFrame(), serving=serving)
    return build_snapshot(NOW, [30], sources, kube=kube, prom=prom, policy=POLICY)


def test_plan_counts_only_fully_observed_idle_workloads_and_rows_per_queue_and_tenant() -> None:
    result = plan(snapshot(), POLICY, full_due=False)

    # blind is at 0 % on what was seen, but one GPU was unseen for half the window: not an idle candidate.
    assert result.idle_candidates == 1
    assert [(r["cluster_queue"], r["nominal_gpus"], r["pending_workloads"], r["pending_gpus"])
            for r in result.queue_rows] == [("cq-a", 8.0, 1, 4.0)]
    [tenant] = result.tenant_rows
    assert (tenant["tenant"], tenant["allocated_gpus"], tenant["idle_gpus"], tenant["pending_gpus"]) == (
        "research", 6.0, 2.0, 4.0)
    assert result.summary == {**result.snapshot.summary(), "notes": []}  # nothing it cannot act on
    # blind, named as its team knows it (the RayCluster that owns the Workload), with what it lacks.
    [blind] = result.unjudged
    assert (blind.workload, blind.gpus) == ("RayCluster team-a/rc-blind", 2.0)
    assert blind.why.startswith("telemetry incomplete for the window (")
    assert result.required_sources == ["kube", "prometheus"]
    assert (result.retention, result.keep_full) == (timedelta(days=POLICY.collect.retention_days),
                                                    POLICY.store.keep_full_snapshots)


def test_the_full_document_is_kept_when_due_or_when_degraded_whatever_the_cadence() -> None:
    assert plan(snapshot(), POLICY, full_due=False).full is False
    assert plan(snapshot(), POLICY, full_due=True).full is True
    down = {**OK, "prometheus": replace(OK["prometheus"], ok=False, error="prometheus: connection refused")}
    degraded = snapshot(down)
    assert degraded.degraded
    assert plan(degraded, POLICY, full_due=False).full is True


RETENTION = timedelta(days=POLICY.collect.retention_days)
WALL = NOW + timedelta(days=30)
"""The wall clock of the store tests: a month after the snapshot's own instant, as a replayed collect is."""


@pytest.mark.parametrize("at", [WALL + timedelta(days=400), WALL - timedelta(days=10), WALL - RETENTION * 3],
                         ids=["a collect for a later instant", "a collect for an earlier instant",
                              "a collect for an instant past the retention"])
def test_pruning_counts_the_retention_back_from_the_wall_clock_never_from_the_snapshots_instant(
        tmp_path: Path, at: datetime) -> None:
    """Rows younger than ``collect.retention_days`` by the wall clock stay, whatever instant the collect was for;
    older ones go. Pruned from a later instant, every row went; from an earlier one, old rows stayed."""
    store = Store(f"sqlite:///{tmp_path}/gpuaas.db")
    try:
        ages = {"a day": timedelta(days=1), "within": RETENTION - timedelta(hours=1),
                "past": RETENTION + timedelta(hours=1)}
        kept = plan(snapshot(), POLICY, full_due=False)
        ids = {}
        for name, age in ages.items():
            store.save_history(WALL - age, kept.queue_rows, kept.tenant_rows)
            ids[name] = store.save_snapshot(WALL - age, kept.summary, {}).id
        store.save_snapshot(WALL - ages["a day"], kept.summary, {"snapshot": "{}"})  # the newest full document
        replayed = replace(kept, snapshot=replace(kept.snapshot, collected_at=at), full=True, keep_full=1)
        own = apply(replayed, store, wall_clock=WALL)
        stored = store.get_snapshot(own)  # the id the collect reports names a row, and its document, until the next
        assert stored is not None and "snapshot" in stored.payload

        assert {n for n, i in ids.items() if i is not None and store.get_snapshot(i)} == {"a day", "within"}
        stamps = set(store.queue_history(WALL - timedelta(days=3650), WALL + timedelta(days=3650))["collected_at"])
        assert {WALL - ages["a day"], WALL - ages["within"]} <= stamps and WALL - ages["past"] not in stamps
        tenants = set(store.tenant_history(WALL - timedelta(days=3650), WALL + timedelta(days=3650))["collected_at"])
        assert WALL - ages["within"] in tenants and WALL - ages["past"] not in tenants
    finally:
        store.close()
