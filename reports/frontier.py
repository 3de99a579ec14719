"""The reclaim frontier as a plot: reclaimed GPU-hours against wake-ups, one line per policy."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from gpuaas.errors import ConfigError
from gpuaas.policies.analysis import FrontierRow

__all__ = ["plot_frontier"]


def plot_frontier(rows: Sequence[FrontierRow], path: Path, title: str) -> None:
    """GPU-hours against wake-ups, one line per policy (fixed, adaptive, the clairvoyant limit), as PNG
    (matplotlib's Agg backend: no display)."""
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
        for _, row in part.iterrows():
            ax.annotate(f"{row['parameter']:g}{unit}", (row["wakeups"], row["reclaimed_gpu_hours"]),
                        textcoords="offset points", xytext=(4, 4), fontsize=7)
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
