"""A quota plan's writes failing half-way against the real kube-apiserver and Kueue's ClusterQueues.

The answer is lost by ``tests/lossy_proxy.py`` on 127.0.0.1: it terminates TLS for gpuaas's own
client (a certificate of a CA made for the test, named in the kubeconfig it writes, with the
cluster's bearer token) and forwards each request over HTTPS to the real API server, checking its
certificate with the cluster's CA. For the request chosen, the API server applies it and answers;
the proxy resets the client's connection instead of relaying that answer.

Covers: a PATCH whose answer is lost is read back from the real API server, audited as landed and
undone with the rest of the plan; landed on the first step, it is rolled back with the rest when
the plan stops at the next (someone else changed that queue in the meantime); when the read-back
is lost too, nothing is rolled back on a guess and the plan stays open (an undo refuses it): the
next run's recovery rolls back both queues from the objects or, where the lost write was the
rollback's own, finds it landed and audits it, leaving the other queue's foreign change alone.
An undo writes its intent before its first patch: one whose process is killed (SIGKILL) while its
first patch's answer is on the way, and one whose answer and read-back are lost, are finished by
the next undo.

The plan moves 2 GPUs of cohort ``c`` from team-b to team-a (team-b's decrease is patched first).
team-b's pending Workloads need more than it has either way and team-a has none pending, so Kueue
admits and evicts nothing; each test puts both queues back as it found them.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuaas.actions import KubeWriter, undo_entries
from gpuaas.actions._quota_patches import QUOTA_ANNOTATION, gpu_nominal
from gpuaas.actions.quotas import QuotaApplyResult, apply_quota_plan, quota_moved_since, recover_quota_plans
from gpuaas.cluster.real import KubeHTTP, RealCluster
from gpuaas.cluster.real._pki import Pki
from gpuaas.policies.quotas import QueueDemand, QuotaPlan, plan_quotas
from gpuaas.policy import Mode
from gpuaas.settings import GpuaasSettings, load_settings
from gpuaas.store import AuditEntry, Store
from tests.lossy_proxy import LossyProxy, lossy_proxy
from tests.real.test_conformance import LIMITS

pytestmark = [pytest.mark.real]

A, B = "team-a", "team-b"
GPU = ["nvidia.com/gpu"]
FLAVOR = "h100"
MOVED = 2
# ``gpuaas undo PLAN_ID`` without Prefect's flow around it: the same undo, in a process of its own to kill.
UNDO = """import sys
from gpuaas.actions import KubeWriter, undo_entries
from gpuaas.settings import load_settings
from gpuaas.store import open_store
settings = load_settings()
with open_store(settings) as store, KubeWriter(settings) as writer:
    print(undo_entries(store, writer, [int(sys.argv[1])]), flush=True)
"""


def queue_of(api: KubeHTTP, namespace: str) -> str:
    return str(api.list("LocalQueue", namespace)[0]["spec"]["clusterQueue"])


def nominal(api: KubeHTTP, queue: str) -> int:
    """The queue's nominal GPU quota of the flavor, as the real API server stores it now."""
    return gpu_nominal(api.get("ClusterQueue", queue), GPU)[FLAVOR]


def quota_events(api: KubeHTTP, queue: str) -> dict[str, str]:
    """gpuaas's Events on ``queue`` by name, their notes (a ClusterQueue is cluster-scoped: they are in ``default``)."""
    uid = api.get("ClusterQueue", queue)["metadata"]["uid"]
    return {e["metadata"]["name"]: e["note"] for e in api.list("Event", "default")
            if e["regarding"].get("uid") == uid and e["reportingController"] == "gpuaas.io/gpuaas"}


def as_stored(api: KubeHTTP, queue: str) -> tuple[Any, str | None]:
    obj = api.get("ClusterQueue", queue)
    return obj["spec"]["resourceGroups"], (obj["metadata"].get("annotations") or {}).get(QUOTA_ANNOTATION)


