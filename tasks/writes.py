"""One writer to the cluster at a time: reclaim, rebalance and deadline nudges all enter here.

Two locks, because either alone has a gap: Prefect's global concurrency limit
``gpuaas-cluster-writes`` (one slot) serialises flow runs on any worker, and the store's
``cluster-writes`` row lock covers a process that is not under that Prefect server (another
API, a script). Both are leases, and a killed holder loses both:

- the Prefect slot's lease is short (``GPUAAS_WRITES_SLOT_LEASE_SECONDS``, 60 s, Prefect's
  minimum) and renewed by the live holder every 3/4 of it, so the server's repossessor frees a
  slot whose holder died anywhere about a minute after its last renewal;
- the slot's lease id is written to the store next to the holder (``cluster-writes-slot``), so a
  holder killed on *this* host (its process is gone) loses its slot and its row at once: the
  waiting run gives that lease back and goes on. (A server that runs no repossessor, as the test
  harness's ephemeral one, frees such a slot only this way.)

The store lock's lease (``GPUAAS_WRITES_LEASE_SECONDS``, 900 s) is renewed by its holder every
third of it while the block runs, so a long run keeps it; a renewal that finds the lock gone
(the holder was frozen past the lease and another run took it) makes every later patch of the
run refuse, rather than write beside the new holder.

A run that cannot get both within ``GPUAAS_WRITES_WAIT_SECONDS`` raises ``WritesBusy`` and
writes nothing; the flows end Completed with that message, not a retry storm.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import timedelta
from typing import Any
from uuid import UUID

from prefect import get_run_logger

from gpuaas.actions import KubeWriter, holder_is_dead
from gpuaas.errors import ActionRefused, ConfigError
from gpuaas.operations.collect import other_cluster
from gpuaas.settings import GpuaasSettings
from gpuaas.store import WRITES_LOCK, HeldLock, Store, open_store
from reports import BUSY_LINE, busy_line
from tasks._options import gpuaas_task
from tasks._steps import run_logger

__all__ = ["BUSY_LINE", "CONCURRENCY_LIMIT", "LOCK", "SLOT_LOCK", "WritesBusy", "acquire_writes_lock", "busy_line",
           "cluster_writes", "ensure_concurrency_limit", "enter_concurrency_slot", "refuse_another_clusters_store",
           "release_writes_lock", "store_and_writer", "writes_lost"]

LOCK = WRITES_LOCK
SLOT_LOCK = "cluster-writes-slot"
"""Store row naming the Prefect lease of the slot's holder: ``<lease id>/<holder>``."""
CONCURRENCY_LIMIT = "gpuaas-cluster-writes"
POLL_SECONDS = 1.0


class _RefusedSlotAttempts(logging.Filter):
    """Prefect's acquisition service logs an ERROR for each refused (423) attempt, and a run waiting
    on the writes polls once a second: the run log of a merely busy run filled with red lines.
    Nothing is hidden: ``enter_concurrency_slot`` gets the same error and re-raises all but 423."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not (record.msg == "Service %r failed to process item %r" and args
                    and "ConcurrencySlotAcquisition" in str(args[0]))


logging.getLogger("prefect._internal.concurrency").addFilter(_RefusedSlotAttempts())


class WritesBusy(ActionRefused):
    """Another run holds the cluster writes for longer than this run may wait."""


def ensure_concurrency_limit() -> None:
    """Create the one-slot limit on first use (``prefect gcl create gpuaas-cluster-writes --limit 1`` does the same):
    an absent limit would make ``concurrency()`` a silent no-op."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            client.read_global_concurrency_limit_by_name(CONCURRENCY_LIMIT)
        except ObjectNotFound:
            try:
                client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=CONCURRENCY_LIMIT, limit=1))
            except Exception:  # noqa: BLE001 - a concurrent first run created it: use that one
                client.read_global_concurrency_limit_by_name(CONCURRENCY_LIMIT)


