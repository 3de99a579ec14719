"""The one quantity parser: exact milli-units for quota arithmetic, floats for reports."""

from __future__ import annotations

import pytest

from gpuaas.quantity import format_quantity, parse_quantity, parse_quantity_milli


@pytest.mark.parametrize(
    ("text", "milli", "value"),
    [
        ("8", 8000, 8.0), (2, 2000, 2.0), ("500m", 500, 0.5), ("1.5", 1500, 1.5), ("16Gi", 16 * 2**30 * 1000, 16 * 2**30),
        ("1e3", 1_000_000, 1000.0), ("1k", 1_000_000, 1000.0), ("100n", 1, 1e-7), (".5", 500, 0.5),
    ],
    ids=["int-text", "int", "milli", "decimal", "binary", "exponent", "decimal-suffix", "rounds-up", "leading-dot"],
)
def test_parse(text: object, milli: int, value: float) -> None:
    assert parse_quantity_milli(text) == milli
    assert parse_quantity(text) == pytest.approx(value)


@pytest.mark.parametrize("bad", ["", "8 GPUs", "Gi", "1.2.3", True, "--1"])
def test_rejects_what_is_not_a_quantity(bad: object) -> None:
    with pytest.raises(ValueError, match="not a quantity"):
        parse_quantity(bad)


def test_format_round_trips() -> None:
    assert format_quantity("memory", parse_quantity_milli("16Gi")) == "16Gi"
    assert format_quantity("cpu", 500) == "500m"
    assert format_quantity("nvidia.com/gpu", 8000) == "8"
