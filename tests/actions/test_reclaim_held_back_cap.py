"""An object a guard keeps holding back takes no place under the cap while it is unchanged.

Against the embedded reclaim fleet (a fresh cluster per test: they leave objects Argo-managed, refused or stopped),
with ``max_actions_per_run: 1``, through ``gpuaas.operations.reclaim.decide`` and ``apply`` as the flow calls them.
The most wasteful target is Deployment ``dep`` (2 GPUs); the next is RayCluster ``ray`` (its Workload).

* ``dep`` tracked by Argo CD (dry-run and apply): run 1 reads it live and skips it ``gitops-managed``, ``ray`` is
  deferred over the cap; run 2, nothing changed, skips ``dep`` in the plan (not read, naming run 1's row, no new
  row) and acts on ``ray``; once ``dep`` changes (a new resourceVersion) it is read and judged live again, and the
  run after skips it in the plan again, naming the row the live judgement wrote.
* ``dep`` whose stop a webhook sets back: run 1 fails ``stop-not-held``; the next dry-run and apply runs skip it in
  the plan and act on ``ray``; a change of ``dep`` that leaves its spec (generation) as it was is judged live,
  skipped by the action's own guard, and the run after skips it in the plan again.
* ``dep`` whose stop field Argo CD applies by server-side apply: the same, in the plan.
* a skip row written before the judged resourceVersion was recorded says nothing of the object now: read live.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuaas.actions import KubeWriter
from gpuaas.actions.reclaim import ActionResult
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.testbed import reclaim_cluster, write_policy
from gpuaas.instant import utc_stamp
from gpuaas.models import Outcome
from gpuaas.operations import reclaim as operation
from gpuaas.operations.collect import read_snapshot
from gpuaas.policies.reclaim import SkipCause
from gpuaas.policies.reclaim import plan as plan_module
from gpuaas.policy import Mode
from gpuaas.settings import GpuaasSettings, load_settings
from gpuaas.store import AuditEntry, Store
from tests.actions.reclaim_scenario import obj
from tests.actions.test_reclaim_stop_guards import _keep_replicas
from tests.scenarios import point_at

pytestmark = [pytest.mark.integration]

TRACKING = "team-a-apps:apps/Deployment:team-a/dep"
CADENCE = timedelta(minutes=15)


@pytest.fixture()
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with reclaim_cluster(tmp_path_factory.mktemp("held-back-cap")) as running:
        yield running


@pytest.fixture()
def settings(cluster: EmbeddedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GpuaasSettings:
    policy = write_policy(tmp_path / "policy.yaml", max_actions_per_run=1, record_skips_every_minutes=60)
    point_at(cluster, monkeypatch, policy_file=policy)
    return load_settings()


@pytest.fixture()
def reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(kind, name) of every object the action reads live, in order."""
    seen: list[tuple[str, str]] = []
    real_get = KubeWriter.get

    def get(self: KubeWriter, kind: str, namespace: str, name: str, *args: Any, **kwargs: Any) -> Any:
        seen.append((kind, name))
        return real_get(self, kind, namespace, name, *args, **kwargs)

    monkeypatch.setattr(KubeWriter, "get", get)
    return seen


_RUNS = [0]


