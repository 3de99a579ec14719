"""Kubernetes resource quantities ("8", "500m", "16Gi", "1e3") and time windows ("6h", "7d"): one parser each.

Quota arithmetic must be exact (a ClusterQueue with ``nominalQuota: 9`` cpu must admit nine
``1000m`` pods, not eight because of float rounding), so the primary form is an ``int`` of
*milli-units*, rounded up as Kubernetes rounds. Readers that only need a number (GPU counts,
reports) take the float.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, DecimalException
from typing import Any

from gpuaas.errors import ConfigError

__all__ = ["GPU", "format_quantity", "parse_quantity", "parse_quantity_exact", "parse_quantity_milli", "parse_window"]

GPU = "nvidia.com/gpu"

_SUFFIXES: dict[str, Decimal] = {
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
    "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12),
    "P": Decimal(10**15), "E": Decimal(10**18),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
    "Pi": Decimal(2**50), "Ei": Decimal(2**60),
}
_PATTERN = re.compile(r"^([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
_LARGEST = Decimal(2**63 - 1)
"""Kubernetes' own bound: no quantity may represent a number greater than 2^63-1 in magnitude. Past it a value
is no amount a cluster has (``1e400`` would be an infinite float, ``1e100000000`` overflows ``Decimal`` with an
``ArithmeticError`` that no reader catching ``ValueError`` expects)."""
_BOUND = "the ±(2^63-1) a Kubernetes quantity holds"
_BINARY = [("Ei", 1024**6), ("Pi", 1024**5), ("Ti", 1024**4), ("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024)]


def _decimal(value: Any) -> Decimal:
    """``value`` as an exact number; a ``ValueError`` (never another error) when it is no Kubernetes quantity."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        if abs(value) > _LARGEST:  # past about 4,300 digits Python would not even write it (its digit limit)
            said = str(value) if value.bit_length() <= 128 else f"an integer of {value.bit_length():,} bits"
            raise ValueError(f"not a quantity: {said} is beyond {_BOUND}")
        number, text = Decimal(value), str(value)
    else:
        text = (repr(value) if isinstance(value, float) else str(value)).strip()
        match = _PATTERN.match(text)
        if not match:
            raise ValueError(f"not a quantity: {_shown(text)}")
        try:
            number = Decimal(match.group(1)) * _SUFFIXES[match.group(2) or ""]
        except DecimalException as exc:  # an exponent past what Decimal holds: 1e100000000
            raise ValueError(f"not a quantity: {_shown(text)} is out of range") from exc
    if abs(number) > _LARGEST:
        raise ValueError(f"not a quantity: {_shown(text)} is beyond {_BOUND}")
    return number


def _shown(text: str) -> str:
    """A quantity as an error quotes it: a pasted 5,000-digit number is cut to its start and its length."""
    return repr(text) if len(text) <= 40 else f"{text[:20]!r}... ({len(text):,} characters)"


def parse_quantity_milli(value: Any) -> int:
    """``value`` in milli-units, rounded up like Kubernetes: ``"500m"`` -> 500, ``"2"`` -> 2000."""
    number = _decimal(value) * 1000
    whole = int(number)
    return whole + 1 if number > whole else whole


def parse_quantity(value: Any) -> float:
    """The plain numeric value: ``"16Gi"`` -> 17179869184.0, ``"500m"`` -> 0.5."""
    return float(_decimal(value))


def parse_quantity_exact(value: Any) -> Decimal:
    """The exact value, never rounded: ``"1500m"`` -> ``Decimal("1.500")``. What a quota read to be written back
    is compared and moved by: a float makes ``"1.0000000000000001"`` a whole 1, a milli-unit rounds ``"1n"`` up."""
    return _decimal(value)


def format_quantity(resource: str, milli: int) -> str:
    """The canonical text of a milli-unit amount: whole numbers plain, memory in binary units."""
    if milli % 1000:
        return f"{milli}m"
    whole = milli // 1000
    if resource == "memory" or resource.endswith("storage"):
        for suffix, size in _BINARY:
            if whole and whole % size == 0:
                return f"{whole // size}{suffix}"
    return str(whole)


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}


def parse_window(text: str) -> float:
    """``6h``, ``7d``, ``2w`` or plain seconds, as seconds; a ConfigError names the option otherwise.

    ``nan`` and ``inf`` are numbers to ``float`` but no window: refused here, before arithmetic on them
    fails somewhere else with a message about integers."""
    value = str(text).strip()
    unit = _UNITS.get(value[-1:], None) if value else None
    number = value[:-1] if unit else value
    try:
        seconds = float(number) * (unit or 1.0)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds):
        raise ConfigError(f"expected a window like 6h or 7d, got {text!r}", field="window") from None
    if seconds <= 0:
        raise ConfigError(f"the window must be positive, got {text!r}", field="window")
    return seconds
