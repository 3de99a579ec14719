"""How the cost report writes its figures: money to the cent, counts to six significant digits, cost per
outcome never inf or 0, and parts that add up to their total to the cent (tenants to the cluster, a service's
periods to the service), by one rule (``footed_cents``).

Why one place: a figure rounded one way in a table and another in a note, or tenants that add up to a cent
more than their total, is a number a FinOps reviewer cannot sign.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import Any, TypeVar

import pandas as pd

from gpuaas.phrases import half_up
from gpuaas.policies.cost._counts import largest_remainder
from gpuaas.policies.cost.funnel import MONEY_COLUMNS

__all__ = ["cents", "cost_per_outcome", "footed", "footed_cents", "num"]

K = TypeVar("K", bound=Hashable)


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


def cents(value: Any, decimals: int = 2) -> float | None:
    """Money to the cent, rounded once: a figure rounded to significant digits first and to cents
    when shown would print $630.01 in a table and $630.02 in the note about the same tenant. ``decimals``: the
    currency's minor units (``minor_units``: 0 for a yen, which has no cents)."""
    if value is None:
        return None
    number = float(value)
    if math.isnan(number) or math.isinf(number):
        return None if math.isnan(number) else number
    return float(half_up(number, decimals))


def _in_cents(amount: float, decimals: int = 2) -> int:
    """``amount`` in whole cents (whole minor units), rounded half up as every printed cent is (``half_up``)."""
    return int(half_up(amount, decimals).scaleb(decimals))


def footed_cents(parts: Mapping[K, float], total: float | None, decimals: int = 2) -> dict[K, float]:
    """``parts`` to the cent, shared out with the largest-remainder rule (as the verified requests are) so that they
    add up to ``total`` (itself rounded once), each within a cent of its own figure: $88.504 and $17.503 print
    $88.51 and $17.50 under $106.01, never $88.50 and $17.50, which add up to $106.00.

    Where ``total`` is None, or is not the same money (it and the parts' own sum, each to the cent, are more than a
    cent per part apart), the parts add up to their own sum, rounded once: a total that is not theirs must not move
    a part by more than its rounding does. ``decimals``: the currency's minor units, the "cent" of all this."""
    if not parts:
        return {}
    unit = 10 ** decimals
    own = float(half_up(sum(parts.values()), decimals))
    if total is None or abs(_in_cents(total, decimals) - _in_cents(own, decimals)) > len(parts):
        total = own
    shares = largest_remainder({key: round(float(value) * unit, 6) for key, value in parts.items()},
                               _in_cents(total, decimals))
    return {key: shares[key] / unit for key in parts}


def footed(tenants: pd.DataFrame, totals: pd.Series, decimals: int = 2) -> pd.DataFrame:
    """``tenants`` with its money to the cent so that each column adds up to the cluster's (``footed_cents``). A
    tenant whose cost is unknown stays unknown, and the others add up to the total. ``decimals``: the currency's
    minor units."""
    out = tenants.copy()
    for column in MONEY_COLUMNS:
        known = tenants[column].dropna()  # a tenant of unknown cost has none in the total either
        if not known.empty:
            shares = footed_cents(known.to_dict(), cents(totals[column], decimals), decimals)
            out.loc[known.index, column] = [shares[k] for k in known.index]
    return out
