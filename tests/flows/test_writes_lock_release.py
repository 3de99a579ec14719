"""The cluster-writes lock is released even when the database is busy for a moment at the end of a run: a
release is idempotent, so it is retried, and the next writer does not wait out the lock's lease."""

from __future__ import annotations

from datetime import timedelta

import pytest

from gpuaas.errors import StoreError
from gpuaas.settings import load_settings
from gpuaas.store import Store, open_store


def test_a_release_the_database_refuses_once_is_retried_and_frees_the_lock(
        prefect_harness: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks.writes import LOCK, release_writes_lock

    settings = load_settings()
    with open_store(settings) as store:
        assert store.acquire_lock(LOCK, "reclaim-1", timedelta(minutes=15))
    real = Store.release_lock
    tries: list[str] = []

    def busy_once(self: Store, name: str, holder: str) -> None:
        tries.append(holder)
        if len(tries) == 1:
            raise StoreError("database is locked")
        real(self, name, holder)

    monkeypatch.setattr(Store, "release_lock", busy_once)
    release_writes_lock(settings, "reclaim-1")
    assert tries == ["reclaim-1", "reclaim-1"]
    with open_store(settings) as store:
        assert store.lock_holder(LOCK) is None