class Queues:
    """team-a's and team-b's ClusterQueues (``a``, ``b``) and their nominal GPU quotas when the test began."""

    def __init__(self, api: KubeHTTP) -> None:
        self.api = api
        self.a, self.b = queue_of(api, A), queue_of(api, B)
        self.start = {self.a: nominal(api, self.a), self.b: nominal(api, self.b)}
        self.stored = {q: as_stored(api, q) for q in (self.a, self.b)}
        self.events = {name for q in (self.a, self.b) for name in quota_events(api, q)}

    def now(self) -> dict[str, int]:
        return {q: nominal(self.api, q) for q in (self.a, self.b)}

    def moved(self) -> dict[str, int]:
        """What the plan writes: team-b ``MOVED`` GPUs lower, team-a as many higher."""
        return {self.a: self.start[self.a] + MOVED, self.b: self.start[self.b] - MOVED}

    def plan(self) -> QuotaPlan:
        a, b = self.start[self.a], self.start[self.b]
        plan = plan_quotas([QueueDemand(self.a, {FLAVOR: a}, {FLAVOR: a + MOVED}),
                            QueueDemand(self.b, {FLAVOR: b}, {FLAVOR: b - MOVED})], LIMITS)
        assert {(c.queue, c.before, c.after) for c in plan.changes} == {(self.a, a, a + MOVED),
                                                                         (self.b, b, b - MOVED)}
        return plan

    def as_found(self) -> bool:
        """Both queues exactly as the test found them: every GPU entry (limits included) and the plan mark."""
        return all(as_stored(self.api, q) == stored for q, stored in self.stored.items())

    def put_back(self) -> None:
        """The queues as found, and without the Events the test made on them (a later test reads a queue's
        Events by reason)."""
        for queue, (groups, mark) in self.stored.items():
            self.api.merge_patch("ClusterQueue", queue, {"metadata": {"annotations": {QUOTA_ANNOTATION: mark}},
                                                         "spec": {"resourceGroups": groups}})
            for name in set(quota_events(self.api, queue)) - self.events:
                self.api.delete("Event", name, "default")


def settle(api: KubeHTTP, names: list[str]) -> None:
    """Wait (at most 15 s) until Kueue has written the queues' status after their last change: their
    resourceVersions stay the same for a second. Kueue's status write bumps the resourceVersion, so a
    patch at the version read just before it meets a real 409 (gpuaas re-reads and tries once more)."""
    deadline = time.monotonic() + 15
    seen = [api.get("ClusterQueue", q)["metadata"]["resourceVersion"] for q in names]
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = [api.get("ClusterQueue", q)["metadata"]["resourceVersion"] for q in names]
        if now == seen:
            return
        seen = now


@pytest.fixture()
def queues(api: KubeHTTP) -> Iterator[Queues]:
    names = [queue_of(api, A), queue_of(api, B)]
    settle(api, names)
    found = Queues(api)
    assert found.start[found.b] >= MOVED, found.start
    try:
        yield found
    finally:
        found.put_back()
        settle(api, names)


@pytest.fixture()
def proxy(real_cluster: RealCluster, tmp_path: Path) -> Iterator[LossyProxy]:
    with lossy_proxy(real_cluster.api_url, pki=Pki(tmp_path / "proxy-pki"),
                     upstream_ca=real_cluster.pki_dir / "ca.crt") as relay:
        assert relay.url.startswith("https://127.0.0.1:")
        yield relay


