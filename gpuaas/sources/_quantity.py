"""Kubernetes resource quantities ("8", "500m", "16Gi", "1e3") as floats.

Quotas and requests arrive as strings in the API's quantity format; GPUs are counts, CPU is
cores and memory bytes, so one float per quantity is all the policies need.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

__all__ = ["parse_quantity"]

_SUFFIX = {
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
    "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12),
    "P": Decimal(10**15), "E": Decimal(10**18),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
    "Pi": Decimal(2**50), "Ei": Decimal(2**60),
}
_PATTERN = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")


def parse_quantity(value: object) -> float:
    """The numeric value of a quantity; ``ValueError`` naming the text when it is not one."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    match = _PATTERN.match(text)
    if not match:
        raise ValueError(f"not a quantity: {text!r}")
    try:
        number = Decimal(match.group(1))
    except InvalidOperation as exc:
        raise ValueError(f"not a quantity: {text!r}") from exc
    return float(number * _SUFFIX[match.group(2) or ""])
