"""Read GPU-trace CSVs into the frames :mod:`gpuaas.policies.reclaim.replay` replays.

Why a loader of its own: the replay is pure and trusts its input, so every check on a
file happens here, once, and a bad file is reported by name, line and column instead of as a
pandas traceback deep in a groupby (the file itself is read by :mod:`gpuaas.sources.csv_table`).

Accepted layouts (the Alibaba GenAI 2026 release and a plain one):

* utilisation: ``value`` (duty cycle), ``timestamp_anon`` or ``timestamp`` (Unix seconds up to the end of
  the year 9999, at most two years after the first), ``container_ip`` or ``pod`` (pod id). Several files (e.g.
  the part files) are concatenated. Units: ``percent`` (0-100), ``fraction`` (0-1, multiplied by 100) or
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
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from gpuaas.errors import ConfigError
from gpuaas.sources.csv_table import read_csv_table, where

__all__ = ["LAST_SECOND", "MAX_SPAN_S", "Unit", "load_qps", "load_utilization"]

Unit = Literal["auto", "percent", "fraction"]

_TIME = ("timestamp_anon", "timestamp")
_POD = ("container_ip", "pod")
LAST_SECOND = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()
"""The latest a sample may be taken (253402300799): the replay prints its times as dates (the first line, the
refits, ``--reclaims``), and a date ends with the year 9999, so a later time would end the command in an error
about a year instead of one about the file."""
MAX_SPAN_S = 2 * 365 * 86_400
"""How far after a file's first sample (the earliest of all the files) its last may be: two years, as the job
traces of ``gpuaas replay rebalance`` and ``deadlines`` may span. The published GenAI trace spans a day; a
``--budget`` replay refits every ``--refit-hours`` (0.01 h at the least) across the whole span, so two years is
at most some 1.75 million refits (about ten seconds), where a stray time near the end of the year 9999 would be
some 7 billion (it would not end)."""
_TIMES = f"must be a finite number from 0 to {LAST_SECOND:.0f} (Unix seconds to the end of the year 9999)"
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
    return _numbers(df, path, column, outside=_TIMES, high=LAST_SECOND)


def _check_span(read: Sequence[tuple[Path, pd.DataFrame, str, pd.DataFrame]]) -> None:
    """Refuse the first row (the files in the order given, each in file order) taken more than
    :data:`MAX_SPAN_S` after the earliest sample of all the files, naming its file, line and time column.

    ``read``: per file, its path, its cells (indexed by line), its time column and the frame parsed from them."""
    starts = [(float(frame["t"].min()), df[column].iloc[int(frame["t"].to_numpy().argmin())])
              for _, df, column, frame in read if len(frame)]
    if not starts:
        return
    first, first_cell = min(starts)
    for path, df, column, frame in read:
        late = np.flatnonzero(frame["t"].to_numpy() - first > MAX_SPAN_S)
        if len(late):
            row = int(late[0])
            raise ConfigError(f"a replay holds samples up to {MAX_SPAN_S:,} s (two years) after the first "
                              f"({first_cell[:40]!r}), got {df[column].iloc[row][:40]!r}", file=path,
                              field=where(int(df.index[row]), column))


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
        read.append((path, df, time_col,
                     pd.DataFrame({"pod": pods, "t": _times(df, path, time_col), "value": values})))
    top = max((float(frame["value"].max()) for _, _, _, frame in read if len(frame)), default=0.0)
    scale = 100.0 if unit == "fraction" or (unit == "auto" and top <= 1.0) else 1.0
    for path, df, _, frame in read:
        over = np.flatnonzero(frame["value"].to_numpy() * scale > 100.0 + 1e-9)
        if len(over):  # the first such cell, where it is: the fix is in that file or in --unit
            row = int(over[0])
            read_as = "a fraction" if scale == 100.0 else "a percentage"
            raise ConfigError(f"duty cycle above 100 % ({df['value'].iloc[row][:40]!r} read as {read_as}); "
                              "is --unit right?", file=path, field=where(int(df.index[row]), "value"))
    _check_span(read)
    util = pd.concat([frame for _, _, _, frame in read], ignore_index=True)
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
