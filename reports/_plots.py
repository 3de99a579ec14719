"""The reports' one way to draw: matplotlib's Agg backend (no display, no network), each figure
returned as base64 PNG so that a markdown artifact or an HTML page carries it inline."""

from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first
from matplotlib.figure import Figure  # noqa: E402

__all__ = ["drawn", "plt", "png_base64"]

_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7f, 0xa0))}
"""Control characters (C0, DEL, C1) as the escapes Python writes them with."""


def drawn(text: object) -> str:
    """``text`` as a plot may draw it: a name from the cluster or a file written out as the tables write it (an ESC is
    ``\\x1b``: no font has a glyph for it, and matplotlib warns on stderr and draws a box), and ``$`` escaped so that
    mathtext does not read a tenant named ``a$b$`` as a formula."""
    return str(text).translate(_CONTROL).replace("$", r"\$")


def png_base64(fig: Figure) -> str:
    """The figure as base64 PNG; the figure is closed (a long-running worker must not keep them)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")
