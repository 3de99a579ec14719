"""Read GPU-trace CSVs into the frames :mod:`gpuaas.policies.reclaim.replay` replays.

Why a loader of its own: the replay is pure and trusts its input, so every check on a
file happens here, once, and a bad file is reported by name and column instead of as a
pandas traceback deep in a groupby.

Accepted layouts (the Alibaba GenAI 2026 release and a plain one):

* utilisation: ``value`` (duty cycle), ``timestamp_anon`` or ``timestamp`` (Unix seconds),
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

__all__ = ["Unit", "load_qps", "load_utilization"]

Unit = Literal["auto", "percent", "fraction"]

_TIME = ("timestamp_anon", "timestamp")
_POD = ("container_ip", "pod")


def _read(path: Path) -> pd.DataFrame:
    if path.is_dir():
        raise ConfigError("is a directory, not a CSV file", file=path)
    if not path.is_file():
        raise ConfigError("no such file", file=path)
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError as exc:
        raise ConfigError("empty file: no header row (expected a CSV with a header)", file=path) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8: byte 0x{exc.object[exc.start]:02x} ({exc.reason})", file=path) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", file=path) from exc
    except pd.errors.ParserError as exc:
        raise ConfigError(f"not a readable CSV ({' '.join(str(exc).split())})", file=path) from exc


def _column(df: pd.DataFrame, path: Path, names: Sequence[str]) -> str:
    for name in names:
        if name in df.columns:
            return name
    found = ", ".join(map(str, df.columns)) or "none"
    raise ConfigError(f"missing column (columns found: {found})", file=path, field=" or ".join(names))


def _numbers(df: pd.DataFrame, path: Path, column: str) -> np.ndarray:
    values: np.ndarray = pd.to_numeric(df[column].str.strip(), errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(~np.isfinite(values))
    if len(bad):
        row = int(bad[0])
        raise ConfigError(
            f"line {row + 2}: not a number: {df[column].iloc[row][:40]!r} ({len(bad)} bad rows)",
            file=path,
            field=column,
        )
    return values


def _pods(df: pd.DataFrame, path: Path, column: str, *, drop_empty: bool) -> tuple[pd.DataFrame, np.ndarray]:
    pods = df[column].str.strip()
    empty = (pods == "").to_numpy()
    if empty.any() and not drop_empty:
        row = int(np.flatnonzero(empty)[0])
        raise ConfigError(f"line {row + 2}: empty pod id", file=path, field=column)
    return df.loc[~empty], pods[~empty].to_numpy()


def load_utilization(paths: Sequence[Path | str], unit: Unit = "auto") -> pd.DataFrame:
    """Concatenate duty-cycle CSVs into ``pod``, ``t``, ``value`` (percent), sorted."""
    if not paths:
        raise ConfigError("at least one utilisation CSV is needed", field="--utilization")
    frames = []
    for raw in paths:
        path = Path(raw)
        df = _read(path)
        value_col, time_col, pod_col = "value", _column(df, path, _TIME), _column(df, path, _POD)
        _column(df, path, (value_col,))
        df, pods = _pods(df, path, pod_col, drop_empty=False)
        values = _numbers(df, path, value_col)
        if (values < 0).any():
            raise ConfigError("negative duty cycle", file=path, field=value_col)
        frames.append(pd.DataFrame({"pod": pods, "t": _numbers(df, path, time_col), "value": values}))
    util = pd.concat(frames, ignore_index=True)
    top = float(util["value"].max()) if len(util) else 0.0
    if unit == "fraction" or (unit == "auto" and top <= 1.0):
        util["value"] = util["value"] * 100.0
    if float(util["value"].max() if len(util) else 0.0) > 100.0 + 1e-9:
        where = ", ".join(str(p) for p in paths)
        raise ConfigError(f"duty cycle above 100 % (max {top:g}); is --unit right?", file=where, field="value")
    util = util.groupby(["pod", "t"], as_index=False, sort=True)["value"].max()
    return util


def load_qps(path: Path | str) -> pd.DataFrame:
    """Read a request-rate CSV into ``pod``, ``t``, ``qps``, summed per pod and time."""
    path = Path(path)
    df = _read(path)
    value_col, time_col, pod_col = "value", _column(df, path, _TIME), _column(df, path, _POD)
    _column(df, path, (value_col,))
    df, pods = _pods(df, path, pod_col, drop_empty=True)
    qps = pd.DataFrame({"pod": pods, "t": _numbers(df, path, time_col), "qps": _numbers(df, path, value_col)})
    if (qps["qps"] < 0).any():
        raise ConfigError("negative request rate", file=path, field=value_col)
    return qps.groupby(["pod", "t"], as_index=False, sort=True)["qps"].sum()
