"""The reports' one way to draw: matplotlib's Agg backend (no display, no network), each figure
returned as base64 PNG so that a markdown artifact or an HTML page carries it inline."""

from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first
from matplotlib.figure import Figure  # noqa: E402

__all__ = ["plt", "png_base64"]


def png_base64(fig: Figure) -> str:
    """The figure as base64 PNG; the figure is closed (a long-running worker must not keep them)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")
