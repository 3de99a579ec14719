"""The snapshot's deadline columns: what each workload (or the job that owns it) says, parsed once.

Why in the join and not in the planner: the planner is pure and takes numbers, and a malformed
value must show up where operators read data quality (the snapshot's ``data_quality`` frame,
with the workload and the value), whether or not a deadline plan runs this cycle.

Precedence: the Workload's own annotation, else the owning job's (teams annotate the object they
create; Kueue creates the Workload). The run time falls back to Kueue's maximum execution time,
an upper bound.
"""

from __future__ import annotations

import pandas as pd

from gpuaas.sources import DEADLINE, EXPECTED_RUNTIME, parse_deadline_fields

__all__ = ["DATA_QUALITY_COLUMNS", "DEADLINE_COLUMNS", "deadline_columns"]

DEADLINE_COLUMNS = ("deadline_at", "runtime_seconds", "runtime_source")
DATA_QUALITY_COLUMNS = ["kind", "namespace", "name", "field", "value", "problem"]


def _from_owner(workloads: pd.DataFrame, owners: pd.DataFrame, key: str, column: str) -> pd.Series:
    own = workloads[column].astype(object)
    if owners.empty or "annotations" not in owners:
        return own
    keyed = owners.assign(_v=owners["annotations"].map(lambda a: a.get(key)))[["namespace", "kind", "name", "_v"]]
    keyed = keyed.rename(columns={"kind": "owner_kind", "name": "owner_name"}).drop_duplicates(
        ["namespace", "owner_kind", "owner_name"])
    merged = workloads[["namespace", "owner_kind", "owner_name"]].merge(
        keyed, on=["namespace", "owner_kind", "owner_name"], how="left")
    return own.combine_first(pd.Series(merged["_v"].to_numpy(), index=workloads.index, dtype=object))


def deadline_columns(workloads: pd.DataFrame, owners: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``workloads`` with the deadline columns filled, and one data-quality row per malformed value."""
    out = workloads.copy()
    out["deadline"] = _from_owner(workloads, owners, DEADLINE, "deadline")
    out["expected_runtime"] = _from_owner(workloads, owners, EXPECTED_RUNTIME, "expected_runtime")
    if "max_exec_time" not in out:
        out["max_exec_time"] = None
    when, seconds, source, problems = [], [], [], []
    for row in out[["kind", "namespace", "name", "deadline", "expected_runtime", "max_exec_time"]].itertuples(
            index=False):
        fields = parse_deadline_fields(_text(row.deadline), _text(row.expected_runtime), _text(row.max_exec_time))
        when.append(fields.deadline)
        seconds.append(fields.runtime_seconds)
        source.append(fields.runtime_source)
        problems += [(row.kind, row.namespace, row.name, f, v, why) for f, v, why in fields.problems]
    out["deadline_at"] = pd.to_datetime(pd.Series(when, index=out.index, dtype=object), utc=True)
    out["runtime_seconds"] = pd.Series(seconds, index=out.index, dtype=float)
    out["runtime_source"] = pd.Series(source, index=out.index, dtype=object)
    return out, pd.DataFrame(problems, columns=DATA_QUALITY_COLUMNS)


def _text(value: object) -> str | None:
    return None if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)
