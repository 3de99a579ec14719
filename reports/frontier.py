"""The reclaim frontier as a plot: reclaimed GPU-hours against wake-ups, one line per policy."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from gpuaas.errors import ConfigError
from gpuaas.policies.analysis import FrontierRow

__all__ = ["plot_frontier"]


def plot_frontier(rows: Sequence[FrontierRow], path: Path, title: str) -> None:
    """GPU-hours against wake-ups, one line per policy (fixed, adaptive, the clairvoyant limit) and the
    adaptive context's ceiling at the adaptive rows, as PNG (matplotlib's Agg backend: no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame = pd.DataFrame([r.to_dict() for r in rows])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for policy, marker, unit in (("fixed", "o", " min"), ("adaptive", "s", "/d"), ("clairvoyant", "^", None)):
        part = frame[frame["policy"] == policy].sort_values("wakeups")
        if part.empty:
            continue
        label = "clairvoyant (the limit)" if policy == "clairvoyant" else policy
        ax.plot(part["wakeups"], part["reclaimed_gpu_hours"], marker=marker, label=label,
                linestyle="--" if policy == "clairvoyant" else "-")
        if unit is None:
            continue
        # Budgets that chose the same rule share one point and one label. The adaptive line lies above
        # the fixed one: its labels go above and to the left, the fixed ones below and to the right, so
        # a budget that chose a fixed window does not hide that window's label.
        above = policy == "adaptive"
        for (wakeups, hours), same in part.groupby(["wakeups", "reclaimed_gpu_hours"], sort=False):
            ax.annotate(", ".join(f"{p:g}" for p in same["parameter"]) + unit, (wakeups, hours),
                        textcoords="offset points", xytext=(-5, 5) if above else (5, -10),
                        ha="right" if above else "left", fontsize=7,
                        bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8})
    ceiling = frame[(frame["policy"] == "adaptive") & frame["context_ceiling_gpu_hours"].notna()]
    if not ceiling.empty:
        ceiling = ceiling.sort_values("wakeups")
        ax.plot(ceiling["wakeups"], ceiling["context_ceiling_gpu_hours"], marker="v", markersize=5, linestyle=":",
                color="grey", zorder=1,
                label="adaptive's context in hindsight (its ceiling)")
    ax.set_xlabel("wake-ups (cold starts)")
    ax.set_ylabel("reclaimed GPU-hours")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend()
    try:
        fig.savefig(path, format="png", dpi=110, bbox_inches="tight")
    except OSError as exc:
        raise ConfigError(f"cannot write the plot ({exc.strerror or exc})", file=path) from exc
    finally:
        plt.close(fig)
