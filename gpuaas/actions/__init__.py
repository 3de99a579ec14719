"""Actions: the only code that writes to the cluster (stop, restore), each write audited first."""

from gpuaas.actions._kube_writer import KubeWriter
from gpuaas.actions._lock_owner import holder_is_dead, new_holder
from gpuaas.actions._patches import RECLAIMED_ANNOTATION, StopPlan, reclaimed_by, restore_patch, stop_patch, stop_plan
from gpuaas.actions._recovery import Settled, recover_interrupted, settled_writes
from gpuaas.actions.reclaim import (
    ActionResult,
    already_decided,
    execute_decisions,
    recently_restored,
)
from gpuaas.actions.undo import UNDOERS, UndoResult, undo_entries

__all__ = [
    "RECLAIMED_ANNOTATION", "UNDOERS", "ActionResult", "KubeWriter", "Settled", "StopPlan", "UndoResult", "already_decided",
    "execute_decisions", "holder_is_dead", "new_holder", "reclaimed_by", "recently_restored", "recover_interrupted", "restore_patch",
    "settled_writes", "stop_patch", "stop_plan", "undo_entries",
]
