"""What every undoer returns, and its signature: ``undo.py`` dispatches to one per audit action kind."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from gpuaas.actions._kube_writer import KubeWriter
from gpuaas.models import Outcome
from gpuaas.store import AuditEntry, Store

__all__ = ["Undoer", "Undone"]


class Undone(NamedTuple):
    result: Outcome
    """restored | no-op | skipped | failed | unknown (the write's answer was lost and could not be read back)"""
    message: str
    audit_id: int | None = None
    """The row that completes the undo (restored, skipped, failed), when one was written."""


Undoer = Callable[[Store, KubeWriter, AuditEntry, str | None], Undone]
"""(store, writer, the intent row of the action to reverse, flow run id) -> what happened."""
