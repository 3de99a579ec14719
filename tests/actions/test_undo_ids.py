"""Which change ``gpuaas undo ID`` undoes for each kind of audit row, and that an id of no change is refused.

``audit list`` shows a quota plan's moves as ``quota-change`` rows, one per ClusterQueue: the id an operator
copies is often one of them, and it undoes its plan. A restore, a release or a row of no change at all cannot
be undone: the undo is refused (exit 1) naming what the row is and the id to undo instead, never a no-op that
reads as success while the change stays in place.
"""

from __future__ import annotations

from typer.testing import CliRunner

from gpuaas.actions import KubeWriter, undo_entries
from gpuaas.actions._quota_patches import gpu_nominal
from gpuaas.actions.quotas import apply_quota_plan
from gpuaas.cli.app import app
from gpuaas.models import Outcome
from gpuaas.policies.quotas import QueueDemand, QuotaLimits, plan_quotas
from gpuaas.policy import Mode
from gpuaas.store import AuditEntry, Store
from tests.actions.rebalance_scenario import NOMINAL, QUEUES, cluster, settings, writer  # noqa: F401  (the fixtures)

GPU = ["nvidia.com/gpu"]
KIND = "ClusterQueue"
LIMITS = QuotaLimits(max_step_gpus=8, max_step_percent=100, max_total_moved_gpus=32, hysteresis_gpus=1)
DEMAND = {"team-a-cq": 12.0, "team-b-cq": 8.0, "team-c-cq": 4.0}
"""team-b needs 8: +4 from team-c, the only queue above its demand."""


def live(w: KubeWriter) -> dict[str, int]:
    return {q: gpu_nominal(w.get_cluster_scoped(KIND, q), GPU)["h100"] for q in QUEUES}


def _applied_plan(store: Store, w: KubeWriter) -> int:
    plan = plan_quotas([QueueDemand(q, {"h100": NOMINAL[q]}, {"h100": DEMAND[q]}) for q in QUEUES], LIMITS)
    result = apply_quota_plan(store, w, "c", plan, mode=Mode.apply, degraded=None, flow_run_id=None, evidence={},
                              gpu_resources=GPU)
    assert result.outcome == Outcome.applied and live(w) != NOMINAL, result.message
    return int(result.plan_id)


def _rows(store: Store, plan_id: int, action: str) -> list[AuditEntry]:
    return [r for r in store.audit(refers_to=[plan_id], limit=None) if r.action == action]


def test_a_quota_change_row_undoes_its_plan_and_the_restore_row_is_refused(store: Store, writer: KubeWriter) -> None:
    plan_id = _applied_plan(store, writer)
    change = _rows(store, plan_id, "quota-change")[0]
    [undone] = undo_entries(store, writer, [int(change.id or 0)])
    assert (undone.result, undone.action) == (Outcome.restored, "quota-plan"), undone.message
    assert live(writer) == NOMINAL
    # The undo's own row names the plan it put back: undoing it is refused, and says which id is the change.
    restore = _rows(store, plan_id, "restore")[0]
    [refused] = undo_entries(store, writer, [int(restore.id or 0)])
    assert refused.result == Outcome.skipped
    assert refused.message.startswith(f"audit #{restore.id} is a restore row (planned) of the quota-plan #{plan_id},")
    assert refused.message.endswith(f"the change it belongs to is #{plan_id} (gpuaas undo {plan_id})")
    assert live(writer) == NOMINAL


def test_gpuaas_undo_of_a_quota_change_row_puts_the_quota_back(store: Store, writer: KubeWriter) -> None:
    plan_id = _applied_plan(store, writer)
    change = _rows(store, plan_id, "quota-change")[0]
    out = CliRunner().invoke(app, ["undo", str(change.id)])
    assert out.exit_code == 0, out.output
    assert live(writer) == NOMINAL


def _row(store: Store, action: str, outcome: str, refers_to: int | None = None, mode: str = "apply") -> AuditEntry:
    return store.append(AuditEntry(flow="reclaim", action=action, kind="Deployment", namespace="team-a", name="dep",
                                   mode=mode, outcome=outcome, reason="test", refers_to=refers_to))


def test_a_restore_or_a_release_row_is_refused_naming_the_change_to_undo(store: Store) -> None:
    """Nothing is written: the writer is never reached (``None`` here). A decision never carried out (deferred) is
    still a no-op: nothing it decided is in place."""
    reclaim = _row(store, "reclaim", Outcome.planned)
    restore = _row(store, "restore", Outcome.planned, reclaim.id)
    restored = _row(store, "restore", Outcome.restored, restore.id)
    hold = _row(store, "deadline-hold", Outcome.planned)
    release = _row(store, "deadline-release", Outcome.planned, hold.id)
    other = _row(store, "collect", Outcome.applied)
    deferred = _row(store, "reclaim", Outcome.deferred, mode="dry-run")
    results = undo_entries(store, None, [int(restored.id or 0), int(release.id or 0),  # type: ignore[arg-type]
                                         int(other.id or 0), int(deferred.id or 0)])
    assert [r.result for r in results] == [Outcome.skipped] * 3 + [Outcome.no_op]
    assert results[0].message == (
        f"audit #{restored.id} is a restore row (restored) of the reclaim #{reclaim.id}, not a change gpuaas can undo: "
        f"nothing undone; the change it belongs to is #{reclaim.id} (gpuaas undo {reclaim.id})")
    assert results[1].message.endswith(f"(gpuaas undo {hold.id})")
    assert results[2].message.startswith(f"audit #{other.id} is a collect row (applied), not a change gpuaas can undo")


def test_gpuaas_undo_of_a_restore_row_exits_1(store: Store, writer: KubeWriter) -> None:
    plan_id = _applied_plan(store, writer)
    assert undo_entries(store, writer, [plan_id])[0].result == Outcome.restored
    restore = _rows(store, plan_id, "restore")[0]
    out = CliRunner().invoke(app, ["undo", str(restore.id)])
    assert out.exit_code == 1, out.output
    assert out.stderr.strip().splitlines()[-1] == f"error: 1 of 1 not undone (#{restore.id} skipped); see its row's message"
