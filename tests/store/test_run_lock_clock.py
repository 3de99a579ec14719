"""A lease is counted on the shared database's clock: a worker whose clock runs a quarter of an hour ahead must not
see a live holder's lock as expired, delete it and write beside it (two rebalances then left a cohort 5 GPUs over
its total), nor one whose clock lags keep a dead holder's lock alive for longer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import gpuaas.store._run_locks as run_locks
from gpuaas.cluster.services import fresh_schema_url
from gpuaas.store import Store

LOCK = "cluster-writes"


def _clock_off_by(monkeypatch: pytest.MonkeyPatch, skew: timedelta) -> None:
    """This process's clock ``skew`` away from the database's (as the worker's own clock reads it)."""
    monkeypatch.setattr(run_locks, "utc_now", lambda: datetime.now(UTC) + skew)


def test_a_worker_whose_clock_runs_ahead_does_not_take_a_live_lock(postgres_url: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    with Store(fresh_schema_url(postgres_url, "lock_clock_ahead")) as store:
        assert store.acquire_lock(LOCK, "live-holder", timedelta(minutes=15))
        _clock_off_by(monkeypatch, timedelta(minutes=16))
        assert not store.acquire_lock(LOCK, "worker-ahead", timedelta(minutes=15))
        held = store.held_lock(LOCK)
        assert held is not None and held.holder == "live-holder"
        assert store.renew_lock(LOCK, "live-holder", timedelta(minutes=15))  # still its own


def test_a_worker_whose_clock_lags_does_not_keep_a_lapsed_lock(postgres_url: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    with Store(fresh_schema_url(postgres_url, "lock_clock_behind")) as store:
        assert store.acquire_lock(LOCK, "killed-holder", timedelta(seconds=1))
        _clock_off_by(monkeypatch, -timedelta(minutes=16))
        deadline = datetime.now(UTC) + timedelta(seconds=30)
        while not store.acquire_lock(LOCK, "next-writer", timedelta(minutes=15)):  # its lease ran out a second in
            assert datetime.now(UTC) < deadline, store.held_lock(LOCK)
        assert store.lock_holder(LOCK) == "next-writer"
        assert not store.renew_lock(LOCK, "killed-holder", timedelta(minutes=15))
