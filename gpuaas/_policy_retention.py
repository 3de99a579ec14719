"""How long the store keeps what a collect writes (``collect.retention_days``), and what the rest of the policy
asks of it.

Every collect prunes the store: the per-queue and per-tenant rows and the snapshot rows older than the
retention go, counted back from the wall clock. So a retention shorter than the time between two collects
would leave the store holding only the newest cycle: the incident review of last night would find no queue or
tenant rows, and a snapshot id handed to a later run would be gone before it is used. A retention under
``MIN_RETENTION_DAYS`` is therefore refused where the policy loads, with the other bounds. Of the settings that read what the store keeps, only the full
snapshots (``store.keep_full_snapshots`` every ``store.full_snapshot_every_minutes``) can ask for more than it
keeps: the rebalance's demand and the adaptive reclaim read their history from Prometheus, and the moves a
rebalance counts (``no_reversal_days``, the nightly cap) and the load tests from the audit log, which is
never pruned. ``retention_warnings`` says where the two disagree, for ``gpuaas config check``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import AfterValidator, Field

if TYPE_CHECKING:
    from gpuaas.policy import Policy

__all__ = ["MIN_RETENTION_DAYS", "RetentionDays", "retention_warnings"]

MIN_RETENTION_DAYS = 1.0
"""The shortest retention a policy may set: a day, many collects at any schedule a fleet runs them on, and the
night an incident review looks back at the next morning."""


def _at_least_a_day(days: float) -> float:
    if days < MIN_RETENTION_DAYS:
        raise ValueError(f"must be at least {MIN_RETENTION_DAYS:g} day, got {days:g}: every collect deletes the "
                         "stored history older than the retention, so the store would keep next to none")
    return days


RetentionDays = Annotated[float, Field(le=3660), AfterValidator(_at_least_a_day)]
"""``collect.retention_days``: from ``MIN_RETENTION_DAYS`` to ten years."""


def retention_warnings(policy: Policy) -> list[str]:
    """One line for each setting that asks the store for more than ``collect.retention_days`` keeps, naming both
    fields and their values; empty when none does. A warning, not an error: the flows still run as set."""
    retention = policy.collect.retention_days
    store = policy.store
    span_days = store.keep_full_snapshots * store.full_snapshot_every_minutes / (24 * 60)
    if span_days <= retention:
        return []
    return [f"store.keep_full_snapshots {store.keep_full_snapshots} every store.full_snapshot_every_minutes "
            f"{store.full_snapshot_every_minutes:g} span {span_days:g} days, longer than collect.retention_days "
            f"{retention:g}: the full snapshots older than that are pruned with their rows, so at most "
            f"{int(retention * 24 * 60 // store.full_snapshot_every_minutes)} are kept"]