@gpuaas_task("acquire-writes-lock")
def acquire_writes_lock(settings: GpuaasSettings, holder: str, wait_seconds: float | None = None) -> None:
    """Take the store lock, polling up to ``wait_seconds`` (default: the settings' wait; the message names that)."""
    wait = settings.writes_wait_seconds if wait_seconds is None else wait_seconds
    deadline = time.monotonic() + wait
    with open_store(settings) as store:
        while not store.acquire_lock(LOCK, holder, timedelta(seconds=settings.writes_lease_seconds)):
            held = store.lock_holder(LOCK)
            if held is not None and holder_is_dead(held):  # killed on this host: its lease is void now
                get_run_logger().warning("the %r lock was held by %s, a process that is gone: taking it over",
                                         LOCK, held)
                store.release_lock(LOCK, held)
                continue
            if time.monotonic() >= deadline:
                raise WritesBusy(f"no writes this run: {_held_words(store.held_lock(LOCK), settings.writes_wait_seconds)}")
            time.sleep(POLL_SECONDS)


def _held_words(held: HeldLock | None, waited: float) -> str:
    """``rebalance-…@host holds the 'cluster-writes' lock (waited 60 s); its lease runs to … UTC unless renewed``:
    also when a holder that was killed (on another host, where its death cannot be seen from here) lets the next
    run write."""
    if held is None:
        return f"another run holds the {LOCK!r} lock (waited {waited:g} s)"
    return (f"{held.holder} holds the {LOCK!r} lock (waited {waited:g} s); its lease runs to "
            f"{held.expires_at:%Y-%m-%d %H:%M:%S} UTC unless renewed, so a run killed holding it keeps it until then")


@gpuaas_task("release-writes-lock", retries=2, retry_delay_seconds=1)
def release_writes_lock(settings: GpuaasSettings, holder: str) -> None:
    """Retried (a release is idempotent: it deletes this holder's row, if any): a database busy for a moment at the
    end must neither turn a finished run red nor keep every other writer waiting until the lock's lease runs out."""
    with open_store(settings) as store:
        store.release_lock(LOCK, holder)


def _release_or_warn(settings: GpuaasSettings, holder: str) -> None:
    """Release the lock once the writes are done; a database still unreachable after the retries is a warning, not
    the run's failure: its writes are made and recorded, and the lease frees the lock for the next run."""
    try:
        release_writes_lock(settings, holder)
    except Exception as exc:  # noqa: BLE001 - whatever the store raised, the run's outcome stands
        get_run_logger().warning("could not release the %r lock of %s (%s): the next writer waits until its lease "
                                 "of %g s runs out", LOCK, holder, exc, settings.writes_lease_seconds)


class _LockRenewal:
    """Renew ``holder``'s store lock every third of its lease until stopped; ``lost`` says why it may not
    write once a renewal found the lock no longer its own (a failed renewal is retried: the lease has
    two more thirds to run)."""

    def __init__(self, settings: GpuaasSettings, holder: str) -> None:
        self._settings, self._holder = settings, holder
        self._ttl = timedelta(seconds=settings.writes_lease_seconds)
        self._stop = threading.Event()
        self.lost: str | None = None
        self._valid_until = time.monotonic() + self._ttl.total_seconds()  # the lock was just taken
        self._thread = threading.Thread(target=self._run, name=f"renew-{LOCK}", daemon=True)

    def __enter__(self) -> _LockRenewal:
        self.renew()  # the lease counts from now, not from whenever the lock was taken
        _RENEWALS.append(self)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        _RENEWALS.remove(self)

    def reason(self) -> str | None:
        """Why this holder may not write now: the lock was lost, or its lease ran out before a renewal
        (the process was frozen, the store unreachable), which another run may already have seen."""
        if self.lost is None and time.monotonic() >= self._valid_until:
            return f"the {LOCK!r} lock of {self._holder} was not renewed within its lease"
        return self.lost

    def renew(self) -> None:
        """One renewal; sets ``lost`` when the lock is no longer this holder's."""
        try:
            started = time.monotonic()
            with open_store(self._settings) as store:
                if store.renew_lock(LOCK, self._holder, self._ttl):
                    self._valid_until = started + self._ttl.total_seconds()
                else:
                    self.lost = f"the {LOCK!r} lock of {self._holder} expired and may be another run's"
                    logging.getLogger(__name__).error("no more writes this run: %s", self.lost)
        except Exception as exc:  # noqa: BLE001 - the store is unreachable: retried at the next third
            logging.getLogger(__name__).warning("could not renew the %r lock: %s", LOCK, exc)

    def _run(self) -> None:
        while self.lost is None and not self._stop.wait(self._ttl.total_seconds() / 3):
            self.renew()


