"""One database, one cluster: the store says which cluster its newest snapshot that names one came from (a
cycle that could not read it does not hide it), and a collect or a preflight of another cluster is refused,
on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gpuaas.errors import ConfigError
from gpuaas.models import Snapshot, SourceStatus
from gpuaas.operations.collect import other_cluster, plan
from gpuaas.policy import Policy
from gpuaas.store import Store

AT = datetime(2026, 12, 5, 4, 0, tzinfo=UTC)


def test_the_newest_snapshot_row_names_the_cluster(store: Store) -> None:
    assert store.latest_cluster() is None
    store.save_snapshot(AT, {"cluster": "uid-a"}, {})
    store.save_snapshot(AT + timedelta(minutes=5), {"cluster": "uid-b"}, {})
    store.save_snapshot(AT - timedelta(minutes=5), {"cluster": "uid-c"}, {})  # older: not the newest
    assert store.latest_cluster() == ("uid-b", AT + timedelta(minutes=5))
    store.save_snapshot(AT + timedelta(minutes=10), {"workloads": 3}, {})  # its cluster could not be read
    store.save_snapshot(AT + timedelta(minutes=15), {"cluster": None}, {})
    # the API came back: this is still uid-b's history, and another cluster is refused
    assert store.latest_cluster() == ("uid-b", AT + timedelta(minutes=5))
    assert store.latest_cluster(look_back=2) is None  # bounded: only the newest rows are read


def test_a_database_whose_rows_never_named_a_cluster_names_none(store: Store) -> None:
    store.save_snapshot(AT, {"workloads": 3}, {})
    assert store.latest_cluster() is None


def test_only_a_known_other_cluster_is_refused() -> None:
    assert other_cluster("uid-a", None) is None  # a new database
    assert other_cluster(None, ("uid-a", AT)) is None  # the identity could not be read: nothing to compare
    assert other_cluster("uid-a", ("uid-a", AT)) is None
    assert other_cluster("uid-b", ("uid-a", AT)) == (
        "this database holds the history of another cluster (kube-system uid uid-a, last collected 2026-12-05 "
        "04:00 UTC) than the one gpuaas reads now (uid-b): give each cluster its own database, or point gpuaas "
        "back at that cluster")


def test_the_collect_plan_is_refused_naming_the_database_setting() -> None:
    snapshot = Snapshot(collected_at=AT, windows_minutes=(30.0,), sources={"kube": SourceStatus("kube", True)},
                        cluster="uid-b")
    with pytest.raises(ConfigError, match="^GPUAAS_DATABASE_URL: this database holds the history of another"):
        plan(snapshot, Policy(), full_due=False, stored_cluster=("uid-a", AT))