@pytest.fixture(autouse=True)
def windows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each run decides a window of its own, as runs 15 minutes apart do (the fleet's telemetry ends at its start:
    the clock stays, and the window's end in the key moves on by run instead)."""
    _RUNS[0] = 0
    real_key = plan_module.reclaim_key

    def key(mode: Mode, kind: str, namespace: str, name: str, uid: str | None, window_end: datetime) -> str:
        return real_key(mode, kind, namespace, name, uid, window_end + CADENCE * _RUNS[0])

    monkeypatch.setattr(plan_module, "reclaim_key", key)


def _run(settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store, mode: Mode) -> dict[str, ActionResult]:
    """One reclaim run (decide, then apply) on a fresh snapshot, a window after the last: the results by the name of
    what each stops."""
    _RUNS[0] += 1
    now = cluster.clock.now()
    snapshot = read_snapshot(settings, now)
    plan = operation.decide(snapshot, operation.verdicts(snapshot, settings.policy), settings.policy, mode, store,
                            now=now)
    with KubeWriter(settings) as writer:
        results = operation.apply(plan, store, writer, flow_run_id="test", now=now)
    return {r.decision.stops[1]: r for r in results}


def _rows(store: Store, name: str) -> list[AuditEntry]:
    return store.audit(flow="reclaim", obj=f"Deployment/team-a/{name}", limit=None)


def _track(cluster: EmbeddedCluster) -> None:
    cluster.store.patch("Deployment", "team-a", "dep",
                        {"metadata": {"annotations": {"argocd.argoproj.io/tracking-id": TRACKING}}})


def _touch(cluster: EmbeddedCluster, value: str) -> str:
    """A change of ``dep`` that no guard looks at (a label): a new resourceVersion, the same spec."""
    cluster.store.patch("Deployment", "team-a", "dep", {"metadata": {"labels": {"example.com/touched": value}}})
    return str(obj(cluster, "Deployment", "dep")["metadata"]["resourceVersion"])


def _acted(result: ActionResult, mode: Mode) -> bool:
    return result.result == (Outcome.applied if mode is Mode.apply else Outcome.planned)


@pytest.mark.parametrize("mode", [Mode.dry_run, Mode.apply], ids=["dry-run", "apply"])
def test_an_argo_tracked_object_gives_its_place_under_the_cap_while_unchanged(
        settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store, reads: list[tuple[str, str]],
        mode: Mode) -> None:
    _track(cluster)
    first = _run(settings, cluster, store, mode)
    assert (first["dep"].result, first["dep"].cause) == (Outcome.skipped, SkipCause.gitops_managed), first["dep"].reason
    assert first["dep"].reason.startswith("synced by Argo CD") and ("Deployment", "dep") in reads
    assert (first["ray"].result, first["ray"].cause) == (Outcome.deferred, SkipCause.over_cap)
    [judged] = _rows(store, "dep")
    assert judged.evidence["judged_version"] == first["dep"].decision.resource_version

    reads.clear()
    second = _run(settings, cluster, store, mode)
    held = second["dep"]
    assert (held.result, held.cause) == (Outcome.skipped, SkipCause.gitops_managed), held.reason
    assert held.reason.startswith(f"still managed by its GitOps controller (audit #{judged.id}, unchanged since): "
                                  f"synced by Argo CD (argocd.argoproj.io/tracking-id: {TRACKING})")
    assert (held.audit_id, held.unchanged_since) == (judged.id, judged.created_at)  # pointed at, not written again
    assert ("Deployment", "dep") not in reads  # decided in the plan: never read
    assert _acted(second["ray"], mode), second["ray"].reason
    assert len(_rows(store, "dep")) == 1

    version = _touch(cluster, "1")
    reads.clear()
    third = _run(settings, cluster, store, mode)
    assert ("Deployment", "dep") in reads  # changed: read and judged live again
    assert (third["dep"].result, third["dep"].cause) == (Outcome.skipped, SkipCause.gitops_managed)
    assert third["dep"].reason.startswith("synced by Argo CD"), third["dep"].reason
    rejudged = _rows(store, "dep")[-1]
    assert (rejudged.id, rejudged.evidence["judged_version"]) == (third["dep"].audit_id, version)

    reads.clear()
    fourth = _run(settings, cluster, store, mode)
    assert ("Deployment", "dep") not in reads
    assert fourth["dep"].cause is SkipCause.gitops_managed
    assert f"(audit #{rejudged.id}, unchanged since)" in fourth["dep"].reason
    assert fourth["dep"].audit_id == rejudged.id


def test_an_object_whose_stop_argo_cd_applies_is_held_back_in_the_plan(
        settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store, reads: list[tuple[str, str]]) -> None:
    applied = {"manager": "argocd-controller", "operation": "Apply", "apiVersion": "apps/v1",
               "time": utc_stamp(cluster.clock.now()), "fieldsType": "FieldsV1",
               "fieldsV1": {"f:spec": {"f:replicas": {}, "f:template": {}}}}
    cluster.store.patch("Deployment", "team-a", "dep", {"metadata": {"managedFields": [applied]}})
    first = _run(settings, cluster, store, Mode.apply)
    assert first["dep"].cause is SkipCause.gitops_managed and first["ray"].cause is SkipCause.over_cap
    reads.clear()
    second = _run(settings, cluster, store, Mode.apply)
    assert second["dep"].cause is SkipCause.gitops_managed and ("Deployment", "dep") not in reads
    assert "argocd-controller sets spec.replicas" in second["dep"].reason
    assert second["ray"].result == Outcome.applied, second["ray"].reason


def test_a_stop_that_did_not_hold_gives_its_place_under_the_cap_while_unchanged(
        settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store, reads: list[tuple[str, str]]) -> None:
    cluster.store.mutating_admission = _keep_replicas("dep", obj(cluster, "Deployment", "dep")["spec"]["replicas"])
    first = _run(settings, cluster, store, Mode.apply)
    assert (first["dep"].result, first["dep"].cause) == (Outcome.failed, SkipCause.stop_not_held), first["dep"].reason
    assert (first["ray"].result, first["ray"].cause) == (Outcome.deferred, SkipCause.over_cap)
    failed = _rows(store, "dep")[-1]
    assert failed.evidence["judged_version"] == obj(cluster, "Deployment", "dep")["metadata"]["resourceVersion"]

    earlier = first["dep"].audit_id  # the failed stop's intent, as run 1 named it
    for mode in (Mode.dry_run, Mode.apply):  # the plan says the same in both
        reads.clear()
        again = _run(settings, cluster, store, mode)
        held = again["dep"]
        assert (held.result, held.cause) == (Outcome.skipped, SkipCause.stop_not_held), held.reason
        assert held.reason.startswith(f"its stop still would not hold (audit #{earlier}, unchanged since): the stop "
                                      "did not hold: the API server answered 200 but spec.replicas")
        assert ("Deployment", "dep") not in reads
        assert _acted(again["ray"], mode), again["ray"].reason
        earlier = held.audit_id  # another mode: a row of its own, which the next run names
    assert [r.outcome for r in _rows(store, "dep")][-2:] == [Outcome.skipped, Outcome.skipped]  # one row per mode

    _touch(cluster, "1")  # the spec, and so the generation the failed stop recorded, is as it was
    reads.clear()
    third = _run(settings, cluster, store, Mode.apply)
    assert ("Deployment", "dep") in reads
    assert (third["dep"].result, third["dep"].cause) == (Outcome.skipped, SkipCause.stop_not_held)
    assert third["dep"].reason.startswith(f"an earlier stop did not hold (audit #{first['dep'].audit_id}: ")

    reads.clear()
    fourth = _run(settings, cluster, store, Mode.apply)
    assert ("Deployment", "dep") not in reads
    assert (fourth["dep"].cause, fourth["dep"].audit_id) == (SkipCause.stop_not_held, third["dep"].audit_id)
    assert f"(audit #{third['dep'].audit_id}, unchanged since): an earlier stop did not hold" in fourth["dep"].reason


def test_a_row_without_the_judged_version_is_judged_live(settings: GpuaasSettings, cluster: EmbeddedCluster,
                                                         store: Store, reads: list[tuple[str, str]]) -> None:
    """A gitops-managed skip written before rows recorded the resourceVersion: not known unchanged, read live."""
    _track(cluster)
    first = _run(settings, cluster, store, Mode.dry_run)
    [judged] = _rows(store, "dep")
    evidence = {k: v for k, v in judged.evidence.items() if k != "judged_version"}
    store.append(AuditEntry(created_at=judged.created_at, flow="reclaim", action="reclaim", kind="Deployment",
                            namespace="team-a", name="dep", uid=judged.uid, mode=judged.mode,
                            outcome=Outcome.skipped, reason=judged.reason, evidence=evidence,
                            idempotency_key=first["dep"].decision.idempotency_key))
    reads.clear()
    second = _run(settings, cluster, store, Mode.dry_run)
    assert ("Deployment", "dep") in reads
    assert (second["dep"].cause, second["ray"].cause) == (SkipCause.gitops_managed, SkipCause.over_cap)
    assert _rows(store, "dep")[-1].evidence["judged_version"] == first["dep"].decision.resource_version
