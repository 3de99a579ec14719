"""The history an embedded cluster replays before it starts: fine steps recently, coarse ones before.

A 24-hour history of a 16,000-GPU fleet at the 60 s sample interval is ~10^8 samples to simulate,
write and backfill before the first query. What the flows read does not need all of it: the idle
and coverage rules count every sample of the GPU activity series, but only over their windows
(30 minutes by default), and the cost report and the quota planner aggregate over hours and days,
where one sample every few minutes gives the same averages. So the history is stepped at the
scenario's sample interval for its last ``fine`` span and at ``coarse`` before it; inside the fine
span the slow per-GPU series (framebuffer, power, temperature, XID: read as the latest value, or the
maximum over the window) are kept only on the coarse grid, counted back from the end, so that
every one of them still has a sample at the end of the history and every few minutes before it.
"""

from __future__ import annotations

import gc
import itertools
from collections.abc import Callable, Iterable, Iterator
from datetime import timedelta
from pathlib import Path

from gpuaas.cluster.prometheus import Backfill, PrometheusServer
from gpuaas.cluster.telemetry import Sample, write_openmetrics

__all__ = ["BLOCK_MS", "COARSE_GRID_SERIES", "backfill_history", "history_steps", "thin"]

BLOCK_MS = 2 * 3600 * 1000
"""promtool's block span: it parses its whole input once per 2-hour window the input covers."""

COARSE_GRID_SERIES = frozenset({"DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_POWER_USAGE",
                                "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_XID_ERRORS"})
"""dcgm series that no coverage rule counts: written on the coarse grid only, also in the fine span."""


def history_steps(history: timedelta, step: timedelta, coarse: timedelta | None,
                  fine: timedelta) -> Iterator[tuple[timedelta, bool]]:
    """``(dt, on_grid)`` per step after the first instant: coarse steps, then ``step`` for ``fine``.

    ``on_grid``: the instant reached lies a whole number of coarse steps before the end (always
    true without ``coarse``). Without ``coarse``, or with one no longer than ``step``, every step is fine.
    """
    if coarse is None or coarse <= step:
        for _ in range(int(history / step)):
            yield step, True
        return
    coarse_n = max(0, int((history - fine) / coarse))
    for _ in range(coarse_n):
        yield coarse, True
    rest = history - coarse_n * coarse
    fine_n = int(rest / step)
    for i in range(1, fine_n + 1):
        yield step, (rest - i * step) % coarse == timedelta(0)


def thin(samples: list[Sample], on_grid: bool) -> list[Sample]:
    """The samples a step writes: all on the coarse grid, without the slow GPU series off it."""
    if on_grid:
        return samples
    return [s for s in samples if s[0] not in COARSE_GRID_SERIES]


def _windows(steps: Iterable[list[Sample]]) -> Iterator[tuple[int | None, list[Sample]]]:
    """Each step with the 2-hour window (epoch-aligned, as promtool's) its instant falls in."""
    window: int | None = None
    for step in steps:
        if step:
            window = int(step[0][3] * 1000) // BLOCK_MS
        yield window, step


def backfill_history(steps: Iterable[list[Sample]], prometheus: PrometheusServer, workdir: Path,
                     progress: Callable[[str], None] = lambda message: None) -> int:
    """Backfill time-ordered steps, one OpenMetrics file and one promtool run per 2-hour window.

    One file for a whole day made promtool 2.42 parse it twelve times (and hold all of it in
    memory); per window each sample is parsed once, and promtool turns one window into blocks
    while the next one is simulated and written. Returns the sample count.
    """
    count, running = 0, None
    # The replay allocates millions of short-lived tuples next to a store of 100,000 objects: with the
    # cyclic collector on, its full passes over that store were half of a 16,000-GPU replay.
    collecting = gc.isenabled()
    gc.disable()
    try:
        for i, (_, group) in enumerate(itertools.groupby(_windows(steps), key=lambda pair: pair[0])):
            path = workdir / f"history-{i}.om"
            written = write_openmetrics((step for _, step in group), path)
            count += written
            _finish(running)
            running = None
            if written:
                progress(f"backfilling {count:,} samples into Prometheus")
                running = prometheus.start_backfill(path)
            else:
                path.unlink(missing_ok=True)
        _finish(running)
    except BaseException:
        if running is not None:
            running.kill()
            running.source.unlink(missing_ok=True)
        raise
    finally:
        if collecting:
            gc.enable()
    return count


def _finish(running: Backfill | None) -> None:
    if running is not None:
        try:
            running.wait()
        finally:
            running.source.unlink(missing_ok=True)
