"""The trace layouts a command reads (``--trace-format``), in a module of its own: ``cluster up`` and ``replay
rebalance`` both offer the choice, and importing it from either command would load that command's replay.

The span a trace may cover (two years from its first job) is the readers' own rule
(:data:`gpuaas.cluster.traces.MAX_REPLAY_SECONDS`), so that every command reading a trace holds it."""

from __future__ import annotations

from enum import Enum

__all__ = ["TraceFormat"]


class TraceFormat(str, Enum):
    philly = "philly"
    itp = "itp"
