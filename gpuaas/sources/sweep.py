"""Read a load-test sweep CSV (one row per measured rate) for :mod:`gpuaas.policies.cost.capacity`.

Cells are read as text so that the policy, not pandas, decides what a bad cell is: it names
the row and column instead of failing on a mixed dtype somewhere downstream.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gpuaas.errors import ConfigError

__all__ = ["read_sweep"]


def read_sweep(path: Path | str) -> pd.DataFrame:
    """The sweep file as a frame of strings; a ConfigError names the file when it can't be read."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError("no such file", file=path)
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ConfigError(f"not a readable CSV ({str(exc).strip()[:200]})", file=path) from exc
