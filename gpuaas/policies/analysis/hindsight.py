"""The hindsight bound of a context family: the best window per context, chosen on the runs it scores.

Why: when a policy falls short of the clairvoyant limit, the gap has two causes that call for
different fixes. Either it learned its windows badly (more history, better pooling), or its
context cannot tell a long idle run from a short one when the run starts, and no amount of
history will help. The bound separates them. For a family of contexts (say the share of the
last two hours a workload spent idle, in bands), the best any policy of that family can do on
a set of runs is to give each context the one window that does best on exactly those runs: a
window chosen with hindsight. A policy that learns its windows from other runs can only match
it. If the bound itself stays below an aim, the family cannot reach the aim on those runs.

For a price ``p`` in GPU-minutes per wake-up, the best window of a context maximises
GPU-minutes saved − ``p`` × wake-ups over the context's runs; contexts do not interact, so
choosing per context maximises the sum. Sweeping ``p`` traces the bound's frontier, one point
per price. Ties go to the longer window (fewer wake-ups for the same value).

Pure: the replayed outcomes and a context per run in, points out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gpuaas.policies.reclaim import Outcomes

__all__ = ["HindsightPoint", "hindsight_bound", "hindsight_frontier"]


@dataclass(frozen=True)
class HindsightPoint:
    """The bound at one price: what the best window per context reclaims, and the wake-ups it costs."""

    price_gpu_min: float
    reclaimed_gpu_hours: float
    wakeups: int
    windows_s: tuple[float, ...]
    """The window chosen for each context, in the order of ``np.unique(contexts)``."""


def hindsight_bound(outcomes: Outcomes, contexts: np.ndarray, price_gpu_min: float) -> HindsightPoint:
    """The best window of each context on these very runs, at ``price_gpu_min`` per wake-up.

    ``outcomes`` holds, per candidate window and run, the GPU-minutes saved and the wake-ups caused;
    ``contexts`` one label per run (the columns of ``outcomes``).
    """
    contexts = np.asarray(contexts)
    if contexts.shape != (outcomes.saved_gpu_min.shape[1],):
        raise ValueError(f"one context per run: {contexts.shape[0]} contexts for "
                         f"{outcomes.saved_gpu_min.shape[1]} runs")
    labels, index = np.unique(contexts, return_inverse=True)
    member = np.eye(len(labels))[index]  # run x context
    saved, wakes = outcomes.saved_gpu_min @ member, outcomes.wakeups @ member  # window x context sums
    value = saved - price_gpu_min * wakes
    best = value.shape[0] - 1 - np.argmax(value[::-1], axis=0)  # the last maximum: the longer window
    columns = np.arange(len(labels))
    return HindsightPoint(price_gpu_min, float(saved[best, columns].sum()) / 60.0,
                          int(round(float(wakes[best, columns].sum()))),
                          tuple(outcomes.windows_s[w] for w in best))


def hindsight_frontier(outcomes: Outcomes, contexts: np.ndarray,
                       prices_gpu_min: Sequence[float]) -> list[HindsightPoint]:
    """The bound at each price, fewest wake-ups first."""
    points = [hindsight_bound(outcomes, contexts, p) for p in prices_gpu_min]
    return sorted(points, key=lambda p: (p.wakeups, -p.reclaimed_gpu_hours))
