"""How the cost report writes its figures: money to the cent, counts to six significant digits, cost per
outcome never inf or 0, and tenant rows that add up to the cluster's to the cent.

Why one place: a figure rounded one way in a table and another in a note, or tenants that add up to a cent
more than their total, is a number a FinOps reviewer cannot sign.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from gpuaas.policies.cost._counts import largest_remainder
from gpuaas.policies.cost.funnel import MONEY_COLUMNS

__all__ = ["cents", "cost_per_outcome", "footed", "num"]


def cost_per_outcome(cost: float | None, outcomes: float | None) -> float | None:
    """Money per verified outcome; None (never inf, never 0) when either is unknown or there is none."""
    if cost is None or outcomes is None or outcomes <= 0 or math.isnan(cost):
        return None
    return cost / outcomes


def num(value: Any) -> float | None:
    """Six significant digits, never coarser than a hundredth; None for unknown. A cost per outcome
    can be $0.0002, and a count of 12,345,678 requests or 123,456.78 GPU-hours must stay whole."""
    if value is None:
        return None
    number = float(value)
    if math.isnan(number):
        return None
    if number == 0.0 or math.isinf(number):
        return number
    return round(number, max(2, 5 - math.floor(math.log10(abs(number)))))


def cents(value: Any) -> float | None:
    """Money to the cent, rounded once: a figure rounded to significant digits first and to cents
    when shown would print $630.01 in a table and $630.02 in the note about the same tenant."""
    if value is None:
        return None
    number = float(value)
    return None if math.isnan(number) else round(number, 2)


def footed(tenants: pd.DataFrame, totals: pd.Series) -> pd.DataFrame:
    """``tenants`` with its money shared out to the cent so that each column adds up to the cluster's, itself
    rounded once (the largest-remainder rule, as for the verified requests): $88.504 and $17.504 print $88.51
    and $17.50 under $106.01, never $88.50 and $17.50, which add up to $106.00. A tenant whose cost is unknown
    stays unknown, and the others add up to the total."""
    out = tenants.copy()
    for column in MONEY_COLUMNS:
        total = cents(totals[column])
        known = tenants[column].dropna()  # a tenant of unknown cost has none in the total either
        if total is None or known.empty:
            continue
        shares = largest_remainder({k: round(float(v) * 100, 6) for k, v in known.items()}, round(total * 100))
        out.loc[known.index, column] = [shares[k] / 100 for k in known.index]
    return out