_RENEWALS: list[_LockRenewal] = []
"""The renewals of the writes locks this process holds (one per run in flight)."""


def writes_lost() -> str | None:
    """Why this process may no longer write (a writes lock it held was lost), or None: every cluster
    writer a task opens asks it before each patch."""
    return next((why for r in list(_RENEWALS) if (why := r.reason()) is not None), None)


def _record_slot(settings: GpuaasSettings, lease_id: UUID, holder: str) -> None:
    """Name this run's lease in the store; a row left there is a dead holder's (the slot was free): replace it."""
    with open_store(settings) as store:
        ttl = timedelta(seconds=settings.writes_lease_seconds)
        while not store.acquire_lock(SLOT_LOCK, f"{lease_id}/{holder}", ttl):
            stale = store.lock_holder(SLOT_LOCK)
            if stale is not None:
                store.release_lock(SLOT_LOCK, stale)


def _forget_slot(settings: GpuaasSettings, lease_id: UUID, holder: str) -> None:
    with open_store(settings) as store:
        store.release_lock(SLOT_LOCK, f"{lease_id}/{holder}")


def _free_dead_holders_slot(settings: GpuaasSettings) -> bool:
    """Give back the slot of a holder killed on this host (known dead by its pid); False when there is none."""
    from prefect.client.orchestration import get_client

    with open_store(settings) as store:
        row = store.lock_holder(SLOT_LOCK)
        lease_text, _, owner = (row or "").partition("/")
        if not row or not holder_is_dead(owner):
            return False
        with get_client(sync_client=True) as client:
            try:
                client.release_concurrency_slots_with_lease(UUID(lease_text))
            except Exception as exc:  # noqa: BLE001 - already revoked (repossessor): the slot is free anyway
                if getattr(getattr(exc, "response", None), "status_code", None) != 404:
                    raise
        store.release_lock(SLOT_LOCK, row)
    get_run_logger().warning("the %r slot was held by %s, a process that is gone: its lease given back",
                             CONCURRENCY_LIMIT, owner)
    return True


def enter_concurrency_slot(held: ExitStack, settings: GpuaasSettings, holder: str, wait: float) -> None:
    """Take the Prefect slot into ``held``, one attempt a second (no retries inside Prefect), up to ``wait`` s.

    Prefect's own ``timeout_seconds`` leaves its acquisition service retrying after the caller
    gave up, and that late attempt can take the slot and keep it for the whole lease. The lease is
    taken here rather than through ``concurrency()`` because its id must reach the store.
    """
    from prefect.concurrency._asyncio import ConcurrencySlotAcquisitionError
    from prefect.concurrency._leases import maintain_concurrency_lease
    from prefect.concurrency._sync import acquire_concurrency_slots_with_lease, release_concurrency_slots_with_lease

    deadline = time.monotonic() + wait
    lease = settings.writes_slot_lease_seconds
    while True:
        try:
            granted = acquire_concurrency_slots_with_lease([CONCURRENCY_LIMIT], 1, max_retries=0, strict=True,
                                                           lease_duration=lease)
            break
        except ConcurrencySlotAcquisitionError as exc:
            if getattr(getattr(exc.__cause__, "response", None), "status_code", None) != 423:
                raise  # not "the slot is taken": a real error
            if _free_dead_holders_slot(settings):
                continue
            if time.monotonic() >= deadline:
                raise WritesBusy(f"no writes this run: another flow run holds the {CONCURRENCY_LIMIT!r} "
                                 f"concurrency slot (waited {wait:g} s)") from exc
        time.sleep(POLL_SECONDS)
    held.callback(release_concurrency_slots_with_lease, granted.lease_id)
    _record_slot(settings, granted.lease_id, holder)
    held.callback(_forget_slot, settings, granted.lease_id, holder)
    held.enter_context(maintain_concurrency_lease(granted.lease_id, lease, raise_on_lease_renewal_failure=True))


