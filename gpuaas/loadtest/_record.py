"""Load-test runs in the store: one audit row per run, and the latest one for a service.

Why the audit log: a load test is something gpuaas *did* to an endpoint (deliberately, maybe
against production), so it belongs with the other actions an operator reviews after an
incident; and its evidence (the sweep, the capacity, the files) is what the cost report and
the planners read back as "the latest load test of this service", with its age.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlmodel import col, select

from gpuaas.loadtest._outputs import summary
from gpuaas.loadtest._sweep import SweepRun
from gpuaas.policies.cost import CapacityResult
from gpuaas.store import AuditEntry, Outcome, Store

__all__ = ["ACTION", "FLOW", "latest_load_test", "record_load_test"]

FLOW = "load_test"
ACTION = "load-test"


def _target(run: SweepRun) -> tuple[str, str | None, str]:
    if run.config.service:
        namespace, name = run.config.service.split("/")
        return "InferenceService", namespace, name
    return "Endpoint", None, run.config.model


def record_load_test(store: Store, run: SweepRun, capacity: CapacityResult, files: dict[str, Path],
                     flow_run_id: str | None = None) -> AuditEntry:
    kind, namespace, name = _target(run)
    evidence: dict[str, Any] = {**summary(run, capacity), "files": {k: str(v) for k, v in files.items()}}
    reason = capacity.reason if not run.stopped else f"{capacity.reason}; {run.stopped}"
    return store.append(AuditEntry(
        flow=FLOW, flow_run_id=flow_run_id, action=ACTION, kind=kind, namespace=namespace, name=name,
        mode="apply", outcome=Outcome.applied.value if capacity.met else Outcome.failed.value,
        reason=reason[:2000], evidence=evidence,
    ))


def latest_load_test(store: Store, *, namespace: str | None, name: str, model_name: str | None = None
                     ) -> AuditEntry | None:
    """The newest recorded load test of ``namespace/name`` (or, failing that, of its model)."""
    base = select(AuditEntry).where(col(AuditEntry.flow) == FLOW, col(AuditEntry.action) == ACTION)
    newest = (col(AuditEntry.created_at).desc(), col(AuditEntry.id).desc())
    with store.session() as session:
        found = session.exec(base.where(col(AuditEntry.kind) == "InferenceService",
                                        col(AuditEntry.namespace) == namespace,
                                        col(AuditEntry.name) == name).order_by(*newest).limit(1)).first()
        if found is None and model_name:
            found = session.exec(base.where(col(AuditEntry.kind) == "Endpoint", col(AuditEntry.name) == model_name)
                                 .order_by(*newest).limit(1)).first()
        return found
