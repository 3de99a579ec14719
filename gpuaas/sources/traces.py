"""Read GPU-trace CSVs into the frames :mod:`gpuaas.policies.reclaim.replay` replays.

Why a loader of its own: the replay is pure and trusts its input, so every check on a
file happens here, once, and a bad file is reported by name, line and column instead of as a
pandas traceback deep in a groupby (the file itself is read by :mod:`gpuaas.sources.csv_table`).

Accepted layouts (the Alibaba GenAI 2026 release and a plain one):

* utilisation: ``value`` (duty cycle), ``timestamp_anon`` or ``timestamp`` (Unix seconds, 0 to 1e12),
  ``container_ip`` or ``pod`` (pod id). Several files (e.g. the part files) are
  concatenated. Units: ``percent`` (0-100), ``fraction`` (0-1, multiplied by 100) or
  ``auto`` (fraction when no value exceeds 1 across all files, else percent). Two rows
  for the same pod and time keep the larger value (activity wins; a file given twice is
  harmless).
* qps: ``timestamp_anon``/``timestamp``, ``value`` (requests per second),
  ``container_ip``/``pod``; ``request_type`` is ignored. Rows without a pod (the release's
  "API Requests") cannot be attributed and are dropped; rows for the same pod and time
  are summed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from gpuaas.errors import ConfigError
from gpuaas.models import MAX_SECONDS
from gpuaas.sources.csv_table import read_csv_table, where

__all__ = ["Unit", "load_qps", "load_utilization"]

Unit = Literal["auto", "percent", "fraction"]

_TIME = ("timestamp_anon", "timestamp")
_POD = ("container_ip", "pod")
_TIMES = f"must be a finite number from 0 to {MAX_SECONDS:.0e}"
"""What a time must be, worded as the job traces word it: a negative or absurd time is a typo, not a sample."""


def _read(path: Path) -> pd.DataFrame:
    """The file's cells as text, indexed by the line each row is on, so that an error can name it."""
    table = read_csv_table(path)
    return pd.DataFrame(table.rows, columns=list(table.header), index=table.lines, dtype=str)


def _column(df: pd.DataFrame, path: Path, names: Sequence[str]) -> str:
    for name in names:
        if name in df.columns:
            return name
    found = ", ".join(map(str, df.columns)) or "none"
    raise ConfigError(f"missing column (columns found: {found})", file=path, field=" or ".join(names))


def _numbers(df: pd.DataFrame, path: Path, column: str, *, outside: str, high: float = np.inf) -> np.ndarray:
    """The column as floats; the first cell that is not a finite number, or is outside 0..``high`` (``outside``
    says what it must be), is refused with its line."""
    values: np.ndarray = pd.to_numeric(df[column], errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(~np.isfinite(values))
    if len(bad):
        row = int(bad[0])
        raise ConfigError(f"not a number: {df[column].iloc[row][:40]!r} ({len(bad)} bad rows)", file=path,
                          field=where(int(df.index[row]), column))
    out = np.flatnonzero((values < 0) | (values > high))
    if len(out):
        row = int(out[0])
        raise ConfigError(f"{outside}, got {df[column].iloc[row][:40]!r}", file=path,
                          field=where(int(df.index[row]), column))
    return values


def _times(df: pd.DataFrame, path: Path, column: str) -> np.ndarray:
    return _numbers(df, path, column, outside=_TIMES, high=MAX_SECONDS)


def _pods(df: pd.DataFrame, path: Path, column: str, *, drop_empty: bool) -> tuple[pd.DataFrame, np.ndarray]:
    empty = (df[column] == "").to_numpy()
    if empty.any() and not drop_empty:
        row = int(np.flatnonzero(empty)[0])
        raise ConfigError("empty pod id", file=path, field=where(int(df.index[row]), column))
    return df.loc[~empty], df[column][~empty].to_numpy()


def load_utilization(paths: Sequence[Path | str], unit: Unit = "auto") -> pd.DataFrame:
    """Concatenate duty-cycle CSVs into ``pod``, ``t``, ``value`` (percent), sorted."""
    if not paths:
        raise ConfigError("at least one utilisation CSV is needed", field="--utilization")
    read = []
    for raw in paths:
        path = Path(raw)
        df = _read(path)
        time_col, pod_col = _column(df, path, _TIME), _column(df, path, _POD)
        _column(df, path, ("value",))
        df, pods = _pods(df, path, pod_col, drop_empty=False)
        values = _numbers(df, path, "value", outside="negative duty cycle")
        read.append((path, df, pd.DataFrame({"pod": pods, "t": _times(df, path, time_col), "value": values})))
    top = max((float(frame["value"].max()) for _, _, frame in read if len(frame)), default=0.0)
    scale = 100.0 if unit == "fraction" or (unit == "auto" and top <= 1.0) else 1.0
    for path, df, frame in read:
        over = np.flatnonzero(frame["value"].to_numpy() * scale > 100.0 + 1e-9)
        if len(over):  # the first such cell, where it is: the fix is in that file or in --unit
            row = int(over[0])
            read_as = "a fraction" if scale == 100.0 else "a percentage"
            raise ConfigError(f"duty cycle above 100 % ({df['value'].iloc[row][:40]!r} read as {read_as}); "
                              "is --unit right?", file=path, field=where(int(df.index[row]), "value"))
    util = pd.concat([frame for _, _, frame in read], ignore_index=True)
    util["value"] = util["value"] * scale
    util = util.groupby(["pod", "t"], as_index=False, sort=True)["value"].max()
    return util


def load_qps(path: Path | str) -> pd.DataFrame:
    """Read a request-rate CSV into ``pod``, ``t``, ``qps``, summed per pod and time."""
    path = Path(path)
    df = _read(path)
    time_col, pod_col = _column(df, path, _TIME), _column(df, path, _POD)
    _column(df, path, ("value",))
    df, pods = _pods(df, path, pod_col, drop_empty=True)
    qps = pd.DataFrame({"pod": pods, "t": _times(df, path, time_col),
                        "qps": _numbers(df, path, "value", outside="negative request rate")})
    return qps.groupby(["pod", "t"], as_index=False, sort=True)["qps"].sum()