@pytest.fixture()
def proxied(real_cluster: RealCluster, proxy: LossyProxy, settings: GpuaasSettings, tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> Path:
    """The kubeconfig through the proxy (``settings`` keeps the direct one): set for what loads settings next."""
    path = proxy.kubeconfig(real_cluster.kubeconfig, tmp_path / "proxied-kubeconfig")
    monkeypatch.setenv("GPUAAS_KUBECONFIG", str(path))
    return path


def apply(store: Store, writer: KubeWriter, plan: QuotaPlan) -> QuotaApplyResult:
    return apply_quota_plan(store, writer, "c", plan, mode=Mode.apply, degraded=None, flow_run_id=None,
                            evidence={}, gpu_resources=GPU)


def rows_of(store: Store, plan_id: int) -> list[AuditEntry]:
    return store.audit(refers_to=[plan_id], limit=None)


def changes(store: Store, plan_id: int) -> list[tuple[str, str, str]]:
    """(queue, outcome, why) of the plan's ``quota-change`` rows, oldest first."""
    return [(r.name, r.outcome, r.reason.split(":", 1)[0]) for r in rows_of(store, plan_id)
            if r.action == "quota-change"]


def path_of_queue(queue: str) -> str:
    return f"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{queue}"


# -- a lost answer -------------------------------------------------------------------------------------

def test_a_quota_patch_whose_answer_is_lost_is_read_back_audited_and_undone(
        queues: Queues, proxy: LossyProxy, proxied: Path, settings: GpuaasSettings, store: Store,
        api: KubeHTTP) -> None:
    a, b = queues.a, queues.b
    events_before = quota_events(api, a)
    proxy.drop_response("PATCH", name=a)  # team-a's increase, the second patch, reaches etcd; its answer is lost
    with KubeWriter(load_settings()) as via_proxy:
        result = apply(store, via_proxy, queues.plan())
    assert proxy.dropped == [f"PATCH {path_of_queue(a)}"] and not proxy.refused
    assert queues.now() == queues.moved()
    assert result.outcome == "applied", result.message
    assert changes(store, result.plan_id) == [(b, "applied", "apply"), (a, "applied", "apply")]
    row = [r for r in rows_of(store, result.plan_id) if r.action == "quota-change" and r.name == a][0]
    assert row.before == {FLAVOR: queues.start[a]} and (row.after or {}).get(FLAVOR) == queues.moved()[a]
    assert "the PATCH's answer was lost" in row.reason and "read back, it had landed" in row.reason, row.reason
    # The Event of the landed patch, written from the object read back, is on the real queue.
    new = [note for name, note in quota_events(api, a).items() if name not in events_before]
    assert new == [f"Nominal GPU quota moved by gpuaas rebalance: {FLAVOR} {queues.start[a]} -> "
                   f"{queues.moved()[a]}. Plan #{result.plan_id}; to reverse it: gpuaas undo {result.plan_id}"]
    assert [r.outcome for r in rows_of(store, result.plan_id) if r.action == "quota-plan"] == ["applied"]
    # `gpuaas undo` counts the patch whose answer was lost as in place, and puts it back with the other.
    undo_after_a_quiet_recovery(store, settings, queues, result.plan_id)


def undo_after_a_quiet_recovery(store: Any, settings: Any, queues: Queues, plan_id: int) -> Any:
    """The next run's recovery finds nothing to do, and ``gpuaas undo`` of the plan puts both queues back as
    they were found; the undo's result."""
    a, b = queues.a, queues.b
    with KubeWriter(settings) as direct:
        assert recover_quota_plans(store, direct, flow_run_id=None, now=datetime.now(UTC), gpu_resources=GPU) == []
        [undone] = undo_entries(store, direct, [plan_id])
    assert undone.result == "restored", undone.message
    assert queues.now() == queues.start and queues.as_found()
    assert changes(store, plan_id)[2:] == [(a, "restored", "undo"), (b, "restored", "undo")]
    return undone


def raise_by_one(api: KubeHTTP, queue: str) -> int:
    """An operator's edit of ``queue``'s nominal GPU quota (one more), straight to the API server; the new value."""
    groups = api.get("ClusterQueue", queue)["spec"]["resourceGroups"]
    entry = groups[0]["flavors"][0]["resources"][0]
    entry["nominalQuota"] = gpu_nominal(api.get("ClusterQueue", queue), GPU)[FLAVOR] + 1
    api.merge_patch("ClusterQueue", queue, {"spec": {"resourceGroups": groups}})
    return int(entry["nominalQuota"])


def test_a_landed_patch_whose_answer_is_lost_is_rolled_back_with_the_rest(
        queues: Queues, proxy: LossyProxy, proxied: Path, store: Store, api: KubeHTTP) -> None:
    a, b = queues.a, queues.b
    raised = queues.start[a] + 1
    # team-b's decrease, the first patch, lands; its answer is lost; in that moment an operator raises team-a's
    # quota, so the plan's next step finds team-a no longer as planned and stops.
    proxy.drop_response("PATCH", name=b, after=lambda: raise_by_one(api, a))
    with KubeWriter(load_settings()) as via_proxy:
        result = apply(store, via_proxy, queues.plan())
    assert proxy.dropped == [f"PATCH {path_of_queue(b)}"] and not proxy.refused
    assert queues.now() == {a: raised, b: queues.start[b]}  # team-b rolled back; the operator's change left alone
    assert result.outcome == "failed", result.message
    assert "stopped after 1 patch" in result.message and result.message.endswith("rolled back 1"), result.message
    assert f"{a}: quota changed by someone else ({FLAVOR} is {raised}, expected {queues.start[a]})" in result.message
    assert changes(store, result.plan_id) == [(b, "applied", "apply"), (b, "restored", "rollback")]
    landed, back = [r for r in rows_of(store, result.plan_id) if r.action == "quota-change"]
    assert "read back, it had landed" in landed.reason, landed.reason
    assert (landed.before, (landed.after or {}).get(FLAVOR)) == ({FLAVOR: queues.start[b]}, queues.moved()[b])
    assert (back.before, (back.after or {}).get(FLAVOR)) == ({FLAVOR: queues.moved()[b]}, queues.start[b])
    assert rows_of(store, result.plan_id)[-1].action == "quota-plan"
    assert rows_of(store, result.plan_id)[-1].outcome == "failed"
    assert quota_moved_since(store, datetime.now(UTC) - timedelta(hours=1)) == {}  # rolled back: nothing moved
    assert as_stored(api, b) == queues.stored[b]  # team-b's entries and mark exactly as before


def test_a_lost_answer_whose_read_back_fails_leaves_the_plan_open_for_the_next_runs_recovery(
        queues: Queues, proxy: LossyProxy, proxied: Path, settings: GpuaasSettings, store: Store) -> None:
    a, b = queues.a, queues.b
    proxy.drop_response("PATCH", name=a, then_refuse=1)  # the read-back GET of team-a is reset too
    with KubeWriter(load_settings()) as via_proxy:
        result = apply(store, via_proxy, queues.plan())
    assert proxy.dropped == [f"PATCH {path_of_queue(a)}"] and proxy.refused == [f"GET {path_of_queue(a)}"]
    # Both patches landed: rolling team-b back on a guess would leave the cohort above its capacity.
    assert queues.now() == queues.moved()
    assert result.outcome == "failed", result.message
    assert "the read-back failed" in result.message and "nothing rolled back" in result.message, result.message
    assert "the plan is left open" in result.message
    rows = rows_of(store, result.plan_id)
    assert not [r for r in rows if r.action == "quota-plan"]  # no completion: the plan is open
    unknown = rows[-1]
    assert (unknown.action, unknown.name, unknown.outcome, unknown.before) == ("quota-change", a, "unknown", None)
    assert "whether it landed is unknown" in unknown.reason, unknown.reason
    with KubeWriter(settings) as direct:
        [undone] = undo_entries(store, direct, [result.plan_id])
        assert undone.result == "skipped" and "still open" in undone.message, undone.message
        assert queues.now() == queues.moved()
        [closed] = recover_quota_plans(store, direct, flow_run_id=None, now=datetime.now(UTC), gpu_resources=GPU)
    assert closed.outcome == "failed" and "rolled back 2 of 2" in closed.reason, closed.reason
    assert queues.now() == queues.start and queues.as_found()
    assert [c for c in changes(store, result.plan_id) if c[1] != "unknown"] == [
        (b, "applied", "apply"), (a, "applied", "recovered"), (a, "restored", "rollback"), (b, "restored", "rollback")]
    assert quota_moved_since(store, datetime.now(UTC) - timedelta(hours=1)) == {}



def test_a_rollback_whose_answer_and_read_back_are_lost_is_settled_by_the_next_runs_recovery(
        queues: Queues, proxy: LossyProxy, proxied: Path, settings: GpuaasSettings, store: Store,
        api: KubeHTTP) -> None:
    a, b = queues.a, queues.b
    raised = queues.start[a] + 1
    # As above, then the rollback of team-b lands too, its answer lost and its read-back reset.
    proxy.drop_response("PATCH", name=b, after=lambda: raise_by_one(api, a))
    proxy.drop_response("PATCH", name=b, then_refuse=1)
    with KubeWriter(load_settings()) as via_proxy:
        result = apply(store, via_proxy, queues.plan())
    assert proxy.dropped == [f"PATCH {path_of_queue(b)}"] * 2 and proxy.refused == [f"GET {path_of_queue(b)}"]
    assert queues.now() == {a: raised, b: queues.start[b]}
    assert result.outcome == "failed" and "the plan is left open" in result.message, result.message
    assert not [r for r in rows_of(store, result.plan_id) if r.action == "quota-plan"]  # left open
    assert changes(store, result.plan_id) == [(b, "applied", "apply"), (b, "unknown", "rollback")]
    with KubeWriter(settings) as direct:
        [closed] = recover_quota_plans(store, direct, flow_run_id=None, now=datetime.now(UTC), gpu_resources=GPU)
        assert closed.outcome == "failed", closed.reason
        assert f"the rollback of {b} had landed already (read back)" in closed.reason, closed.reason
        assert f"{a} {FLAVOR} is {raised} (plan {queues.start[a]} -> {queues.moved()[a]}), left alone" in closed.reason
        assert queues.now() == {a: raised, b: queues.start[b]}  # nothing written by the recovery
        assert [c for c in changes(store, result.plan_id) if c[1] != "unknown"] == [
            (b, "applied", "apply"), (b, "restored", "rollback")]
        assert quota_moved_since(store, datetime.now(UTC) - timedelta(hours=1)) == {}
        [undone] = undo_entries(store, direct, [result.plan_id])
    assert undone.result == "no-op", undone.message
    assert as_stored(api, b) == queues.stored[b]

# -- an undo cut off ----------------------------------------------------------------------------------

def undo_rows(store: Store, plan_id: int) -> list[AuditEntry]:
    return [r for r in store.audit(idempotency_key=f"restore/{plan_id}", limit=None) if r.action == "restore"]


def applied(queues: Queues, store: Store, settings: GpuaasSettings) -> QuotaApplyResult:
    with KubeWriter(settings) as direct:
        result = apply(store, direct, queues.plan())
    assert result.outcome == "applied", result.message
    assert queues.now() == queues.moved()
    return result


def test_an_undo_killed_after_its_first_patch_landed_is_finished_by_the_next_undo(
        queues: Queues, proxy: LossyProxy, proxied: Path, settings: GpuaasSettings, store: Store) -> None:
    a, b = queues.a, queues.b
    result = applied(queues, store, settings)
    # The undo puts team-a's 2 GPUs back first (a decrease); the API server applies it and the process is killed
    # while the answer is on its way, before any row of that patch.
    held = proxy.hold_response("PATCH", name=a)
    undo = subprocess.Popen([sys.executable, "-c", UNDO, str(result.plan_id)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # its environment names the proxied kubeconfig and this store
    try:
        deadline = time.monotonic() + 120
        while not held.landed.wait(0.2):
            assert undo.poll() is None, (undo.returncode, undo.communicate())
            assert time.monotonic() < deadline, "the undo's first PATCH never reached the API server"
        undo.kill()
        assert undo.wait(timeout=30) == -9
    finally:
        held.release.set()
        if undo.poll() is None:
            undo.kill()
            undo.wait(timeout=30)
    assert queues.now() == {a: queues.start[a], b: queues.moved()[b]}
    [intent] = undo_rows(store, result.plan_id)  # written before the first patch; no completion
    assert (intent.outcome, intent.refers_to) == ("planned", result.plan_id)
    assert intent.after == {a: {FLAVOR: queues.start[a]}, b: {FLAVOR: queues.start[b]}}
    assert intent.before == {a: {FLAVOR: queues.moved()[a]}, b: {FLAVOR: queues.moved()[b]}}
    assert changes(store, result.plan_id) == [(b, "applied", "apply"), (a, "applied", "apply")]
    undone = undo_after_a_quiet_recovery(store, settings, queues, result.plan_id)
    found = [r for r in rows_of(store, result.plan_id) if r.action == "quota-change"][2]
    assert f"recovered: the undo of intent #{intent.id} had put it back" in found.reason, found.reason
    done = store.get_audit(int(undone.restore_audit_id or 0))
    assert done is not None and (done.action, done.outcome, done.refers_to) == ("restore", "restored", intent.id)
    with KubeWriter(settings) as direct:
        [again] = undo_entries(store, direct, [result.plan_id])
    assert again.result == "no-op" and "already restored" in again.message


def test_an_undo_whose_answer_and_read_back_are_lost_is_finished_by_the_next_undo(
        queues: Queues, proxy: LossyProxy, proxied: Path, settings: GpuaasSettings, store: Store) -> None:
    a, b = queues.a, queues.b
    result = applied(queues, store, settings)
    proxy.drop_response("PATCH", name=a, then_refuse=1)
    with KubeWriter(load_settings()) as via_proxy:
        [cut] = undo_entries(store, via_proxy, [result.plan_id])
    assert proxy.dropped == [f"PATCH {path_of_queue(a)}"] and proxy.refused == [f"GET {path_of_queue(a)}"]
    assert cut.result == "unknown" and "stays open" in cut.message, cut.message
    assert queues.now() == {a: queues.start[a], b: queues.moved()[b]}
    [intent] = undo_rows(store, result.plan_id)
    assert intent.outcome == "planned"
    with KubeWriter(settings) as direct:
        [undone] = undo_entries(store, direct, [result.plan_id])
    assert undone.result == "restored", undone.message
    assert queues.now() == queues.start and queues.as_found()
    assert [c for c in changes(store, result.plan_id)[2:] if c[1] != "unknown"] == [
        (a, "restored", "undo"), (b, "restored", "undo")]
