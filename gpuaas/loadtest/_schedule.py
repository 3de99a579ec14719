"""Open-loop Poisson arrival schedules: when each request of a step must leave. Pure.

Open loop means the schedule is fixed before the step starts and every request leaves at its
time whatever the earlier ones are doing; a closed loop (send the next when one returns)
slows down with the server and so measures the client, not the capacity.

A step is a Poisson process of rate ``r`` on ``[0, T)`` *conditioned on its count*
``n = round(r * T)`` (at least one): given ``n``, Poisson arrival times are ``n`` sorted independent uniform
draws on the window. The gaps stay exponential in shape (coefficient of variation near 1),
but a short step is not also a lucky or unlucky one in how many requests it offers, which in
a 3-second step would swing the offered rate by +-10 % and blur the knee. A step is never cut
short by a request cap: a schedule that would need more than ``max_requests`` is an error (the
config refuses such a rate before anything is sent). The generator is seeded with ``(seed, step)``:
a step is repeatable and two steps never share gaps.
"""

from __future__ import annotations

import numpy as np

__all__ = ["poisson_schedule"]


def poisson_schedule(rate_rps: float, *, duration_s: float, max_requests: int, seed: int = 0,
                     step: int = 0) -> list[float]:
    """Send offsets (seconds from the step's start), increasing, below the window; ValueError over ``max_requests``."""
    if rate_rps <= 0 or duration_s <= 0 or max_requests <= 0:
        return []
    n = max(1, int(round(rate_rps * duration_s)))  # a step offers at least one request
    if n > max_requests:
        raise ValueError(f"{rate_rps:g} rps for {duration_s:g} s is {n} requests, over the cap of {max_requests}")
    rng = np.random.default_rng([seed, step])
    return [float(t) for t in np.sort(rng.uniform(0.0, duration_s, size=n))]