def _under_prefect() -> bool:
    """True inside a flow run that a Prefect API records (not the command line's direct runs)."""
    from prefect.context import FlowRunContext

    return FlowRunContext.get() is not None


@contextmanager
def cluster_writes(settings: GpuaasSettings, holder: str) -> Iterator[None]:
    """Hold both locks for the block, released whatever happens; ``WritesBusy`` after the bounded wait."""
    wait = settings.writes_wait_seconds
    started = time.monotonic()
    with ExitStack() as held:
        if _under_prefect():  # a command line run without a Prefect API has only the store lock, which covers it
            ensure_concurrency_limit()
            enter_concurrency_slot(held, settings, holder, wait)
        acquire_writes_lock(settings, holder, max(0.0, wait - (time.monotonic() - started)))
        held.callback(_release_or_warn, settings, holder)
        held.enter_context(_LockRenewal(settings, holder))
        get_run_logger().info("cluster writes held by %s", holder)
        yield


def refuse_another_clusters_store(store: Store, writer: KubeWriter, database_variable: str) -> None:
    """A ``ConfigError`` naming ``database_variable`` (``GpuaasSettings.database_variable``), as a collect refuses it, where the store's newest snapshot came
    from another cluster than the one ``writer`` writes to. An undo, a recovery or a release sweep reads the cluster
    through no collect: with the kubeconfig of another cluster, its uid guard keeps that cluster's objects as they
    are, but the rows it would record (a restore of an object that is not there, a release) would go into this
    cluster's audit log. Nothing to compare (no snapshot yet, a role that may not read the identity) is no refusal."""
    problem = other_cluster(writer.cluster_uid(), store.latest_cluster())
    if problem:
        raise ConfigError(problem, field=database_variable)


@contextmanager
def store_and_writer(settings: GpuaasSettings, *, deciding: bool = False,
                     **writer_options: Any) -> Iterator[tuple[Store, KubeWriter]]:
    """The audit log and the cluster writer an acting task needs, both closed however the task ends.

    The writer's credentials are loaded, and its cluster checked against the store's
    (``refuse_another_clusters_store``), before anything is recorded, but for a ``deciding`` task (reclaim's and
    rebalance's acts, the deadline nudges): it records its decisions in dry-run and on a degraded snapshot too,
    writing nothing, and a kubeconfig that cannot give credentials is then the snapshot's failure, not the run's;
    it acts on a snapshot whose collect refused another cluster's store.
    """
    with open_store(settings) as store, KubeWriter(settings, guard=writes_lost, **writer_options) as writer:
        if not deciding:
            writer.connect()
            refuse_another_clusters_store(store, writer, settings.database_variable)
        yield store, writer
        missed = writer.unrecorded_events
        if missed:  # the writes stand: an Event is best effort, as Kubernetes' own are
            more = f" (and {len(missed) - 1} more)" if len(missed) > 1 else ""
            run_logger().warning("Kubernetes Event not recorded on %d changed objects: %s%s", len(missed), missed[0],
                                 more)
