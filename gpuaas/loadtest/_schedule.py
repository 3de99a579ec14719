"""Open-loop Poisson arrival schedules: when each request of a step must leave. Pure.

Open loop means the schedule is fixed before the step starts and every request leaves at its
time whatever the earlier ones are doing; a closed loop (send the next when one returns)
slows down with the server and so measures the client, not the capacity. The gaps are
independent exponential draws with mean ``1/rate`` from a generator seeded with
``(seed, step)``, so a step is repeatable and two steps never share gaps.
"""

from __future__ import annotations

import numpy as np

__all__ = ["poisson_schedule"]


def poisson_schedule(rate_rps: float, *, duration_s: float, max_requests: int, seed: int = 0,
                     step: int = 0) -> list[float]:
    """Send offsets (seconds from the step's start) below ``duration_s``, at most ``max_requests``."""
    if rate_rps <= 0 or duration_s <= 0 or max_requests <= 0:
        return []
    rng = np.random.default_rng([seed, step])
    # enough draws to pass duration_s with overwhelming probability; topped up if not
    out: list[float] = []
    t = 0.0
    while len(out) < max_requests:
        n = min(max_requests - len(out), int(rate_rps * (duration_s - t) + 5 * np.sqrt(rate_rps * duration_s) + 16))
        times = t + np.cumsum(rng.exponential(1.0 / rate_rps, size=n))
        keep = times[times < duration_s]
        out.extend(float(x) for x in keep)
        if len(keep) < len(times):
            break
        t = float(times[-1])
    return out[:max_requests]
