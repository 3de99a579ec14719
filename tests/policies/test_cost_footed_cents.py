"""Money shared out to the cent by one rule, wherever parts must add up to a total: tenants to the cluster, a
service's periods to the service.

Why one rule: with two, the tenants' table and the periods' rows could round the same money two ways, and a
reviewer adding either would find a cent the other does not have.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from gpuaas.policies.cost._figures import footed, footed_cents
from gpuaas.policies.cost.funnel import MONEY_COLUMNS


@pytest.mark.parametrize(("parts", "total", "shown"), [
    ({"a": 88.504, "b": 17.503}, 106.01, {"a": 88.51, "b": 17.50}),  # the largest remainder takes the cent
    ({0: 10.004, 1: 10.004, 2: 10.004}, 30.01, {0: 10.01, 1: 10.00, 2: 10.00}),  # ties: the first in order
    ({0: 10.004, 1: 10.004, 2: 10.004}, None, {0: 10.01, 1: 10.00, 2: 10.00}),  # no total: their own, rounded once
    ({0: 1.0, 1: 2.0}, 3.02, {0: 1.01, 1: 2.01}),  # a cent per part away: still the same money
    ({0: 1.0, 1: 2.0}, 3.03, {0: 1.0, 1: 2.0}),  # further: not theirs, so their own sum
    ({0: 1.0, 1: 2.0}, 2.97, {0: 1.0, 1: 2.0}),
    ({}, 5.0, {}),
])
def test_parts_add_up_to_the_total_each_within_a_cent(parts: dict[object, float], total: float | None,
                                                      shown: dict[object, float]) -> None:
    got = footed_cents(parts, total)
    assert got == shown
    assert all(abs(got[key] - value) <= 0.01 + 1e-9 for key, value in parts.items())


def test_tenants_foot_to_the_cluster_by_the_same_rule_and_unknown_stays_unknown() -> None:
    tenants = pd.DataFrame({column: [88.504, 17.503, float("nan")] for column in MONEY_COLUMNS},
                           index=["a", "b", "dark"])
    totals = tenants.sum(min_count=1)
    shown = footed(tenants, totals)
    for column in MONEY_COLUMNS:
        assert shown.loc[["a", "b"], column].tolist() == list(footed_cents({"a": 88.504, "b": 17.503}, 106.01).values())
        assert round(shown.loc[["a", "b"], column].sum(), 2) == 106.01
        assert math.isnan(shown.at["dark", column])
