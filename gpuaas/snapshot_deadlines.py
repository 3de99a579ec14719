"""The snapshot's deadline columns: what each workload (or the job that owns it) says, parsed once.

Why in the join and not in the planner: the planner is pure and takes numbers, and a malformed
value must show up where operators read data quality (the snapshot's ``data_quality`` frame,
with the workload and the value), whether or not a deadline plan runs this cycle.

The values are the Workload's own annotations, else the owning job's: the Kubernetes source has
already applied that precedence (``gpuaas.sources.kube.with_owner_annotations``, the cost report's
rule too). The run time falls back to Kueue's maximum execution time, an upper bound.
"""

from __future__ import annotations

import pandas as pd

from gpuaas.sources import parse_deadline_fields

__all__ = ["DATA_QUALITY_COLUMNS", "DEADLINE_COLUMNS", "deadline_columns"]

DEADLINE_COLUMNS = ("deadline_at", "runtime_seconds", "runtime_source")
DATA_QUALITY_COLUMNS = ["kind", "namespace", "name", "field", "value", "problem"]


def deadline_columns(workloads: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``workloads`` with the deadline columns filled, and one data-quality row per malformed value."""
    out = workloads.copy()
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
