"""How gpuaas words a verdict, and writes an amount of money, once for every place that shows it.

The idle table, ``gpuaas reclaim``, the demo, the artifacts and the audit log's rows all say why a
workload is (or is not) idle with these functions, so that the same object gets the same words and
numbers wherever a person reads about it (``reports._format`` re-exports them for the reports). The cost
report's tables and its notes (written in ``gpuaas.policies.cost``) price with ``money`` and ``per_outcome``,
so that a note's lower bound reads as the table's figures do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal

__all__ = ["CURRENCY_SYMBOLS", "DEFAULT_CURRENCY", "counted", "currency_unit", "duration", "figure", "first_few",
           "half_up", "listed", "minor_units", "money", "per_outcome", "printable", "verdict_phrase", "zero_money"]

DEFAULT_CURRENCY = "USD"
"""The ISO 4217 code of an amount that does not say its currency (OpenCost's default, and an older report's)."""
CURRENCY_SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥"}
"""The currencies written with a symbol before the amount (``€1,234.56``); any other code is written after it
(``1,234.56 CHF``), since a symbol such as ``kr`` or ``$`` names several currencies."""
_MINOR_UNITS = {**dict.fromkeys(("BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "UYI",
                                 "VND", "VUV", "XAF", "XOF", "XPF"), 0),
                **dict.fromkeys(("BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"), 3),
                **dict.fromkeys(("CLF", "UYW"), 4)}
"""ISO 4217's minor units of the currencies that do not have two (a yen has no cents, a dinar has fils)."""


def figure(number: float) -> str:
    """A count or amount as people write it: ``17,893,000``, ``12.5``, ``0.0003``; never ``1.7893e+07``,
    which ``:g`` prints from a million on. Two decimals at most, fewer where they are zeros."""
    if number == 0:
        return "0"
    if abs(number) < 0.01:  # two significant digits, written out: 0.0003, 0.00000015
        decimals = 1 - math.floor(math.log10(abs(number)))
        return f"{number:.{decimals}f}".rstrip("0").rstrip(".")
    return f"{number:,.2f}".rstrip("0").rstrip(".")


def counted(number: float, noun: str, plural: str | None = None) -> str:
    """``1 idle workload``, ``3 idle workloads``, ``1 GPU``, ``2.5 GPUs``: a headline never says "1 GPUs"."""
    said = figure(number)
    return f"{said} {noun if said == '1' else plural or noun + 's'}"  # as printed: 0.999 reads "1 GPU"


