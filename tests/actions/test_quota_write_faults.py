"""Quota plans whose writes fail half-way: a lost answer, a killed undo, a rollback that stops.

Against the embedded cluster. Covers: a PATCH whose answer is lost (it reached the server) is read
back and, landed, audited as a ``quota-change`` and rolled back with the rest, so the cohort's total
is conserved; when the read-back fails too the plan stays open (no completion row) and the next
run's recovery settles it from the objects, a rollback found landed included; an undo records its intent before its first patch, so
an undo killed after a patch landed (or whose answer was lost) is finished by the next undo instead
of being refused as someone else's change; an undo puts back the changes still in place of a plan
whose rollback stopped (closed ``failed``), never answering "nothing to restore" over one.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuaas.actions import KubeWriter, undo_entries
from gpuaas.actions.quotas import quota_moved_since, recover_quota_plans
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.errors import Invalid, TransientError
from gpuaas.settings import GpuaasSettings, load_settings
from gpuaas.store import AuditEntry, Store
from tests.actions.rebalance_scenario import NOMINAL
from tests.actions.test_quota_actions import (  # noqa: F401  (cluster, settings and writer are fixtures)
    DEMAND,
    GPU,
    Crash,
    apply,
    cluster,
    live,
    settings,
    the_plan,
    writer,
)
from tests.lossy_proxy import lossy_proxy

B, C = "team-b-cq", "team-c-cq"
APPLIED = {**NOMINAL, B: 8, C: 4}
"""The plan of ``DEMAND``: team-c 8 -> 4 (patched first, a decrease), then team-b 4 -> 8."""
TOTAL = sum(NOMINAL.values())


def lose(real: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The patch reaches the server and lands; its answer never comes back."""
    real()
    raise TransientError("patching ClusterQueue: connection reset by peer")


