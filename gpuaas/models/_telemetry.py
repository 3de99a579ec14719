"""What counts as missing telemetry: shared by the PromQL that measures gaps and the rules that judge them."""

from __future__ import annotations

__all__ = ["MAX_GAP_INTERVALS", "MAX_GAP_S"]

MAX_GAP_INTERVALS = 3.0
"""Longest stretch without a sample, in sample intervals, that a window may contain and still count."""
MAX_GAP_S = 120.0
"""A gap longer than this between two samples of one pod is missing data (the replays' idle runs break there)."""
