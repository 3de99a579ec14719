"""The incident review's plot: the fleet over the window, where the store has no collect, and when gpuaas decided.

Workloads and GPUs are different units, so each has its own axis (the backlog on the left, GPUs on the right).
A window that reaches back before the first stored collect is shaded and says "no data before HH:MM UTC":
an empty stretch must not read as a quiet fleet. Each action that began in the window is a tick on the time
axis, applied ones (a line across the plot too) told apart from dry-run decisions and from apply-mode decisions
that changed nothing, with their counts in the legend.
"""

from __future__ import annotations

from datetime import datetime

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.transforms import blended_transform_factory

from gpuaas.models import Outcome
from gpuaas.policies.incident import IncidentReview
from gpuaas.policy import Mode

__all__ = ["MARKS", "figure", "mark_of", "no_data_before"]

_BACKLOG, _IDLE, _APPLIED, _DRY, _REFUSED = "#4c78a8", "#e15759", "#59a14f", "#9d9d9d", "#f28e2b"
MARKS = {"applied": ("applied", _APPLIED), "dry-run": ("dry-run decisions", _DRY),
         "not applied": ("apply mode, not applied", _REFUSED)}
"""Each kind of decision mark: its legend words and colour."""
_DONE = frozenset({Outcome.applied, Outcome.restored, Outcome.released})


def _utc(at: datetime | pd.Timestamp) -> pd.Timestamp:
    t = pd.Timestamp(at)
    return t.tz_convert("UTC") if t.tzinfo else t.tz_localize("UTC")


def no_data_before(review: IncidentReview) -> pd.Timestamp | None:
    """The first stored collect, where the window starts before it (a minute or more); else None."""
    if review.fleet.empty:
        return None
    first = _utc(pd.to_datetime(review.fleet["at"], utc=True).min())
    return first if first - _utc(review.start) >= pd.Timedelta(minutes=1) else None


def mark_of(mode: str, result: str) -> str:
    """``applied`` (it changed the cluster), ``dry-run`` (decided only), or ``not applied`` (an apply-mode
    decision skipped, deferred, failed or still open)."""
    if result in _DONE:
        return "applied"
    return "dry-run" if mode == Mode.dry_run else "not applied"


def figure(review: IncidentReview, clock: str) -> Figure | None:
    """The plot, or None without stored history; ``clock``: the time axis's format (``%H:%M``)."""
    fleet = review.fleet
    if fleet.empty:
        return None
    from matplotlib.dates import DateFormatter

    from reports._plots import plt

    fig, ax = plt.subplots(figsize=(9, 3.4))
    gpu_ax = ax.twinx()
    at = [t.to_pydatetime() for t in pd.to_datetime(fleet["at"], utc=True)]
    ax.step(at, fleet["pending_workloads"], where="post", label="backlog (pending workloads, left)", color=_BACKLOG)
    if fleet["idle_gpus"].notna().any():
        gpu_ax.step(at, fleet["idle_gpus"], where="post", label="idle GPUs (right)", color=_IDLE)
    gpu_ax.step(at, fleet["pending_gpus"], where="post", label="pending GPUs (right)", color=_BACKLOG, linestyle=":")
    ax.set_ylabel("backlog (workloads)")
    gpu_ax.set_ylabel("GPUs")
    # matplotlib converts datetimes itself (its date units); its stubs only say float
    ax.set_xlim(review.start, review.end)  # type: ignore[arg-type]
    ax.set_ylim(bottom=0)
    gpu_ax.set_ylim(bottom=0)
    handles = _no_data(ax, review, clock) + _decisions(ax, review)
    ax.xaxis.set_major_formatter(DateFormatter(clock, tz="UTC"))  # type: ignore[no-untyped-call]
    ax.set_xlabel("time (UTC)")
    lines = [h for a in (ax, gpu_ax) for h in a.get_legend_handles_labels()[0]]
    ax.legend(handles=lines + handles, loc="upper left", bbox_to_anchor=(1.1, 1.0), fontsize="small",
              borderaxespad=0)
    fig.autofmt_xdate()
    return fig


def _no_data(ax: object, review: IncidentReview, clock: str) -> list[Line2D]:
    """Shade the window before the first collect and say so on it."""
    first = no_data_before(review)
    if first is None:
        return []
    from matplotlib.axes import Axes

    assert isinstance(ax, Axes)
    start = _utc(review.start).to_pydatetime()
    ax.axvspan(start, first.to_pydatetime(), color="#d9d9d9", alpha=0.6, hatch="//", linewidth=0)
    share = (first - _utc(review.start)) / (_utc(review.end) - _utc(review.start))
    middle = (_utc(review.start) + (first - _utc(review.start)) / 2).to_pydatetime()
    ax.text(middle, 0.5, f"no data before {first.strftime(clock)} UTC",
            transform=blended_transform_factory(ax.transData, ax.transAxes), ha="center", va="center",
            rotation=0 if share > 0.3 else 90, color="#555555")
    return []


def _decisions(ax: object, review: IncidentReview) -> list[Line2D]:
    """A tick on the time axis per action that began in the window; applied ones also a line across the plot."""
    from matplotlib.axes import Axes

    assert isinstance(ax, Axes)
    when = {e.audit_id: e.at for e in review.events}
    marks: dict[str, list[datetime]] = {kind: [] for kind in MARKS}
    for o in review.actions:
        if o.audit_id in when:
            marks[mark_of(o.mode, o.result)].append(when[o.audit_id])
    rug = blended_transform_factory(ax.transData, ax.transAxes)
    handles = []
    for kind, times in marks.items():
        if not times:
            continue
        words, colour = MARKS[kind]
        ax.plot(times, [0.03] * len(times), linestyle="none", marker="|", markersize=14, markeredgewidth=1.6,  # type: ignore[arg-type]
                color=colour, transform=rug, clip_on=False)
        if kind == "applied":
            for t in times:
                ax.axvline(t, color=colour, linewidth=0.8, alpha=0.7)  # type: ignore[arg-type]
        handles.append(Line2D([], [], linestyle="none", marker="|", markersize=10, markeredgewidth=1.6,
                              color=colour, label=f"{words} ({len(times)})"))
    return handles
