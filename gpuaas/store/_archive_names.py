"""The flow and action of the audit row an archive appends, shared by the archive and ``gpuaas db status``."""

from __future__ import annotations

__all__ = ["ARCHIVE_ACTION", "ARCHIVE_FLOW"]

ARCHIVE_FLOW = "cli"
ARCHIVE_ACTION = "archive"
