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
choosing per context maximises the sum (:func:`hindsight_bound`; ties go to the longer window,
fewer wake-ups for the same value). The bound at every number of wake-ups at once
(:func:`hindsight_curve`) is exact: each context's best points form a concave chain, and the
family's is their steps taken in order of GPU-minutes per wake-up, steepest first; every price's
best choice is one of its corners.

Pure: the replayed outcomes and a context per run in, points or a curve out.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from gpuaas.policies.reclaim import Outcomes

__all__ = ["HindsightCurve", "HindsightPoint", "hindsight_bound", "hindsight_curve"]


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
    saved, wakes = _per_context(outcomes, contexts)
    value = saved - price_gpu_min * wakes
    best = value.shape[0] - 1 - np.argmax(value[::-1], axis=0)  # the last maximum: the longer window
    columns = np.arange(saved.shape[1])
    return HindsightPoint(price_gpu_min, float(saved[best, columns].sum()) / 60.0,
                          int(round(float(wakes[best, columns].sum()))),
                          tuple(outcomes.windows_s[w] for w in best))


def _per_context(outcomes: Outcomes, contexts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GPU-minutes saved and wake-ups summed per window and context (window x context, contexts in
    the order of ``np.unique``)."""
    contexts = np.asarray(contexts)
    if contexts.shape != (outcomes.saved_gpu_min.shape[1],):
        raise ValueError(f"one context per run: {contexts.shape[0]} contexts for "
                         f"{outcomes.saved_gpu_min.shape[1]} runs")
    labels, index = np.unique(contexts, return_inverse=True)
    member = np.eye(len(labels))[index]  # run x context
    return outcomes.saved_gpu_min @ member, outcomes.wakeups @ member


@dataclass(frozen=True)
class HindsightCurve:
    """The bound for every number of wake-ups: its corners, fewest wake-ups first (GPU-hours rising).

    Between two corners the bound is linear: a mix of the two corners' windows, run by run, reaches
    any point between them."""

    wakeups: tuple[float, ...]
    gpu_hours: tuple[float, ...]

    def hours_at(self, wakeups: float) -> float | None:
        """The most GPU-hours any window per context reaches with at most ``wakeups`` wake-ups; None
        below the fewest any such choice causes."""
        if not self.wakeups or wakeups < self.wakeups[0] - 1e-9:
            return None
        return float(np.interp(wakeups, self.wakeups, self.gpu_hours))


def _upper_chain(wakes: np.ndarray, saved: np.ndarray) -> list[tuple[float, float]]:
    """One context's corners: from its fewest wake-ups (with the most saved there), the points no mix
    of others beats, each step gaining less per wake-up than the one before."""
    chain: list[tuple[float, float]] = []
    for k, s in sorted(zip(wakes.tolist(), saved.tolist(), strict=True), key=lambda p: (p[0], -p[1])):
        if chain and (k == chain[-1][0] or s <= chain[-1][1]):
            continue  # the same wake-ups for less, or more wake-ups for no more saved
        while len(chain) >= 2:
            (k0, s0), (k1, s1) = chain[-2], chain[-1]
            if (s1 - s0) * (k - k1) > (s - s1) * (k1 - k0):
                break
            chain.pop()  # on or under the line from the corner before it to this point
        chain.append((k, s))
    return chain


def hindsight_curve(outcomes: Outcomes, contexts: np.ndarray) -> HindsightCurve:
    """The bound at every number of wake-ups, exact (what :func:`hindsight_bound` gives at one price).

    Contexts do not interact, so the family's curve starts where every context takes its fewest
    wake-ups and then takes the contexts' steps in order of GPU-minutes per wake-up, steepest first."""
    saved, wakes = _per_context(outcomes, contexts)
    if not saved.size:
        return HindsightCurve((0.0,), (0.0,))
    k0, s0, steps = 0.0, 0.0, []
    for column in range(saved.shape[1]):
        chain = _upper_chain(wakes[:, column], saved[:, column])
        k0, s0 = k0 + chain[0][0], s0 + chain[0][1]
        steps += [(b[0] - a[0], b[1] - a[1]) for a, b in pairwise(chain)]
    steps.sort(key=lambda step: step[1] / step[0], reverse=True)
    k = np.cumsum([k0, *(dk for dk, _ in steps)])
    s = np.cumsum([s0, *(ds for _, ds in steps)])
    return HindsightCurve(tuple(float(x) for x in k), tuple(float(x) / 60.0 for x in s))