def unavailable(real: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A 503 before the patch reaches the object: nothing lands."""
    raise TransientError("patching ClusterQueue: 503 Service Unavailable")


def refuse(real: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    raise Invalid("admission webhook denied the request", status=422, kind="ClusterQueue", verb="patching")


def crash_after(real: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The patch lands and the process dies before its answer is handled (before any audit row)."""
    real()
    raise Crash()


class FaultyWriter(KubeWriter):
    """The ``n``-th PATCH (from 1) meets ``faults[n]``; with ``blind_after_loss`` the read that follows a lost
    answer fails too (the API unreachable for a moment)."""

    def __init__(self, settings: GpuaasSettings, faults: dict[int, Callable[[Callable[[], dict[str, Any]]],
                                                                        dict[str, Any]]],
                 *, blind_after_loss: bool = False) -> None:
        super().__init__(settings)
        self.faults, self.blind_after_loss = faults, blind_after_loss
        self.patches, self.blind = 0, False

    def patch_cluster_scoped(self, kind: str, name: str, body: dict[str, Any], *,
                             version: str | None = None) -> dict[str, Any]:
        self.patches += 1
        fault = self.faults.get(self.patches)
        def real() -> dict[str, Any]:
            return super(FaultyWriter, self).patch_cluster_scoped(kind, name, body, version=version)
        if fault is None:
            return real()
        self.blind = self.blind_after_loss and fault is lose
        return fault(real)

    def get_cluster_scoped(self, kind: str, name: str, *, version: str | None = None) -> dict[str, Any]:
        if self.blind:
            self.blind = False
            raise TransientError(f"reading ClusterQueue {name}: connection refused")
        return super().get_cluster_scoped(kind, name, version=version)


def rows_of(store: Store, plan_id: int) -> list[AuditEntry]:
    return store.audit(refers_to=[plan_id], limit=None)


def changes(store: Store, plan_id: int) -> list[tuple[str, str, str]]:
    return [(r.name, r.outcome, r.reason.split(":", 1)[0]) for r in rows_of(store, plan_id)
            if r.action == "quota-change"]


# -- a lost answer ---------------------------------------------------------------------------------

def test_a_patch_whose_answer_was_lost_is_read_back_and_audited_as_landed(
        cluster: EmbeddedCluster, store: Store, writer: KubeWriter, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    with lossy_proxy(cluster.api_url) as proxy:
        monkeypatch.setenv("GPUAAS_KUBECONFIG", str(proxy.kubeconfig(cluster.kubeconfig, tmp_path / "proxied")))
        with KubeWriter(load_settings()) as via_proxy:
            real = KubeWriter.patch_cluster_scoped
            calls: list[str] = []

            def second_loses_its_answer(self: KubeWriter, kind: str, name: str, body: dict[str, Any],
                                        **kw: Any) -> dict[str, Any]:
                calls.append(name)
                if len(calls) == 2:  # team-b's increase reaches the server; the connection is reset before its answer
                    proxy.drop_response("PATCH")
                return real(self, kind, name, body, **kw)

            monkeypatch.setattr(KubeWriter, "patch_cluster_scoped", second_loses_its_answer)
            result = apply(store, via_proxy, the_plan(DEMAND))
    assert sum(live(writer).values()) == TOTAL and live(writer) == APPLIED
    assert result.outcome == "applied", result.message
    assert proxy.dropped and calls == [C, B]
    [b_row] = [r for r in rows_of(store, result.plan_id) if r.action == "quota-change" and r.name == B]
    assert (b_row.outcome, b_row.before, (b_row.after or {}).get("h100")) == ("applied", {"h100": 4}, 8)
    assert "answer was lost" in b_row.reason and "it had landed" in b_row.reason
    assert recover_quota_plans(store, writer, flow_run_id=None, now=datetime.now(UTC), gpu_resources=GPU) == []


def test_a_landed_patch_whose_answer_was_lost_is_rolled_back_with_the_rest(
        settings: GpuaasSettings, store: Store, writer: KubeWriter) -> None:
    # team-c's decrease lands without an answer; team-b's increase is refused: team-c must go back to 8.
    with FaultyWriter(settings, {1: lose, 2: refuse}) as faulty:
        result = apply(store, faulty, the_plan(DEMAND))
    assert live(writer) == NOMINAL
    assert result.outcome == "failed" and "stopped after 1 patch" in result.message, result.message
    assert result.message.endswith("rolled back 1")
    assert changes(store, result.plan_id) == [(C, "applied", "apply"), (C, "restored", "rollback")]
    assert rows_of(store, result.plan_id)[-1].outcome == "failed"


def test_a_lost_answer_not_read_back_leaves_the_plan_open_for_the_next_runs_recovery(
        settings: GpuaasSettings, store: Store, writer: KubeWriter) -> None:
    # team-b's increase lands without an answer, and the read-back fails: whether it landed is unknown.
    with FaultyWriter(settings, {2: lose}, blind_after_loss=True) as faulty:
        result = apply(store, faulty, the_plan(DEMAND))
    # Nothing rolled back on a guess: rolling team-c back now would put the cohort at 28 of 24 GPUs.
    assert sum(live(writer).values()) == TOTAL and live(writer) == APPLIED
    rows = rows_of(store, result.plan_id)
    assert not [r for r in rows if r.action == "quota-plan"]  # no completion: the plan is open
    assert result.outcome == "failed" and "the read-back failed" in result.message, result.message
    assert "nothing rolled back" in result.message and "the plan is left open" in result.message
    unknown = rows[-1]
    assert (unknown.action, unknown.name, unknown.outcome) == ("quota-change", B, "unknown")
    assert "whether it landed is unknown" in unknown.reason and unknown.before is None
    # An undo does not race the recovery, and does not call it "nothing to restore" either.
    [undone] = undo_entries(store, writer, [result.plan_id])
    assert undone.result == "skipped" and "still open" in undone.message, undone.message
    [closed] = recover_quota_plans(store, writer, flow_run_id=None, now=datetime.now(UTC), gpu_resources=GPU)
    assert closed.outcome == "failed" and "rolled back 2 of 2" in closed.reason, closed.reason
    assert live(writer) == NOMINAL
    assert [c for c in changes(store, result.plan_id) if c[1] != "unknown"] == [
        (C, "applied", "apply"), (B, "applied", "recovered"), (B, "restored", "rollback"), (C, "restored", "rollback")]
    assert quota_moved_since(store, datetime.now(UTC) - timedelta(hours=1)) == {}  # rolled back: nothing moved


def test_a_rollback_whose_answer_was_lost_and_not_read_back_is_settled_by_the_next_runs_recovery(
        settings: GpuaasSettings, store: Store, writer: KubeWriter) -> None:
    # team-c's decrease lands; team-b's increase is refused; team-c's rollback lands, its answer lost, unreadable.
    with FaultyWriter(settings, {2: refuse, 3: lose}, blind_after_loss=True) as faulty:
        result = apply(store, faulty, the_plan(DEMAND))
    assert live(writer) == NOMINAL
    assert not [r for r in rows_of(store, result.plan_id) if r.action == "quota-plan"]  # left open
    assert result.outcome == "failed" and "the plan is left open" in result.message, result.message
    [closed] = recover_quota_plans(store, writer, flow_run_id=None, now=datetime.now(UTC), gpu_resources=GPU)
    assert closed.outcome == "failed" and f"the rollback of {C} had landed already" in closed.reason, closed.reason
    assert live(writer) == NOMINAL
    assert [c for c in changes(store, result.plan_id) if c[1] != "unknown"] == [
        (C, "applied", "apply"), (C, "restored", "rollback")]
    assert quota_moved_since(store, datetime.now(UTC) - timedelta(hours=1)) == {}
    [undone] = undo_entries(store, writer, [result.plan_id])
    assert undone.result == "no-op", undone.message


# -- an undo cut off --------------------------------------------------------------------------------

def test_an_undo_killed_after_a_patch_landed_is_finished_by_the_next_undo(
        settings: GpuaasSettings, store: Store, writer: KubeWriter) -> None:
    result = apply(store, writer, the_plan(DEMAND))
    assert result.outcome == "applied"
    with FaultyWriter(settings, {1: crash_after}) as killed, pytest.raises(Crash):
        undo_entries(store, killed, [result.plan_id])
    assert live(writer) == {**NOMINAL, C: 4}  # team-b's decrease landed, its row never came
    intents = [r for r in rows_of(store, result.plan_id) if r.action == "restore"]
    assert recover_quota_plans(store, writer, flow_run_id=None, now=datetime.now(UTC), gpu_resources=GPU) == []
    [undone] = undo_entries(store, writer, [result.plan_id])
    assert undone.result == "restored", undone.message
    assert live(writer) == NOMINAL
    [intent] = intents  # written before the first patch
    assert intent.outcome == "planned" and intent.after == {B: {"h100": 4}, C: {"h100": 8}}
    assert changes(store, result.plan_id)[2:] == [(B, "restored", "undo"), (C, "restored", "undo")]
    assert "recovered" in [r for r in rows_of(store, result.plan_id) if r.action == "quota-change"][2].reason
    done = store.get_audit(int(undone.restore_audit_id or 0))
    assert done is not None and (done.action, done.outcome, done.refers_to) == ("restore", "restored", intent.id)
    [again] = undo_entries(store, writer, [result.plan_id])
    assert again.result == "no-op" and "already restored" in again.message


def test_an_undo_whose_answer_was_lost_and_not_read_back_is_settled_by_the_next_undo(
        settings: GpuaasSettings, store: Store, writer: KubeWriter) -> None:
    result = apply(store, writer, the_plan(DEMAND))
    with FaultyWriter(settings, {1: lose}, blind_after_loss=True) as faulty:
        [cut] = undo_entries(store, faulty, [result.plan_id])
    assert live(writer) == {**NOMINAL, C: 4}
    [undone] = undo_entries(store, writer, [result.plan_id])
    assert undone.result == "restored", undone.message
    assert live(writer) == NOMINAL
    assert cut.result == "unknown" and "stays open" in cut.message, cut.message


# -- a rollback that stopped --------------------------------------------------------------------------

def test_an_undo_puts_back_what_a_stopped_rollback_left_in_place(
        settings: GpuaasSettings, store: Store, writer: KubeWriter) -> None:
    # team-c's decrease lands; team-b's increase is refused; the rollback of team-c meets a 503.
    with FaultyWriter(settings, {2: refuse, 3: unavailable}) as faulty:
        result = apply(store, faulty, the_plan(DEMAND))
    assert result.outcome == "failed" and "rollback stopped" in result.message, result.message
    assert live(writer) == {**NOMINAL, C: 4}  # the cohort is 4 GPUs short
    [undone] = undo_entries(store, writer, [result.plan_id])
    assert undone.result == "restored" and C in undone.message, undone.message
    assert live(writer) == NOMINAL
    assert changes(store, result.plan_id) == [(C, "applied", "apply"), (C, "restored", "undo")]
    [again] = undo_entries(store, writer, [result.plan_id])
    assert again.result == "no-op"
    assert "read back, it had not landed" in result.message  # the 503's patch was read back before stopping
