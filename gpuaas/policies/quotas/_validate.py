"""The quota planner's input checks: contradictory or impossible input refused with the field it is in.

Kept apart from the model: every rule here is about what a caller may hand the planner, not about what the
planner decides.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gpuaas.errors import ConfigError
from gpuaas.models import MAX_GPUS

if TYPE_CHECKING:
    from gpuaas.policies.quotas.plan import QueueDemand, QuotaLimits

__all__ = ["validate_quota_input"]


def validate_quota_input(queues: Sequence[QueueDemand], limits: QuotaLimits) -> None:
    """Refuse contradictory input with a ConfigError naming the field (``queues[1].demand.h100``)."""
    for name in ("max_step_gpus", "max_total_moved_gpus", "hysteresis_gpus", "min_step_gpus", "moved_24h_gpus",
                 "no_reclaim_keep_gpus", "reclaiming_keep_gpus"):
        value = getattr(limits, name)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_GPUS:
            raise ConfigError(f"must be a whole number from 0 to {MAX_GPUS:,}, got {value!r}",
                              field=f"limits.{name}")
    for name in ("no_reclaim_keep_factor", "reclaiming_keep_factor"):
        value = getattr(limits, name)
        if not (isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1e6):
            raise ConfigError(f"must be a number >= 0, got {value!r}", field=f"limits.{name}")
    if not (isinstance(limits.min_lend_history_s, int | float) and 0 <= limits.min_lend_history_s <= 366 * 86400):
        raise ConfigError(f"must be a number of seconds from 0 to a year, got {limits.min_lend_history_s!r}",
                          field="limits.min_lend_history_s")
    if not (isinstance(limits.lend_reserve, int | float) and 0 <= limits.lend_reserve <= 1):
        raise ConfigError(f"must be a number from 0 to 1, got {limits.lend_reserve!r}", field="limits.lend_reserve")
    if not (isinstance(limits.max_step_percent, int | float) and 0 <= limits.max_step_percent <= 10_000):
        raise ConfigError(f"must be a number from 0 to 10,000, got {limits.max_step_percent!r}",
                          field="limits.max_step_percent")
    if not queues:
        raise ConfigError("no queues to plan for", field="queues")
    seen: dict[str, int] = {}
    flavors: set[str] = set()
    for idx, q in enumerate(queues):
        where = f"queues[{idx}]"
        if not q.name:
            raise ConfigError("must be a non-empty string", field=f"{where}.name")
        if q.name in seen:
            raise ConfigError(f"queue {q.name!r} is also queues[{seen[q.name]}]", field=f"{where}.name")
        seen[q.name] = idx
        if not q.nominal:
            raise ConfigError(f"queue {q.name!r} has no nominal quota", field=f"{where}.nominal")
        if not (isinstance(q.weight, int | float) and math.isfinite(q.weight) and 0 < q.weight <= 1e6):
            raise ConfigError(f"queue {q.name!r}: must be a number above 0, at most 1,000,000, got {q.weight!r}",
                              field=f"{where}.weight")
        for flavor, value in q.nominal.items():
            _whole(value, q.name, f"{where}.nominal.{flavor}")
            flavors.add(flavor)
        for part in ("guaranteed", "lendable"):
            for flavor, value in getattr(q, part).items():
                _whole(value, q.name, f"{where}.{part}.{flavor}")
        for part in ("demand", "busiest"):  # the busiest too: a keep of 12 x infinity GPUs is no number
            for flavor, d in getattr(q, part).items():
                if not (isinstance(d, int | float) and not isinstance(d, bool) and math.isfinite(d)
                        and 0 <= d <= MAX_GPUS):
                    raise ConfigError(f"queue {q.name!r}: must be a number from 0 to {MAX_GPUS:,}, got {d!r}",
                                      field=f"{where}.{part}.{flavor}")
        for flavor, r in q.recent_change.items():
            if not isinstance(r, int) or isinstance(r, bool) or abs(r) > MAX_GPUS:
                raise ConfigError(f"queue {q.name!r}: must be a whole number, at most {MAX_GPUS:,} either way, "
                                  f"got {r!r}",
                                  field=f"{where}.recent_change.{flavor}")
        for flavor, seconds in q.history_seconds.items():
            if not (isinstance(seconds, int | float) and not isinstance(seconds, bool) and 0 <= seconds <= math.inf):
                raise ConfigError(f"queue {q.name!r}: must be a number of seconds >= 0, got {seconds!r}",
                                  field=f"{where}.history_seconds.{flavor}")
        for flavor, moved in q.moved_24h.items():
            if not isinstance(moved, tuple | list) or len(moved) != 2:
                raise ConfigError(f"queue {q.name!r}: must be (GPUs gained, GPUs lost), got {moved!r}",
                                  field=f"{where}.moved_24h.{flavor}")
            for side, value in zip(("gained", "lost"), moved, strict=True):
                _whole(value, q.name, f"{where}.moved_24h.{flavor}.{side}")
    for idx, q in enumerate(queues):
        for part in ("demand", "guaranteed", "recent_change", "moved_24h", "history_seconds", "lendable"):
            for flavor in getattr(q, part):
                if flavor not in flavors:
                    raise ConfigError(f"queue {q.name!r}: no queue has nominal quota of flavor {flavor!r}",
                                      field=f"queues[{idx}].{part}.{flavor}")
                if flavor not in q.nominal:
                    raise ConfigError(
                        f"queue {q.name!r} has no nominal quota of flavor {flavor!r} (add it to nominal, even as 0)",
                        field=f"queues[{idx}].{part}.{flavor}")
    for flavor in sorted(flavors):
        total = sum(q.nominal.get(flavor, 0) for q in queues)
        owed = [(i, q) for i, q in enumerate(queues) if q.guaranteed.get(flavor, 0) > 0]
        need = sum(q.guaranteed[flavor] for _, q in owed)
        if need > total:
            fields = ", ".join(f"queues[{i}].guaranteed.{flavor}" for i, _ in owed)
            names = ", ".join(f"{q.name} {q.guaranteed[flavor]}" for _, q in owed)
            raise ConfigError(f"guarantees ({names}) sum to {need} GPUs of {flavor}, above the cohort's "
                              f"{total} (the sum of nominal quotas)", field=fields)


def _whole(value: Any, queue: str, where: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_GPUS:
        raise ConfigError(f"queue {queue!r}: must be a whole number from 0 to {MAX_GPUS:,}, got {value!r}",
                          field=where)
