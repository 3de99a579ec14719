"""The reclaim frontier as a plot (reclaimed GPU-hours against wake-ups, one line per policy), and the sentence
that leads a frontier whose every row is 0, saying why.

Why the sentence lives here: a frontier of zeros is read as "no window can reclaim anything" unless the reader
learns that the scored part held nothing to score (the usual cause: every idle spell started in the calibration
part), and the plot of such a frontier is an empty frame that says the same, not a point at (0, 0) on axes that
run negative.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from gpuaas.errors import ConfigError
from gpuaas.phrases import counted
from gpuaas.policies.analysis import FrontierRow

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["frontier_figure", "nothing_scored_headline", "plot_frontier"]

def _all_zero(rows: Sequence[FrontierRow]) -> bool:
    return all(r.reclaimed_gpu_hours == 0 and r.wakeups == 0 for r in rows)


def _clock(t: float, span: tuple[float, float]) -> str:
    """A time in UTC: ``18:14 UTC`` where the span lies within one day, else with its date."""
    at = datetime.fromtimestamp(t, UTC)
    same_day = datetime.fromtimestamp(span[0], UTC).date() == datetime.fromtimestamp(span[1], UTC).date()
    return at.strftime("%H:%M UTC" if same_day else "%Y-%m-%d %H:%M UTC")


def nothing_scored_headline(rows: Sequence[FrontierRow], runs: pd.DataFrame, *, pods: int,
                            span: tuple[float, float], split_t: float | None, threshold_pct: float,
                            from_prometheus: bool) -> str | None:
    """The frontier's first line when every row reclaims 0 GPU-hours for 0 wake-ups, in numbers: no samples, no
    idle spell, none that starts in the scored part (``start >= split_t``, as the frontier scores), or none long
    enough to stop. None when some row is not 0: the frontier's own headline then says what it found."""
    if not rows or not _all_zero(rows):
        return None
    longer = "a longer --since" if from_prometheus else "a longer trace"
    hours = (span[1] - span[0]) / 3600.0
    if not pods:
        where = ("Prometheus returned no GPU duty-cycle samples for the --since window (and --namespace, if given)"
                 if from_prometheus else "the input holds no duty-cycle samples; check the --utilization files")
        return f"Reclaim frontier: nothing to replay, {where}."
    if runs.empty:
        noun = "workload" if from_prometheus else "pod"
        on = f"the one {noun}" if pods == 1 else f"any of the {counted(pods, noun)}"
        return (f"Reclaim frontier: no idle spell (duty cycle <= {threshold_pct:g} %) on {on} in the {hours:.1f} h "
                f"read: every row is 0; give {longer}, or a higher --threshold.")
    start = runs["start"].to_numpy(dtype=float)
    scored = runs[start >= split_t] if split_t is not None else runs
    part = "" if split_t is None else (f"the scored part (after {_clock(split_t, span)}, the last "
                                       f"{(span[1] - split_t) / 3600.0:.1f} h)")
    if scored.empty:
        spells = "the one idle spell starts" if len(runs) == 1 else f"all {len(runs):,} idle spells start"
        return (f"Reclaim frontier: no idle spell starts in {part}: {spells} before it, so every row is 0; give "
                f"{longer}, or --calibrate 0 to score every spell (then nothing is chosen out of sample).")
    spells = "the one idle spell" if len(scored) == 1 else f"the longest of the {len(scored):,} idle spells"
    if part:
        spells += f" that start{'s' if len(scored) == 1 else ''} in {part}"
    return (f"Reclaim frontier: every row is 0: {spells} lasts "
            f"{float(scored['length'].max()) / 60.0:.0f} min, too short for any row to stop; give {longer}.")


