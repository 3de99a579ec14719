"""A quantity past what Kubernetes holds is refused as ``not a quantity``, a ``ValueError``, like any other bad one.

The kube source turns a ``ValueError`` from an object (``_BAD_SHAPE``) into a degraded source naming the object;
``1e100000000`` raised ``decimal.Overflow`` (an ``ArithmeticError``) past it, and ``1e400`` was read as an
infinite number of GPUs that every sum after it carried. Kubernetes itself holds no quantity beyond 2^63-1 in
magnitude, so nothing real is refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuaas.errors import MalformedResponse
from gpuaas.quantity import parse_quantity, parse_quantity_milli
from tests.sources.test_bad_kube_objects import _pod_sets, _read, _workload


@pytest.mark.parametrize("bad", ["1e400", "1e100000000", "9" * 5000, "8Ei", "1e18Ei", 2**63, -(2**63), 10**5000, 1e300],
                         ids=["1e400", "decimal-overflow", "5000-digits", "8Ei", "1e18Ei", "2^63", "-2^63",
                              "int-5000-digits", "float-1e300"])
@pytest.mark.parametrize("parse", [parse_quantity, parse_quantity_milli], ids=["float", "milli"])
def test_a_quantity_kubernetes_cannot_hold_is_not_a_quantity(parse: object, bad: object) -> None:
    assert callable(parse)
    with pytest.raises(ValueError, match=r"^not a quantity: .{1,80} is (beyond the ±\(2\^63-1\)|out of range)"):
        parse(bad)


def test_the_largest_quantity_kubernetes_holds_still_parses() -> None:
    assert parse_quantity_milli(2**63 - 1) == (2**63 - 1) * 1000
    assert parse_quantity_milli("7Ei") == 7 * 2**60 * 1000
    with pytest.raises(ValueError, match="not a quantity"):
        parse_quantity_milli(2**63)


@pytest.mark.parametrize("gpus", ["1e400", "1e100000000"], ids=["infinite-float", "decimal-overflow"])
def test_a_workload_asking_for_more_than_kubernetes_holds_fails_the_source_naming_it(gpus: str,
                                                                                    tmp_path: Path) -> None:
    """Through the real reader (the embedded API over HTTP, then the parsers): ``1e400`` GPUs was read as an
    infinite request, and ``1e100000000`` escaped the source as ``decimal.Overflow``, not a source error."""
    with pytest.raises(MalformedResponse) as caught:
        _read(_workload({"queueName": "q", "podSets": _pod_sets(gpus)}), tmp_path)
    assert caught.value.source == "kube"
    assert f"Workload team-a/w: not a quantity: {gpus!r} is" in str(caught.value)