def listed(names: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``: names in a sentence."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def first_few(names: Sequence[str], shown: int = 3) -> str:
    """``a, b, c and 4 more``: the first ``shown`` names and how many others, where a line must stay short."""
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def printable(text: str) -> str:
    """``text`` with its control characters escaped (``\\x1b``, ``\\n``): a name or an error a server sent, put in a
    line for a terminal or a log, cannot move the cursor or start a line that reads as the tool's own."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def minor_units(currency: str = DEFAULT_CURRENCY) -> int:
    """The decimals an amount in ``currency`` (an ISO 4217 code) is written with: ISO 4217's minor units, 0 for JPY
    and KRW, 3 for KWD, 2 for most."""
    return _MINOR_UNITS.get(currency, 2)


def currency_unit(currency: str = DEFAULT_CURRENCY) -> str:
    """How an axis or a column names the currency: its symbol where ``CURRENCY_SYMBOLS`` has one (``$``, ``€``),
    else its code (``CHF``)."""
    return CURRENCY_SYMBOLS.get(currency, currency)


def _written(amount: str, currency: str) -> str:
    """``amount`` (digits, no sign) with the currency: the symbol before it (``€12.50``), else the code after it."""
    symbol = CURRENCY_SYMBOLS.get(currency)
    return f"{symbol}{amount}" if symbol is not None else f"{amount} {currency}"


def zero_money(currency: str = DEFAULT_CURRENCY) -> str:
    """No money, as a sentence says a cost is not nothing: ``$0``, ``€0``, ``0 CHF``."""
    return _written("0", currency)


def money(value: float | None, unknown: str = "unknown", currency: str = DEFAULT_CURRENCY) -> str:
    """An amount in ``currency`` (an ISO 4217 code; OpenCost's prices' own, never converted) with its minor units
    (``minor_units``: $1,234.56, ¥1,235), or three significant digits under one unit: $0.000064 and $0.00012 must not
    both read "$0.0001". ``unknown`` where the amount is None. The currency is written as ``currency_unit`` says:
    ``€1,234.56``, ``1,234.56 CHF``.

    Rounded half up, as a FinOps reader rounds by hand: 9.79 / 2 is 4.895 and reads $4.90, though the binary
    float is 4.89499999.... The float is first rounded seven digits past those shown, which drops that
    binary error and keeps every digit an amount in cents (or a cost per outcome) really has."""
    if value is None:
        return unknown
    value = float(value)  # a numpy scalar's repr is not a number's
    if not math.isfinite(value):  # no bill holds one (the sources refuse it); printed as it is, never hidden
        return f"{'-' if value < 0 else ''}{_written(f'{abs(value):,.2f}', currency)}"
    minor = minor_units(currency)
    decimals = minor if value == 0 or abs(value) >= 1 else max(minor, 2 - math.floor(math.log10(abs(value))))
    amount = half_up(value, decimals)
    # A credit reads as an accountant writes it, the sign before the symbol: -$4.90, never $-4.90.
    return f"{'-' if amount < 0 else ''}{_written(f'{abs(amount):,.{decimals}f}', currency)}"


def half_up(value: float, decimals: int) -> Decimal:
    """``value`` rounded half up to ``decimals``, as a person rounds the amount it stands for: 9.79 / 2 is 4.895
    and rounds to 4.90, though the binary float is 4.89499999.... The float is first rounded seven digits past
    ``decimals``, which drops that binary error and keeps every digit the amount really has. Every cent the cost
    report prints, a table's or a total's, is rounded here, so one amount never prints two ways."""
    exact = Decimal(repr(round(float(value), decimals + 7)))
    return exact.quantize(Decimal(1).scaleb(-decimals), ROUND_HALF_UP)


def per_outcome(value: float | None, kind: str = "serving", currency: str = DEFAULT_CURRENCY) -> str:
    """Cost per outcome in ``currency``; a cost per request under the currency's smallest unit (a cent, a yen) is
    shown per 1,000 requests, as it is priced."""
    if value is None:
        return "unknown"
    if kind == "serving" and abs(value) < 10.0 ** -minor_units(currency):
        return f"{money(value * 1000, currency=currency)} per 1,000 requests"
    return money(value, currency=currency) + {"serving": " per request", "batch": " per job"}.get(kind, "")


def duration(seconds: float | None) -> str:
    """``45m``, ``3h07m``; ``-`` when unknown."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "-"
    minutes = int(seconds // 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m"


def verdict_phrase(verdict: str, reason: str, activity_max: float | None, threshold: float | None,
                   idle_seconds: float | None) -> str:
    """The idle verdict as a short phrase with its numbers: ``idle 30m, max activity 0.00 ≤ 0.05``.

    Only the verdicts GPU activity decided get numbers; the others keep the policy's reason
    (opted out, excluded, incomplete telemetry name their own cause), and so does an idle verdict whose
    numbers do not say it (an adaptive window shorter than the one the maximum was read over)."""
    known = activity_max is not None and threshold is not None and not math.isnan(float(activity_max))
    if verdict == "idle" and known and float(activity_max or 0) <= float(threshold or 0):
        return f"idle {duration(idle_seconds)}, max activity {float(activity_max or 0):.2f} ≤ {float(threshold or 0):g}"
    if verdict == "busy" and known and float(activity_max or 0) > float(threshold or 0):
        return f"max activity {float(activity_max or 0):.2f} > {float(threshold or 0):g}"
    return reason
