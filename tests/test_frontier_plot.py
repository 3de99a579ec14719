"""The frontier PNG (``reports.frontier.plot_frontier``) as a reader sees it, checked on the drawn figure.

Covers: both axes start at 0 (wake-ups and GPU-hours cannot be negative), on a frontier whose every wake-up count
is 0 (every spell ran to the end of the history), on one spread over hundreds of wake-ups, and on one whose every
row is 0, which is an empty frame that says why; the legend's box covers no marker and no label; no label covers
another. The figure is the one ``plot_frontier`` saves: it is caught at ``savefig``, so the PNG written is the
figure checked.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from gpuaas.policies.analysis import FrontierRow
from reports.frontier import plot_frontier

FIXED_MIN = (5, 10, 15, 20, 30, 45, 60, 90, 120)


def _rows(fixed: Sequence[tuple[float, int]], adaptive: tuple[float, int, float],
          clairvoyant: Sequence[tuple[float, int]]) -> list[FrontierRow]:
    hours, wakeups, ceiling = adaptive
    return [*(FrontierRow("fixed", m, h, w) for m, (h, w) in zip(FIXED_MIN, fixed, strict=True)),
            *(FrontierRow("adaptive", b, hours, wakeups, context_ceiling_gpu_hours=ceiling)
              for b in (0.25, 0.5, 1, 2, 4, 8, 16)),
            *(FrontierRow("clairvoyant", m, h, w) for m, (h, w) in zip(FIXED_MIN, clairvoyant, strict=True))]


NO_WAKEUPS = _rows([(60.8, 0), (59.8, 0), (58.9, 0), (57.9, 0), (57.2, 0), (54.3, 0), (51.6, 0), (46.1, 0),
                    (40.6, 0)], (57.2, 0, 62.3), [(61.7, 0)] * 9)
"""The walkthrough's ``--calibrate 0`` frontier: four spells that ran to the end of the history, none woke."""
SPREAD = _rows([(546, 1333), (447, 886), (377, 652), (324, 478), (246, 321), (181, 126), (144, 78), (100, 38),
                (69, 24)], (307, 335, 309), [(546, 1333), (530, 886), (501, 652), (466, 478), (414, 321),
                                             (311, 126), (272, 78), (228, 38), (201, 24)])
"""The GenAI trace's frontier, chosen on the first half and scored on the second."""
ZEROS = [FrontierRow(r.policy, r.parameter, 0.0, 0) for r in NO_WAKEUPS]


Drawn = tuple[Figure, RendererAgg]


@pytest.fixture
def saved(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Drawn]]:
    """The figures ``plot_frontier`` saves, each drawn as it was saved (before the figure is closed)."""
    figures: list[Drawn] = []
    save = Figure.savefig

    def keep(fig: Figure, *args: Any, **kwargs: Any) -> None:
        save(fig, *args, **kwargs)
        canvas = FigureCanvasAgg(fig)
        canvas.draw()  # type: ignore[no-untyped-call]
        figures.append((fig, canvas.get_renderer()))  # type: ignore[no-untyped-call]

    monkeypatch.setattr(Figure, "savefig", keep)
    yield figures


def _drawn(rows: list[FrontierRow], path: Path, figures: list[Drawn], note: str | None = None) -> Drawn:
    if note is None:
        plot_frontier(rows, path, "Reclaim frontier")
    else:
        plot_frontier(rows, path, "Reclaim frontier", empty_note=note)
    assert path.read_bytes().startswith(b"\x89PNG")
    (drawn,) = figures
    return drawn


def _markers(fig: Figure) -> list[Bbox]:
    """Every plotted point's marker, in display pixels."""
    ax = fig.axes[0]
    boxes = []
    for line in ax.get_lines():
        if not isinstance(line, Line2D) or line.get_marker() in (None, "None", ""):
            continue
        radius = line.get_markersize() / 2 * fig.dpi / 72
        for x, y in ax.transData.transform(np.asarray(line.get_xydata())):
            boxes.append(Bbox.from_extents(x - radius, y - radius, x + radius, y + radius))
    return boxes


@pytest.mark.parametrize("rows", [NO_WAKEUPS, SPREAD], ids=["no-wake-ups", "spread"])
def test_both_axes_start_at_0(rows: list[FrontierRow], tmp_path: Path, saved: list[Drawn]) -> None:
    ax = _drawn(rows, tmp_path / "f.png", saved)[0].axes[0]
    assert ax.get_xlim()[0] == 0 and ax.get_ylim()[0] == 0
    top = max(max(r.reclaimed_gpu_hours, r.context_ceiling_gpu_hours or 0) for r in rows)
    assert ax.get_ylim()[1] >= top and ax.get_xlim()[1] >= max(r.wakeups for r in rows)


@pytest.mark.parametrize("rows", [NO_WAKEUPS, SPREAD], ids=["no-wake-ups", "spread"])
def test_the_legend_covers_no_marker_and_no_label(rows: list[FrontierRow], tmp_path: Path,
                                                   saved: list[Drawn]) -> None:
    fig, renderer = _drawn(rows, tmp_path / "f.png", saved)
    legend = fig.axes[0].get_legend()
    assert legend is not None
    box = legend.get_window_extent(renderer)
    markers = _markers(fig)
    assert len(markers) == 9 + 7 + 9 + 7  # the fixed, adaptive and clairvoyant rows, and the ceiling
    assert not [m for m in markers if box.overlaps(m)]
    labels = [t for t in fig.axes[0].texts if t.get_text()]
    assert labels and not [t.get_text() for t in labels if box.overlaps(t.get_window_extent(renderer))]


@pytest.mark.parametrize("rows", [NO_WAKEUPS, SPREAD], ids=["no-wake-ups", "spread"])
def test_no_label_covers_another(rows: list[FrontierRow], tmp_path: Path, saved: list[Drawn]) -> None:
    """Nine windows at 0 wake-ups stand in one column: their labels move apart, each with a line to its point."""
    fig, renderer = _drawn(rows, tmp_path / "f.png", saved)
    # the words only: a label moved apart reaches its point by a line, which its annotation's extent includes
    boxes = [(t.get_text(), Text.get_window_extent(t, renderer)) for t in fig.axes[0].texts]
    assert {text for text, _ in boxes} >= {f"{m} min" for m in FIXED_MIN}
    covered = [(a, b) for i, (a, box) in enumerate(boxes) for b, other in boxes[i + 1:] if box.overlaps(other)]
    assert not covered


def test_a_frontier_of_zeros_is_an_empty_frame_that_says_why(tmp_path: Path, saved: list[Drawn]) -> None:
    why = "Reclaim frontier: no idle spell starts in the scored part (after 18:14 UTC, the last 3.0 h)"
    ax = _drawn(ZEROS, tmp_path / "f.png", saved, note=why)[0].axes[0]
    assert ax.get_xlim() == (0, 1) and ax.get_ylim() == (0, 1)
    assert not ax.get_lines() and ax.get_legend() is None
    (text,) = ax.texts
    said = " ".join(text.get_text().replace("\u00a0", " ").split())
    assert said.startswith("Nothing to plot: every row reclaims 0 GPU-hours for 0 wake-ups.")
    assert "no idle spell starts in the scored part (after 18:14 UTC, the last 3.0 h)" in said
