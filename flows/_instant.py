"""The instant a flow run decides for: its ``at`` parameter, read as UTC, and how far from now a writing run may put it.

``at`` reaches a flow from the Prefect UI, a deployment's parameters, ``prefect deployment run --param``
or a caller in Python, with a time zone or without one. Every flow types it ``UtcInstant``: Prefect's
parameter validation (``Flow.validate_parameters``, which a run through Prefect and the command line's
direct run, ``flows.direct``, both call) then reads a naive one as UTC and converts an aware one to UTC.
So the rest of the run compares aware instants only (a naive one against the snapshot's would raise),
and what it formats from ``at`` (idempotency keys, annotations, file names) reads the same for the same
instant, whichever offset it was given in.

No run looks ahead: ``looked_at``, which every flow with an ``at`` calls before it reads or writes
anything (the deciding flows through ``decision_instant``), refuses an ``at`` later than the wall clock
by more than ``CLOCK_SKEW``, in every mode. There is no telemetry of the future to judge, and what a
run stores or counts from its instant would be wrong: a collect stamps its snapshot and history rows
with it, and a rebalance's 22-hour cap or a reclaim window's idempotency key for a later instant do
not hold today's writes.

A writing run in apply mode writes to the cluster as it is now, whatever instant it decides for: a
plan for a past ``at`` rests on demand and telemetry the live objects have left behind.
``decision_instant`` refuses such a run before it reads or writes anything, when ``at`` is further
from the wall clock than ``collect.max_staleness_seconds`` (the bound no action may cross on
telemetry). A dry-run writes no decision to the cluster and may look at any past instant: replaying
one is what it is for.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated

from pydantic import AfterValidator

from gpuaas.errors import ActionRefused, ConfigError
from gpuaas.instant import as_utc, utc_stamp
from gpuaas.policy import Mode, Policy

__all__ = ["CLOCK_SKEW", "UtcInstant", "decision_instant", "far_from_now", "looked_at"]

UtcInstant = Annotated[datetime, AfterValidator(as_utc)]
"""A flow parameter that is an instant: validated by Prefect into an aware UTC datetime (see the module)."""

CLOCK_SKEW = timedelta(minutes=1)
"""How far past the wall clock an ``at`` is still taken for now: the skew between the clock of whoever chose it
(an operator's laptop, the Prefect server) and the worker's."""


def looked_at(at: datetime | None, wall_clock: datetime) -> datetime:
    """The instant a run looks at: ``at`` in UTC, or ``wall_clock`` when none is given.

    Raises ``ConfigError`` (field ``at``, one line with the value and the clock) when ``at`` is later than
    ``wall_clock`` by more than ``CLOCK_SKEW``, whatever the mode: the caller has then read and written nothing.
    """
    if at is None:
        return wall_clock
    at = as_utc(at)
    if at - wall_clock > CLOCK_SKEW:
        raise ConfigError(f"{at.isoformat().replace('+00:00', 'Z')} is in the future (the clock says "
                          f"{utc_stamp(wall_clock)}); a run can look back, not ahead", field="at")
    return at


def far_from_now(at: datetime, policy: Policy, wall_clock: datetime) -> float | None:
    """Seconds ``at`` lies from ``wall_clock`` when that is over ``collect.max_staleness_seconds`` (after
    is positive), else None: the bound past which a run decides for another instant than now."""
    apart = (as_utc(at) - wall_clock).total_seconds()
    return apart if abs(apart) > policy.collect.max_staleness_seconds else None


def decision_instant(at: datetime | None, mode: Mode, policy: Policy, wall_clock: datetime) -> datetime:
    """The instant the run decides for: ``at`` in UTC, or ``wall_clock`` when none is given.

    Raises what ``looked_at`` raises for an ``at`` in the future, in every mode, and ``ActionRefused`` (one
    line naming ``at`` and the limit) in apply mode when ``at`` is further than ``collect.max_staleness_seconds``
    from ``wall_clock``: the caller has then collected, decided and written nothing. ``mode`` is what the run
    would write in: a run that writes nothing passes dry-run.
    """
    if at is None:
        return wall_clock
    at = looked_at(at, wall_clock)
    limit = policy.collect.max_staleness_seconds
    if mode is Mode.apply and (apart := far_from_now(at, policy, wall_clock)) is not None:
        side = "after" if apart > 0 else "before"
        raise ActionRefused(
            f"at: {at.isoformat()} is {abs(apart):.0f}s {side} now, over the {limit:g}s collect.max_staleness_seconds "
            "an apply run may decide from now: nothing written; leave at empty to act now, or dry-run to look at "
            "that instant")
    return at
