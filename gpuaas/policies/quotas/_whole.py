"""GPU quotas that are not whole numbers of GPUs: what keeps a cohort out of the planner.

Why refuse rather than round: the planner moves whole GPUs and conserves each flavor's total in a
cohort. A ``1500m`` quota rounded to 2 makes a total the cohort does not have, and the plan's whole
numbers, written back, then create or destroy quota (1.5 + 0 GPUs planned as 2 + 0 and moved to
1 + 1 is 2 where there were 1.5). Nor can a fractional limit be moved by whole GPUs without changing
what it keeps. Kueue admits against the exact quantity, so such a cohort gets no plan, with the
queue, flavor, field and value named, until a person makes the quota whole; the other cohorts plan
as before. Pure: one cohort's rows of the snapshot's quota frame in, sentences out.
"""

from __future__ import annotations

import math
from decimal import Decimal

import pandas as pd

from gpuaas.quantity import format_quantity

__all__ = ["QUOTA_FIELDS_READ", "not_whole", "shown_gpus"]

QUOTA_FIELDS_READ = (("nominal", "nominalQuota"), ("borrowing_limit", "borrowingLimit"),
                     ("lending_limit", "lendingLimit"))
"""The quota frame's columns of a ClusterQueue's quota, with the field of the ClusterQueue each was read from."""


def shown_gpus(value: float, resource: str = "nvidia.com/gpu") -> str:
    """A quantity as a ClusterQueue would hold it, exactly: ``1500m`` for 1.5, ``2`` for 2.0; finer than a milli-unit
    as the decimal it is (``1.0000005``). Never rounded: the number is the one the operator must find and fix."""
    exact = Decimal(repr(float(value)))  # the shortest text that reads back as the same float: the quantity read
    milli = exact * 1000
    if milli == milli.to_integral_value():
        return format_quantity(resource, int(milli))
    return format(exact.normalize(), "f")


def not_whole(rows: pd.DataFrame) -> list[str]:
    """One sentence per GPU quota of ``rows`` (one cohort's GPU quota cells: nominal quota, borrowingLimit,
    lendingLimit; a limit not set is NaN) that is not a whole number of GPUs, in the rows' order; [] when every one is.

    ``odd-a-cq h100 nominalQuota is 1500m, not a whole number of GPUs: not planned``."""
    out = []
    for row in rows.itertuples(index=False):
        for column, name in QUOTA_FIELDS_READ:
            value = getattr(row, column, None)
            if value is None or pd.isna(value):
                continue
            number = float(value)
            if math.isfinite(number) and number.is_integer():
                continue
            out.append(f"{row.cluster_queue} {row.flavor} {name} is {shown_gpus(number, str(row.resource))}, "
                       "not a whole number of GPUs: not planned")
    return out