def frontier_figure(rows: Sequence[FrontierRow], title: str, *, empty_note: str | None = None) -> Figure:
    """GPU-hours against wake-ups, one line per policy (fixed, adaptive, the clairvoyant limit) and the adaptive
    context's ceiling at the adaptive rows. Both axes start at 0 (neither can be negative), the wake-ups in whole
    numbers, and the legend stands under the axes, where it hides no point and no label. Where every row is 0 the
    figure is an empty frame that says so (``empty_note`` says why), not one point on a scale of hundredths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.set_xlabel("wake-ups (cold starts)")
    ax.set_ylabel("reclaimed GPU-hours")
    ax.set_title(title, fontsize=9)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if not rows or _all_zero(rows):
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xticks([0])
        ax.set_yticks([0])
        note = "Nothing to plot: every row reclaims 0 GPU-hours for 0 wake-ups."
        if empty_note:  # the command's first line, whose "Reclaim frontier" the title says already
            kept = re.sub(r"(\d) ", "\\1\u00a0", empty_note.removeprefix("Reclaim frontier: "))  # "3.0 h" on one line
            note += "\n\n" + "\n".join(textwrap.wrap(kept, 70))
        ax.text(0.5, 0.5, note, transform=ax.transAxes, ha="center", va="center", fontsize=8, wrap=True)
        return fig
    frame = pd.DataFrame([r.to_dict() for r in rows])
    for policy, marker in (("fixed", "o"), ("adaptive", "s"), ("clairvoyant", "^")):
        part = frame[frame["policy"] == policy].sort_values("wakeups")
        if part.empty:
            continue
        label = "clairvoyant (the limit)" if policy == "clairvoyant" else policy
        ax.plot(part["wakeups"], part["reclaimed_gpu_hours"], marker=marker, label=label, clip_on=False,
                linestyle="--" if policy == "clairvoyant" else "-")
    ceiling = frame[(frame["policy"] == "adaptive") & frame["context_ceiling_gpu_hours"].notna()]
    if not ceiling.empty:
        ceiling = ceiling.sort_values("wakeups")
        ax.plot(ceiling["wakeups"], ceiling["context_ceiling_gpu_hours"], marker="v", markersize=5, linestyle=":",
                color="grey", zorder=1, clip_on=False, label="adaptive's context in hindsight (its ceiling)")
    top = float(pd.concat([frame["reclaimed_gpu_hours"], frame["context_ceiling_gpu_hours"].dropna()]).max())
    ax.set_xlim(0, max(float(frame["wakeups"].max()) * 1.05, 1.0))
    ax.set_ylim(0, max(top * 1.08, 1.0))
    ax.grid(alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=8, frameon=False)
    _label_points(ax, frame)
    return fig


@dataclass
class _Label:
    text: str
    at: tuple[float, float]
    """The point, in data coordinates."""
    x: float
    y: float
    """The point, in points (1/72 inch) from the figure's corner."""
    dx: float
    """Where the label starts, in points right of the point (left where negative)."""
    dy: float
    """Where the label goes, in points above the point (below where negative)."""


_FONT = 7.0
_LINE = 9.5
"""Points between two labels' baselines: a 7-point label and its box."""
_BESIDE = 45.0
"""Where an adaptive label with no room to its left starts: right of the fixed labels' column ("120 min")."""


def _label_points(ax: Axes, frame: pd.DataFrame) -> None:
    """One label per point (budgets that chose the same rule share a point and a label), none over another.

    The adaptive line lies above the fixed one: its labels go above and to the left, the fixed ones below and to
    the right, so a budget that chose a fixed window does not hide that window's label. An adaptive label with no
    room to its left (a point at or near 0 wake-ups) goes right of the fixed labels, a thin line to its point.
    Labels in one column that would overlap (points stacked at the same wake-ups) move down one under the other,
    each with a thin line to its point."""
    to_points = 72.0 / ax.figure.dpi
    left = ax.transAxes.transform((0.0, 0.0))[0] * to_points
    labels = []
    for policy, unit in (("adaptive", "/d"), ("fixed", " min")):
        part = frame[frame["policy"] == policy]
        for (wakeups, hours), same in part.groupby(["wakeups", "reclaimed_gpu_hours"], sort=False):
            text = ", ".join(f"{p:g}" for p in same["parameter"]) + unit
            x, y = (float(v) * to_points for v in ax.transData.transform((wakeups, hours)))
            roomy = x - left > len(text) * _FONT * 0.6 + 8
            above = policy == "adaptive"
            dx = (-5.0 if roomy else _BESIDE) if above else 5.0
            labels.append(_Label(text, (float(wakeups), float(hours)), x, y, dx, 5.0 if above else -10.0))
    placed: list[_Label] = []
    for label in sorted(labels, key=lambda lb: -(lb.y + lb.dy)):  # top to bottom: each moves down past those above
        want = label.dy
        while clash := [o.y + o.dy for o in placed if o.dx == label.dx and abs(o.x - label.x) < 50
                        and abs(o.y + o.dy - label.y - label.dy) < _LINE]:
            label.dy = min(clash) - _LINE - label.y  # strictly lower each time: ends below every label it met
        placed.append(label)
        moved = abs(label.dy - want) > 1.0 or label.dx == _BESIDE
        ax.annotate(label.text, label.at, textcoords="offset points", xytext=(label.dx, label.dy),
                    ha="left" if label.dx > 0 else "right", va="baseline", fontsize=_FONT, annotation_clip=False,
                    bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8},
                    arrowprops={"arrowstyle": "-", "color": "grey", "lw": 0.5, "shrinkA": 0, "shrinkB": 3}
                    if moved else None)


def plot_frontier(rows: Sequence[FrontierRow], path: Path, title: str, *, empty_note: str | None = None) -> None:
    """:func:`frontier_figure` as PNG at ``path`` (matplotlib's Agg backend: no display)."""
    fig = frontier_figure(rows, title, empty_note=empty_note)  # chooses the Agg backend before pyplot is imported
    import matplotlib.pyplot as plt

    try:
        fig.savefig(path, format="png", dpi=110, bbox_inches="tight")
    except OSError as exc:
        raise ConfigError(f"cannot write the plot ({exc.strerror or exc})", file=path) from exc
    finally:
        plt.close(fig)
