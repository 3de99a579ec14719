"""A deadline problem written by hand: capacity and jobs, times in minutes from now.

Why its own loader: a planner should be tried on a problem a person wrote before its flow is
trusted with a cluster, and a typo there must name the job and the field, not print a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuaas._validation import require_text_keys
from gpuaas._yaml import read_yaml
from gpuaas.errors import ConfigError
from gpuaas.policies.deadlines import DeadlineJob, validate_problem

__all__ = ["load_deadline_problem"]

_REQUIRED = ("name", "gpus", "duration", "deadline")
_OPTIONAL = ("resource", "running_for", "earliest_start")


def load_deadline_problem(path: Path | str) -> tuple[dict[str, int], list[DeadlineJob]]:
    """``(capacity, jobs)``; a ``ConfigError`` naming the file, the job and the field otherwise."""
    doc = read_yaml(path, "deadline problem")
    if not isinstance(doc, Mapping):
        raise ConfigError("must be a mapping with 'capacity' and 'jobs'", file=path)
    require_text_keys(path, doc, deep=False)
    unknown = sorted(set(doc) - {"capacity", "jobs"})
    if unknown:
        raise ConfigError(f"unknown key {unknown[0]!r} (expected capacity, jobs)", file=path)
    capacity = doc.get("capacity")
    if not isinstance(capacity, Mapping) or not capacity:
        raise ConfigError("must map each resource or flavor to its GPU count", file=path, field="capacity")
    require_text_keys(path, capacity, loc=("capacity",), deep=False)
    jobs_doc = doc.get("jobs")
    if not isinstance(jobs_doc, list):
        raise ConfigError("must be a list of jobs", file=path, field="jobs")
    only = next(iter(capacity)) if len(capacity) == 1 else None
    jobs = [_job(path, k, entry, only) for k, entry in enumerate(jobs_doc)]
    caps = {str(r): c for r, c in capacity.items()}
    try:
        validate_problem(caps, jobs)
    except ConfigError as exc:
        raise ConfigError(str(exc), file=path) from exc
    return caps, jobs


def _job(path: Path | str, k: int, entry: Any, only: str | None) -> DeadlineJob:
    if not isinstance(entry, Mapping):
        raise ConfigError("must be a mapping", file=path, field=f"jobs[{k}]")
    where = f"jobs[{k}] ({entry['name']})" if isinstance(entry.get("name"), str) and entry["name"] else f"jobs[{k}]"
    require_text_keys(path, entry, where=lambda loc: f"{where}.{loc[-1]}", deep=False)
    extra = sorted(set(entry) - set(_REQUIRED) - set(_OPTIONAL))
    for key in _REQUIRED:
        if key not in entry:
            hint = " (null for a job without one)" if key == "deadline" else ""
            # a key missing beside one no job has is most often that key misspelt (gpu: for gpus:): say both
            typo = f"; unknown field {', '.join(extra)}" if extra else ""
            raise ConfigError(f"missing{hint}{typo}", file=path, field=f"{where}.{key}")
    if extra:
        raise ConfigError("unknown field", file=path, field=f"{where}.{extra[0]}")
    if not isinstance(entry["name"], str) or not entry["name"]:
        raise ConfigError("must be a non-empty string", file=path, field=f"{where}.name")
    resource = entry.get("resource")
    if resource is None:  # left out or null: the one resource of capacity, where it names only one
        resource = only
    if resource is None:
        raise ConfigError("missing: capacity names several resources", file=path, field=f"{where}.resource")
    return DeadlineJob(
        name=entry["name"],
        gpus=entry["gpus"],
        duration=entry["duration"],
        deadline=entry["deadline"],
        resource=str(resource),
        running_for=entry.get("running_for"),
        earliest_start=0.0 if entry.get("earliest_start") is None else entry["earliest_start"],
    )
