"""The largest quantities any input may hold: shared by the policy file and the planners' own checks."""

from __future__ import annotations

__all__ = ["MAX_GPUS", "MAX_SECONDS"]

MAX_GPUS = 10_000_000
"""A GPU count (a quota, a demand, a job's or a step's GPUs); above ten million it is a typo, and past
2**53 the planners' floats no longer hold it to the GPU, so a cap could be broken by rounding."""

MAX_SECONDS = 1e12
"""A time in a trace (Unix seconds, or seconds since its start), or a duration: some 30,000 years. A value past it
is a typo, and would overflow a replay's clock."""
