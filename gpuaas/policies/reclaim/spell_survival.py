"""The survival reclaim window: stop an idle spell when what it is expected to save pays for its wake-up.

Why: the clairvoyant limit (:mod:`gpuaas.policies.analysis.clairvoyant`) shows that what separates a
good reclaim from a bad one is knowing, when a spell starts, whether it will be long. A
workload cannot know that, but its recent past says a lot: on the GenAI serving trace a
pod that spent most of its last two hours idle starts spells that last far longer than
one in the middle of its traffic. So each idle spell is put in a context known when it
starts, and the policy learns from the history how spells in that context end:

* context: the share of the preceding ``lookback_s`` (2 h) the same workload spent idle,
  in bands (``SHARE_EDGES``: under 90 %, and 90 % or more; the look-back and the bands were
  chosen on the earlier part of the trace, see ``docs/reclaim-policy.md``). Only idle
  time before the spell starts is counted, so the context is causal; time before a
  workload's first sample counts as busy (a new workload waits longer).
* for every candidate stop time ``w`` (``WINDOWS_MIN``, ``inf`` = never) and context, the
  replay (:func:`gpuaas.policies.reclaim.replay.replay_runs`) of the history says what stopping at
  ``w`` saved per spell and how many wake-ups it cost per spell: the empirical survival
  of spells, censored spells (missing data, end of data) counted exactly as the replay
  counts them. The window is the ``w`` that maximises GPU-minutes saved minus
  ``price_gpu_min`` x wake-ups, per spell.
* a spell still open when the history ends (in the live flow every idle workload's current
  spell is one) has outlasted its elapsed time ``c`` but its end, and whether that end wakes the
  workload, are not known yet. Dropping it would bias every context toward short spells (the
  long ones are the ones still open), so it is counted as the spells of its context that lasted
  longer than ``c`` ended, on average (Kaplan-Meier's redistribution to the right), shrunk toward
  all such spells like any context; one that outlasted every ended spell counts what it saved so
  far and a wake-up for any stop before ``c``;
* past the longest spell the history saw, it cannot rank stops (all score the same, never
  included): there the window is the ski-rental break-even beyond it, not never, which would
  reclaim nothing on a history of short spells however long a spell then lasts;
* a context with few spells is shrunk toward the whole history: its per-spell figures
  are ``(sum + SHRINK_SPELLS x pooled mean) / (n + SHRINK_SPELLS)``, so a band seen
  twice does not get a window of its own from two spells.

The price is what the operator's cold-start budget sets (:mod:`gpuaas.policies.reclaim.cold_start`
sweeps it). What was tried and did worse out of sample, and the evidence for this
choice, is in ``docs/reclaim-policy.md``.

Pure: the idle-run table in (pod then time order, as :func:`~gpuaas.policies.reclaim.replay.idle_runs`
and :class:`~gpuaas.policies.reclaim.run_stream.RunStream` build it), windows and reasons out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpuaas.policies.reclaim.replay import gpu_weights, replay_runs

__all__ = ["LOOKBACK_S", "SHARE_EDGES", "SHRINK_SPELLS", "WINDOWS_MIN", "Outcomes", "SpellOutlook",
           "SurvivalEvidence", "SurvivalWindow", "context_band", "fit_survival", "outcomes", "recent_idle_share"]

LOOKBACK_S = 7200.0
SHARE_EDGES = (0.9,)
WINDOWS_MIN = (1.0, 2.0, 3.0, 5.0, 7.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 180.0, 240.0, math.inf)
SHRINK_SPELLS = 5.0


def recent_idle_share(runs: pd.DataFrame, lookback_s: float = LOOKBACK_S) -> np.ndarray:
    """Per run: the share of ``[start - lookback_s, start)`` its workload spent in earlier idle runs.

    A workload's runs are disjoint and in time order, so its idle time up to ``x`` is the
    lengths of its runs that started before the last one starting at or before ``x``, plus
    the part of that one before ``x``: one binary search per query, whatever the history.
    """
    if runs.empty:
        return np.zeros(0)
    start = runs["start"].to_numpy(dtype=float)
    length = runs["length"].to_numpy(dtype=float)
    codes, _ = pd.factorize(runs["pod"], sort=False)
    origin = float(start.min()) - lookback_s
    span = float(runs["end"].to_numpy(dtype=float).max()) - origin + 1.0
    key = codes * span + (start - origin)  # one increasing axis: pods one after another
    if np.any(np.diff(key) < 0):
        raise ValueError("runs must be in pod then time order")
    before = np.concatenate(([0.0], np.cumsum(length)))
    first = np.searchsorted(codes, codes, side="left")  # each run's workload's first run

    def idle_until(x: np.ndarray) -> np.ndarray:
        q = codes * span + (x - origin)
        j = np.searchsorted(key, q, side="right") - 1
        same = (j >= 0) & (codes[np.maximum(j, 0)] == codes)
        j = np.maximum(j, 0)
        within = np.clip(x - start[j], 0.0, length[j])
        return np.where(same, before[j] - before[first] + within, 0.0)

    share: np.ndarray = np.clip((idle_until(start) - idle_until(start - lookback_s)) / lookback_s, 0.0, 1.0)
    return share


def context_band(runs: pd.DataFrame, lookback_s: float = LOOKBACK_S,
                 edges: Sequence[float] = SHARE_EDGES) -> np.ndarray:
    """Per run, its context: the band (0 .. len(edges)) of its recent idle share."""
    band: np.ndarray = np.digitize(recent_idle_share(runs, lookback_s), edges).astype(int)
    return band


@dataclass(frozen=True)
class Outcomes:
    """What stopping at each candidate window did to each run of a history, replayed once."""

    windows_s: tuple[float, ...]
    saved_gpu_min: np.ndarray  # window x run
    wakeups: np.ndarray  # window x run

    def of(self, runs: np.ndarray) -> Outcomes:
        """The same windows, for the runs ``runs`` selects (a mask or indices): one replay, read per part."""
        return Outcomes(self.windows_s, self.saved_gpu_min[:, runs], self.wakeups[:, runs])


def outcomes(runs: pd.DataFrame, windows_min: Sequence[float] = WINDOWS_MIN) -> Outcomes:
    """``runs`` replayed at each window: one replay at a time, keeping its two figures (a replay's whole
    table, kept for every window, would be most of a large fleet's memory)."""
    windows = tuple(float(w) * 60.0 for w in windows_min)
    saved, wakes = np.zeros((len(windows), len(runs))), np.zeros((len(windows), len(runs)))
    for i, w in enumerate(windows):
        replayed = replay_runs(runs, np.full(len(runs), w))
        saved[i] = replayed["reclaimed_gpu_s"].to_numpy(dtype=float) / 60.0
        wakes[i] = replayed["wakeup"].to_numpy(dtype=float)
    return Outcomes(windows, saved, wakes)


@dataclass(frozen=True)
class SpellOutlook:
    """One context's learned figures: its window and what the history expects of it, per spell."""

    window_s: float
    median_spell_s: float
    saved_gpu_min: float
    wakeups: float
    spells: int
    beyond_history: bool = False
    """The window lies past every spell of the history, which cannot rank such stops: the ski-rental
    break-even after the first stop no spell it saw was still idle at."""


def _duration(seconds: float) -> str:
    minutes = int(round(seconds / 60.0))
    return f"{minutes // 60} h {minutes % 60} m" if minutes >= 60 else f"{minutes} min"


def _band_name(band: int, edges: Sequence[float]) -> str:
    lows = [0.0, *edges]
    if band >= len(edges):
        return f">= {lows[band]:.0%}"
    return f"{lows[band]:.0%}-{edges[band]:.0%}"


@dataclass(frozen=True)
class SurvivalWindow:
    """The fitted policy: one outlook per context band, the price it was fitted for."""

    price_gpu_min: float
    outlooks: tuple[SpellOutlook, ...]
    lookback_s: float = LOOKBACK_S
    edges: tuple[float, ...] = SHARE_EDGES

    def __call__(self, runs: pd.DataFrame) -> np.ndarray:
        if runs.empty:
            return np.zeros(0)
        return self.of_bands(context_band(runs, self.lookback_s, self.edges))

    def of_bands(self, bands: np.ndarray) -> np.ndarray:
        """The window of each run whose context band (:func:`context_band` at this rule's look-back and
        edges) is given: for a caller that scores many rules on the same runs."""
        windows = np.array([o.window_s for o in self.outlooks], dtype=float)
        chosen: np.ndarray = windows[bands]
        return chosen

    def why(self, runs: pd.DataFrame) -> list[str]:
        """Per run, what the policy expected: how long spells like it last, what stopping saves and costs.
        One sentence per context, shared by its runs (a fleet's day holds hundreds of thousands)."""
        said = [self._expected(band) for band in range(len(self.outlooks))]
        return [said[band] for band in context_band(runs, self.lookback_s, self.edges)]

    def _expected(self, band: int) -> str:
        o = self.outlooks[band]
        after = f"spells after {_band_name(band, self.edges)} of the last {self.lookback_s / 3600:g} h idle"
        like = (f"{after} last {_duration(o.median_spell_s)} at the median ({o.spells} seen)"
                if math.isfinite(o.median_spell_s) else f"{after}: more than half outlast the history "
                f"({o.spells} seen)")
        if o.beyond_history:
            return (f"{like}; no stop past the longest of them can be ranked on the history: stopping "
                    f"after {o.window_s / 60:g} min, the break-even at {self.price_gpu_min:g} GPU-min per "
                    "wake-up beyond every spell seen")
        if math.isfinite(o.window_s):
            return (f"{like}; stopping after {o.window_s / 60:g} min saves {o.saved_gpu_min:.1f} GPU-min "
                    f"for {o.wakeups:.2f} expected wake-ups at {self.price_gpu_min:g} GPU-min each")
        return f"{like}; no stop time saves more than its wake-ups cost at {self.price_gpu_min:g} GPU-min each: never"


def _median_spell_s(length: np.ndarray, ended: np.ndarray) -> float:
    """Kaplan-Meier median of spell lengths; spells cut by missing data or the end are censored."""
    if len(length) == 0:
        return math.nan
    order = np.argsort(length, kind="mergesort")
    t, event = length[order], ended[order]
    at_risk = len(t) - np.arange(len(t))
    survival = np.cumprod(np.where(event, 1.0 - 1.0 / at_risk, 1.0))
    below = np.flatnonzero(survival <= 0.5)
    return float(t[below[0]]) if len(below) else math.inf


def _outlasting_means(length: np.ndarray, saved: np.ndarray, wakes: np.ndarray,
                      targets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sums of ``saved`` and ``wakes`` (window x spell) over the spells longer than each target
    length, and how many they are: suffix sums in length order, one binary search per target."""
    order = np.argsort(length, kind="mergesort")
    j = np.searchsorted(length[order], targets, side="right")

    def after(values: np.ndarray) -> np.ndarray:
        """Per window, the sum over the spells from each sorted position on (0 past the last)."""
        suffix = np.cumsum(values[:, order][:, ::-1], axis=1)[:, ::-1]
        return np.concatenate((suffix, np.zeros((values.shape[0], 1))), axis=1)[:, j]

    return after(saved), after(wakes), (len(order) - j).astype(float)


def _open_spells_imputed(runs: pd.DataFrame, seen: Outcomes, chosen: np.ndarray, bands: np.ndarray,
                         shrink: float) -> Outcomes:
    """``seen`` with each open spell's figures replaced by what the ended spells of its band that
    outlasted it did (shrunk toward all ended spells that outlasted it), or, when none did, by what
    it saved so far and one wake-up for any stop before its elapsed time. Savings are carried per
    GPU, so a spell of an 8-GPU workload learns from a 1-GPU one at its own size."""
    if not len(runs):
        return seen
    is_open = runs["ended_by"].to_numpy() == "end"
    targets = np.flatnonzero(chosen & is_open)
    if not len(targets):
        return seen
    gpus = gpu_weights(runs)
    saved, wakes = seen.saved_gpu_min / np.where(gpus > 0, gpus, 1.0)[None, :], seen.wakeups.copy()
    length = runs["length"].to_numpy(dtype=float)
    ended = chosen & ~is_open
    pool_s, pool_k, pool_n = _outlasting_means(length[ended], saved[:, ended], wakes[:, ended], length[targets])
    band_s, band_k, band_n = np.zeros_like(pool_s), np.zeros_like(pool_k), np.zeros_like(pool_n)
    for band in np.unique(bands[targets]):
        at, here = bands[targets] == band, ended & (bands == band)
        band_s[:, at], band_k[:, at], band_n[at] = _outlasting_means(
            length[here], saved[:, here], wakes[:, here], length[targets[at]])
    known = pool_n > 0
    pull = np.where(band_n > 0, shrink, 1.0)  # no ended spell of its band outlasted it: all of them speak
    den = np.where(known, band_n + pull, 1.0)
    share = pull / np.maximum(pool_n, 1.0)
    cols = targets[known]
    saved[:, cols] = ((band_s + share * pool_s) / den)[:, known]
    wakes[:, cols] = ((band_k + share * pool_k) / den)[:, known]
    beyond = targets[~known]  # outlasted every ended spell: what it saved so far, a wake-up if stopped
    if len(beyond):
        stop = np.asarray(seen.windows_s, dtype=float)[:, None]
        elapsed = length[beyond][None, :]
        saved[:, beyond] = np.maximum(0.0, elapsed - stop) / 60.0
        wakes[:, beyond] = (stop < elapsed).astype(float)
    return Outcomes(seen.windows_s, saved * gpus[None, :], wakes)


def _first_untested(seen: Outcomes, runs: np.ndarray) -> int:
    """The first stop at which no spell of ``runs`` (a mask) was still idle: none saved or woke there."""
    touched = np.flatnonzero(((seen.saved_gpu_min[:, runs] > 0) | (seen.wakeups[:, runs] > 0)).any(axis=1))
    return int(touched[-1]) + 1 if len(touched) else 0


def _past_the_history(windows_s: Sequence[float], first_untested: int, j: int, price_gpu_min: float) -> tuple[int, bool]:
    """The stop ``j`` (an index of ``windows_s``), unless it lies past every spell of the history.

    Past the first stop at which no spell of the history was still idle (``first_untested``), every
    stop scores the same on it, never included: the history cannot rank them, and the tie would go
    to never, however long a spell then lasts. There the window is the ski-rental break-even on the
    time beyond that stop: stop once a spell has been idle ``price_gpu_min`` minutes longer (the
    first candidate at or after it). For a one-GPU workload that costs, beyond that stop, at most
    twice what the best stop would have for a spell of any length (deterministic ski rental, before
    the rounding up to a candidate), where never can cost without bound. Returns the index and
    whether that rule set it."""
    if j <= first_untested:
        return j, False
    windows = np.asarray(windows_s, dtype=float)
    k = int(np.searchsorted(windows, windows[first_untested] + 60.0 * price_gpu_min, side="left"))
    k = min(k, len(windows) - 1)
    return k, bool(math.isfinite(windows[k]))


@dataclass(frozen=True)
class _Context:
    """One context's spells, summed per candidate stop: what a fit at any price reads of them."""

    n: int
    """The spells that speak for it (a context never seen and not shrunk: the whole history's)."""
    saved_gpu_min: np.ndarray
    wakeups: np.ndarray
    untested: int
    """The first stop no spell the fit ranks on was still idle at (:func:`_past_the_history`)."""
    median_spell_s: float
    spells: int
    """Spells of this context in the history."""


@dataclass(frozen=True)
class SurvivalEvidence:
    """What a history says about its spells at any price: per context, what every stop saved and cost
    (the open spells imputed), where the history stops ranking stops, and how long spells last.

    Why: none of it depends on the price, and a wake-up budget fits the survival window at every price
    of its ladder (49). Built once, a fit is a few sums per context; what it keeps is a few numbers per
    context and stop, whatever the size of the history."""

    windows_s: tuple[float, ...]
    pooled_saved_gpu_min: np.ndarray
    pooled_wakeups: np.ndarray
    contexts: tuple[_Context, ...]
    shrink: float
    lookback_s: float
    edges: tuple[float, ...]

    @classmethod
    def of(cls, runs: pd.DataFrame, *, history: Outcomes | None = None, mask: np.ndarray | None = None,
           shrink: float = SHRINK_SPELLS, lookback_s: float = LOOKBACK_S,
           edges: Sequence[float] = SHARE_EDGES) -> SurvivalEvidence:
        """The runs where ``mask`` holds (all by default) as evidence; ``history``: :func:`outcomes` of ``runs``."""
        chosen = np.ones(len(runs), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        bands = context_band(runs, lookback_s, edges)
        seen = _open_spells_imputed(runs, history if history is not None else outcomes(runs), chosen, bands, shrink)
        length = runs["length"].to_numpy(dtype=float)
        ended = (runs["ended_by"].to_numpy() == "active") if len(runs) else np.zeros(0, dtype=bool)
        n_all = int(chosen.sum())
        none = np.zeros(len(seen.windows_s))
        pooled_saved = seen.saved_gpu_min[:, chosen].mean(axis=1) if n_all else none
        pooled_wakes = seen.wakeups[:, chosen].mean(axis=1) if n_all else none
        untested_all = _first_untested(seen, chosen)
        contexts = []
        for band in range(len(edges) + 1):
            spells = chosen & (bands == band)
            here, n = spells, int(spells.sum())
            if n + shrink <= 0:  # a band never seen, unshrunk: the whole history speaks for it
                here, n = chosen, n_all
            of = spells if spells.any() else chosen
            contexts.append(_Context(n, seen.saved_gpu_min[:, here].sum(axis=1), seen.wakeups[:, here].sum(axis=1),
                                     untested_all if shrink > 0 else _first_untested(seen, here),
                                     _median_spell_s(length[of], ended[of]), int(spells.sum())))
        return cls(seen.windows_s, pooled_saved, pooled_wakes, tuple(contexts), float(shrink), float(lookback_s),
                   tuple(float(e) for e in edges))

    def fit(self, price_gpu_min: float) -> SurvivalWindow:
        """The survival window at ``price_gpu_min`` GPU-minutes per wake-up: per context, the stop that
        maximises GPU-minutes saved less the price of its wake-ups, per spell, shrunk toward the whole
        history's."""
        if price_gpu_min < 0:
            raise ValueError("price_gpu_min must be >= 0")
        shrink = self.shrink
        pooled = self.pooled_saved_gpu_min - price_gpu_min * self.pooled_wakeups
        outlooks = []
        for c in self.contexts:
            per_spell = max(c.n + shrink, 1e-9)
            score = (c.saved_gpu_min - price_gpu_min * c.wakeups + shrink * pooled) / per_spell
            j = len(score) - 1 - int(np.argmax(score[::-1]))  # ties: the later stop, fewer wake-ups
            j, beyond = _past_the_history(self.windows_s, c.untested, j, price_gpu_min)
            saved = (c.saved_gpu_min[j] + shrink * self.pooled_saved_gpu_min[j]) / per_spell
            wakes = (c.wakeups[j] + shrink * self.pooled_wakeups[j]) / per_spell
            outlooks.append(SpellOutlook(self.windows_s[j], c.median_spell_s, float(saved), float(wakes), c.spells,
                                         beyond))
        return SurvivalWindow(float(price_gpu_min), tuple(outlooks), self.lookback_s, self.edges)


def fit_survival(runs: pd.DataFrame, *, price_gpu_min: float, history: Outcomes | None = None,
                 mask: np.ndarray | None = None, shrink: float = SHRINK_SPELLS,
                 lookback_s: float = LOOKBACK_S, edges: Sequence[float] = SHARE_EDGES) -> SurvivalWindow:
    """Fit on the runs where ``mask`` holds (all by default); ``history``: :func:`outcomes` of ``runs``.
    At several prices, build the :class:`SurvivalEvidence` once and fit it at each."""
    evidence = SurvivalEvidence.of(runs, history=history, mask=mask, shrink=shrink, lookback_s=lookback_s, edges=edges)
    return evidence.fit(price_gpu_min)
