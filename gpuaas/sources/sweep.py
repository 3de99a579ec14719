"""Read a load-test sweep CSV (one row per measured rate) for :mod:`gpuaas.policies.cost.capacity`.

Cells are read as text so that the policy, not pandas, decides what a bad cell is: it names
the row and column instead of failing on a mixed dtype somewhere downstream. The file itself is
read by :mod:`gpuaas.sources.csv_table`, which refuses a row of another length than the header.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gpuaas.sources.csv_table import read_csv_table

__all__ = ["read_sweep"]


def read_sweep(path: Path | str) -> pd.DataFrame:
    """The sweep file as a frame of strings; a ConfigError names the file (and line) when it can't be read."""
    table = read_csv_table(path)
    return pd.DataFrame(table.rows, columns=list(table.header), dtype=str)
