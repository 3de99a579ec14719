"""The trace layouts a command reads (``--trace-format``), in a module of its own: ``cluster up`` and ``replay
rebalance`` both offer the choice, and importing it from either command would load that command's replay."""

from __future__ import annotations

from enum import Enum

__all__ = ["TraceFormat"]


class TraceFormat(str, Enum):
    philly = "philly"
    itp = "itp"
