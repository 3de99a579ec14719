"""Scenarios from public GPU-cluster traces, compressed in time.

* ``philly``: the per-job table derived from Microsoft Philly (columns ``timestamp, duration,
  num_gpus, gpu_time, cluster``); each virtual cluster (``cluster``) becomes a tenant.
* ``itp``: Microsoft ITP jobs with ElasticFlow's deadlines (``job_id, submission_time,
  num_iteration, model_name, deadline, batch_size, num_gpu, duration``, times in seconds);
  the file is one tenant, and each job carries ``gpuaas.io/deadline`` and
  ``gpuaas.io/expected-runtime``.

Both readers hold every job they return within :data:`MAX_REPLAY_SECONDS` (two years) of the trace's first
submission, and every run within that long (with ``max_jobs``, the jobs kept: a row cut is never replayed):
whatever replays a trace (``cluster up --trace``, the deadline and rebalance replays) steps through its time,
so a job of 30,000 years would run for hours or overflow a clock.

Times are divided by ``compress`` so hours of trace replay in minutes. Each tenant's quota is
its mean GPU demand over the replayed span (rounded up to whole nodes), so queues form where
the trace had bursts; the node pool is the sum of the quotas. Jobs become RayClusters (one
pod per 8 GPUs) so that they run pods and produce telemetry. The file is read from wherever
the user points; nothing from a trace is shipped with gpuaas.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from gpuaas.cluster.scenario import Scenario, parse_scenario
from gpuaas.errors import ConfigError
from gpuaas.models import MAX_SECONDS
from gpuaas.sources.csv_table import read_csv_table, where

__all__ = ["MAX_REPLAY_SECONDS", "TraceJob", "read_itp", "read_philly", "scenario_from_jobs", "scenario_from_trace"]

_GPUS_PER_NODE = 8

MAX_REPLAY_SECONDS = 2 * 365 * 86_400
"""The longest a replayed job may run, and the latest it may be submitted or due after the trace's first job:
two years. The published traces span under four months (Philly: 109 days; its longest job 54 days); the
rebalance replay plans every night until the last job ends, so two years is some 730 plans, where 1e12 s
would be 11 million and run for hours, and the deadline replays hold times as dates, which end at year 9999."""


@dataclass(frozen=True)
class TraceJob:
    tenant: str
    submit: float  # seconds since the trace's first job
    duration: float
    gpus: int
    deadline: float | None = None


def _rows(path: Path, required: set[str]) -> list[tuple[int, dict[str, str]]]:
    """The rows with the line each ends on (the header is line 1): an error must point where an editor shows it."""
    table = read_csv_table(path)
    table.require(required)
    if not table.rows:
        raise ConfigError("no rows after the header: a trace needs at least one job", file=path)
    return table.records()


_MAX_GPUS = 1_000_000


def _num(row: dict[str, str], column: str, path: Path, line: int, *, positive: bool = False) -> float:
    """A finite number >= 0 (> 0 with ``positive``): a negative or zero duration, NaN or inf would corrupt the replay.

    A job that runs for no time holds no GPUs and meets any deadline: counted, it would only inflate the
    figures, so a duration must be above 0; a submission time or deadline may be 0 (the trace's start).
    """
    try:
        value = float(row[column])
    except ValueError as exc:
        raise ConfigError(f"not a number: {row[column]!r}", file=path, field=where(line, column)) from exc
    if not math.isfinite(value) or not (0 < value if positive else 0 <= value) or value > MAX_SECONDS:
        bounds = f"above 0, at most {MAX_SECONDS:.0e}" if positive else f"from 0 to {MAX_SECONDS:.0e}"
        raise ConfigError(f"must be a finite number {bounds}, got {row[column]!r}", file=path,
                          field=where(line, column))
    return value


def _gpus(row: dict[str, str], column: str, path: Path, line: int) -> int:
    """A whole number of GPUs above 0: a fraction would be cut silently, a huge count overflows the packing, and a
    job asking for no GPUs takes no quota, so it is admitted at once and meets its deadline whatever the plan:
    counted, it would only inflate the figures (the published traces hold none)."""
    try:
        value = float(row[column])
    except ValueError as exc:
        raise ConfigError(f"not a number: {row[column]!r}", file=path, field=where(line, column)) from exc
    if not (value.is_integer() and 1 <= value <= _MAX_GPUS):  # NaN and inf are not integers
        raise ConfigError(f"must be a whole number of GPUs above 0, at most {_MAX_GPUS:,}, got {row[column]!r}",
                          file=path, field=where(line, column))
    return int(value)


def _check_replay_span(path: Path, rows: list[tuple[int, dict[str, str]]], durations: list[float],
                       submissions: tuple[str, list[float]], deadlines: tuple[str, list[float]] | None = None) -> None:
    """Refuse ``path`` naming the line and column of the first row (in file order) whose run is longer than
    :data:`MAX_REPLAY_SECONDS`, or whose submission or deadline is that far after the first submission of them.

    ``rows`` are the rows replayed, in file order; ``durations``, ``submissions`` and ``deadlines`` (each its
    column and its values) hold the values parsed from them, one per row; the file is not read again."""
    first = min(submissions[1], default=0.0)
    limit = f"{MAX_REPLAY_SECONDS:,} s (two years)"
    instants = [submissions] if deadlines is None else [submissions, deadlines]
    for k, (line, row) in enumerate(rows):
        if durations[k] > MAX_REPLAY_SECONDS:
            raise ConfigError(f"a replay holds runs of at most {limit}, got {row['duration']!r}", file=path,
                              field=where(line, "duration"))
        for column, values in instants:
            if values[k] - first > MAX_REPLAY_SECONDS:
                raise ConfigError(f"a replay holds times up to {limit} after the trace's first submission, got "
                                  f"{row[column]!r}", file=path, field=where(line, column))


def _replayed(parsed: Sequence[tuple[object, ...]], max_jobs: int | None) -> list[int]:
    """The indices (into ``parsed``, one per row in file order) of the jobs replayed, in the order they are: sorted,
    the first ``max_jobs`` of them (all without). Rows cut are never replayed, so a time of theirs is no reason
    to refuse the trace: :func:`_check_replay_span` is given these rows alone."""
    order = sorted(range(len(parsed)), key=lambda k: parsed[k])  # stable: rows alike keep their file order
    return order[:max_jobs] if max_jobs else order


def read_philly(path: Path, max_jobs: int | None = None) -> list[TraceJob]:
    rows = _rows(path, {"timestamp", "duration", "num_gpus", "cluster"})
    parsed: list[tuple[float, str, float, int]] = []
    for i, row in rows:
        try:
            ts = datetime.fromisoformat(row["timestamp"]).timestamp()
        except (ValueError, OverflowError, OSError) as exc:  # the last two: a date the platform's clock cannot hold
            raise ConfigError(f"bad timestamp {row['timestamp']!r}", file=path, field=where(i, "timestamp")) from exc
        if not row["cluster"]:  # the tenant: a job of no one's would be charged to a VC named ""
            raise ConfigError("empty VC name", file=path, field=where(i, "cluster"))
        parsed.append((ts, row["cluster"], _num(row, "duration", path, i, positive=True),
                       _gpus(row, "num_gpus", path, i)))
    replayed = _replayed(parsed, max_jobs)
    kept = sorted(replayed)  # the rows replayed, in file order
    _check_replay_span(path, [rows[k] for k in kept], [parsed[k][2] for k in kept],
                       ("timestamp", [parsed[k][0] for k in kept]))
    jobs = [parsed[k] for k in replayed]
    t0 = jobs[0][0] if jobs else 0.0
    return [TraceJob(vc, ts - t0, dur, gpus) for ts, vc, dur, gpus in jobs]


def read_itp(path: Path, max_jobs: int | None = None) -> list[TraceJob]:
    rows = _rows(path, {"submission_time", "deadline", "num_gpu", "duration"})
    parsed = [(_num(r, "submission_time", path, i), _num(r, "deadline", path, i),
               _num(r, "duration", path, i, positive=True), _gpus(r, "num_gpu", path, i)) for i, r in rows]
    replayed = _replayed(parsed, max_jobs)
    kept = sorted(replayed)  # the rows replayed, in file order
    _check_replay_span(path, [rows[k] for k in kept], [parsed[k][2] for k in kept],
                       ("submission_time", [parsed[k][0] for k in kept]),
                       ("deadline", [parsed[k][1] for k in kept]))
    jobs = [parsed[k] for k in replayed]
    t0 = jobs[0][0] if jobs else 0.0
    return [TraceJob(path.stem, s - t0, dur, gpus, dl - t0) for s, dl, dur, gpus in jobs]


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-") or "x"


def scenario_from_jobs(jobs: list[TraceJob], name: str, compress: float, seed_util: float = 0.7) -> Scenario:
    """A scenario replaying ``jobs`` ``compress`` times faster."""
    if not jobs:
        raise ConfigError("the trace has no jobs", file=name)
    span = max(max(j.submit + j.duration for j in jobs) / compress, 3600.0)
    demand: dict[str, float] = defaultdict(float)
    for job in jobs:
        demand[job.tenant] += job.gpus * job.duration / compress
    tenants, total = [], 0
    for tenant in sorted(demand):
        biggest = max(j.gpus for j in jobs if j.tenant == tenant)
        gpus = max(math.ceil(demand[tenant] / span), min(biggest, 64))
        gpus = math.ceil(gpus / _GPUS_PER_NODE) * _GPUS_PER_NODE
        total += gpus
        tenants.append({"name": f"vc-{_slug(tenant)}", "cohort": "trace",
                        "quotas": [{"flavor": "gpu", "gpus": gpus}]})
    workloads = []
    for i, job in enumerate(jobs):
        pods = max(1, math.ceil(job.gpus / _GPUS_PER_NODE))
        spec = {
            "name": f"job-{i:05d}", "kind": "RayCluster", "tenant": f"vc-{_slug(job.tenant)}",
            "pods": pods, "gpus_per_pod": min(job.gpus, _GPUS_PER_NODE) if job.gpus else 1,
            "submit_at": round(job.submit / compress, 3), "duration": max(60.0, round(job.duration / compress, 3)),
            "utilisation": {"profile": "constant", "value": seed_util},
        }
        if job.deadline is not None:
            spec["deadline"] = round(job.deadline / compress, 3)
            spec["expected_runtime"] = spec["duration"]
        workloads.append(spec)
    data = {
        "name": name,
        "flavors": [{"name": "gpu"}],
        "pools": [{"name": "gpu", "count": max(1, total // _GPUS_PER_NODE), "gpus_per_node": _GPUS_PER_NODE,
                   "flavor": "gpu", "gpu_hourly_price": 2.5}],
        "tenants": tenants,
        "workloads": workloads,
    }
    return parse_scenario(data, name)


def scenario_from_trace(path: Path | str, trace_format: str, *, compress: float = 60.0,
                        max_jobs: int | None = 2000) -> Scenario:
    """Read ``path`` as a ``philly`` or ``itp`` trace and build its scenario."""
    path = Path(path)
    if trace_format == "philly":
        jobs = read_philly(path, max_jobs)
    elif trace_format == "itp":
        jobs = read_itp(path, max_jobs)
    else:
        raise ConfigError(f"unknown trace format {trace_format!r} (philly | itp)", field="trace_format")
    return scenario_from_jobs(jobs, f"trace-{path.stem}", compress)
