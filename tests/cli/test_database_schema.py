"""The database's schema as the command line meets it.

* ``gpuaas db status`` is a health check: exit 0 at this gpuaas's schema or with no database yet, 1 behind or newer;
* a database a newer gpuaas migrated is one line naming it (password hidden), exit 1, no traceback, from ``db
  status``, ``db upgrade``, ``collect`` and ``reclaim`` alike, and is left as it is;
* a flow run upgrades a SQLite file that is behind and says so on stderr; a PostgreSQL database behind it fails the
  run before anything is stored, naming GPUAAS_DATABASE_URL, both schemas and what to run, and stays where it was.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import Result
from sqlalchemy import text
from typer.testing import CliRunner

from gpuaas.cli.app import app
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.services import fresh_schema_url
from gpuaas.store import Store
from tests.scenarios import point_at

pytestmark = pytest.mark.usefixtures("wide_terminal")  # each sentence on one line: the wrapping is test_db_output_wraps's

runner = CliRunner()
NEWER = "is at schema 9999, newer than the 0005 this gpuaas reads: upgrade gpuaas"


def _leave_at(url: str, revision: str) -> None:
    """The database as a gpuaas at ``revision`` leaves it ("9999": a newer one); one there already is relabelled."""
    store = Store(url, migrate=False)
    if store.current_revision() is None:
        store.upgrade(min(revision, store.head_revision()))
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": revision})
    store.close()


def _at(url: str) -> tuple[str | None, int]:
    """The database's schema and how many snapshots it holds."""
    store = Store(url, migrate=False)
    try:
        with store.engine.connect() as conn:
            return store.current_revision(), int(conn.execute(text("SELECT count(*) FROM snapshots")).scalar_one())
    finally:
        store.close()


def _one_error_line(result: Result, line: str) -> None:
    assert result.exit_code == 1, result.output
    assert result.stderr.strip().splitlines()[-1] == f"error: {line}" and "Traceback" not in result.output, result.output


@pytest.fixture()
def sqlite_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path}/gpuaas.db"
    monkeypatch.setenv("GPUAAS_DATABASE_URL", url)
    return url


@pytest.fixture()
def shared_url(postgres_url: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh PostgreSQL schema, reached with a password (the test server takes any)."""
    url = fresh_schema_url(postgres_url, f"cli_{abs(hash(request.node.nodeid)) % 10**8}")
    url = url.replace("://postgres@", "://postgres:s3cret-db@")
    monkeypatch.setenv("GPUAAS_DATABASE_URL", url)
    return url


def test_db_status_exits_0_only_at_this_schema_or_with_no_database_yet(sqlite_url: str) -> None:
    assert runner.invoke(app, ["db", "status"]).exit_code == 0  # no file yet
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    current = runner.invoke(app, ["db", "status"])
    assert current.exit_code == 0 and "up to date" in current.stdout
    assert "It holds 0 audit entries (never pruned), 0 snapshots and 0 fleet-history rows" in current.stdout
    _leave_at(sqlite_url, "0003")
    behind = runner.invoke(app, ["db", "status"])
    assert behind.exit_code == 1 and "behind the 0005" in behind.stderr and "gpuaas db upgrade" in behind.stderr
    _leave_at(sqlite_url, "9999")
    _one_error_line(runner.invoke(app, ["db", "status"]), f"{sqlite_url} {NEWER}")


def test_db_status_on_an_empty_shared_database_is_not_a_failure_and_hides_the_password(shared_url: str) -> None:
    empty = runner.invoke(app, ["db", "status"])
    assert empty.exit_code == 0 and "s3cret-db" not in empty.output
    _leave_at(shared_url, "0003")
    behind = runner.invoke(app, ["db", "status"])
    assert behind.exit_code == 1 and "at schema 0003, behind the 0005" in behind.stderr
    assert "s3cret-db" not in behind.output and "***" in behind.stderr


def test_before_an_upgrade_status_says_who_holds_the_writes_and_upgrade_waits_for_them(sqlite_url: str) -> None:
    """The first step of an upgrade is to stop the runs: the status of a database behind says who still writes, and
    the migration is refused while a run holds the writes (its tables would change under it)."""
    from datetime import timedelta

    from gpuaas.store import WRITES_LOCK

    _leave_at(sqlite_url, "0003")  # as the older gpuaas left it, a run of it holding the writes
    with Store(sqlite_url, migrate=False) as store:
        assert store.acquire_lock(WRITES_LOCK, "reclaim-9f@worker-2/pid:77", timedelta(minutes=15))
        held = store.held_lock(WRITES_LOCK)
    assert held is not None
    status = runner.invoke(app, ["db", "status"])
    assert status.exit_code == 1 and "behind the 0005" in status.stderr
    assert ("cluster writes ('cluster-writes' lock): held by reclaim-9f@worker-2/pid:77 until "
            f"{held.expires_at:%Y-%m-%d %H:%M:%S} UTC") in status.stdout
    refused = runner.invoke(app, ["db", "upgrade"])
    _one_error_line(refused, f"{sqlite_url}: reclaim-9f@worker-2/pid:77 holds the cluster writes until "
                             f"{held.expires_at:%Y-%m-%d %H:%M:%S} UTC: pause the scheduled runs and let it finish "
                             "first; nothing was migrated")
    assert _at(sqlite_url)[0] == "0003"
    with Store(sqlite_url, migrate=False) as store:
        store.release_lock(WRITES_LOCK, "reclaim-9f@worker-2/pid:77")
    file = sqlite_url.removeprefix("sqlite:///")
    done = runner.invoke(app, ["db", "upgrade"])
    assert done.exit_code == 0, done.output
    assert done.stdout.strip() == f"{sqlite_url}: upgraded schema 0003 -> 0005 (the file as it was: {file}.schema-0003.bak)"
    assert _at(sqlite_url)[0] == "0005" and _at(f"sqlite:///{file}.schema-0003.bak")[0] == "0003"


def test_db_upgrade_of_a_newer_database_is_one_line(shared_url: str) -> None:
    _leave_at(shared_url, "9999")
    result = runner.invoke(app, ["db", "upgrade"])
    _one_error_line(result, f"{shared_url.replace('s3cret-db', '***')} {NEWER}")
    assert len(result.stderr.strip().splitlines()) == 1
    assert _at(shared_url)[0] == "9999"


@pytest.fixture(scope="module")
def cluster(reclaim_fleet: EmbeddedCluster) -> EmbeddedCluster:
    return reclaim_fleet


@pytest.mark.integration
@pytest.mark.flow
@pytest.mark.parametrize("command", ["collect", "reclaim"])
def test_a_flow_on_a_newer_database_is_one_line_and_changes_nothing(
        cluster: EmbeddedCluster, sqlite_url: str, monkeypatch: pytest.MonkeyPatch, prefect_harness: None,
        command: str) -> None:
    point_at(cluster, monkeypatch, database_url=sqlite_url)
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    _leave_at(sqlite_url, "9999")
    _one_error_line(runner.invoke(app, [command]), f"{sqlite_url} {NEWER}")
    assert _at(sqlite_url) == ("9999", 0)


@pytest.mark.integration
@pytest.mark.flow
def test_a_flow_upgrades_a_sqlite_file_behind_it_and_says_so(cluster: EmbeddedCluster, sqlite_url: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    point_at(cluster, monkeypatch, database_url=sqlite_url)
    _leave_at(sqlite_url, "0003")
    result = runner.invoke(app, ["collect"])
    assert result.exit_code == 0, result.output
    file = sqlite_url.removeprefix("sqlite:///")
    said = [line for line in result.stderr.splitlines() if "upgraded" in line]
    assert said == [f"warning: upgraded the database {file} from schema 0003 to 0005 (the file as it was: "
                    f"{file}.schema-0003.bak)"]
    assert _at(f"sqlite:///{file}.schema-0003.bak") == ("0003", 0)  # the way back to the older gpuaas
    assert _at(sqlite_url) == ("0005", 1)


@pytest.mark.integration
@pytest.mark.flow
def test_a_flow_leaves_a_shared_database_behind_it_to_db_upgrade(
        cluster: EmbeddedCluster, shared_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    point_at(cluster, monkeypatch, database_url=shared_url)
    _leave_at(shared_url, "0003")
    result = runner.invoke(app, ["collect"])
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("error: GPUAAS_DATABASE_URL: postgresql"), line
    assert all(said in line for said in ("schema 0003", "0005", "`gpuaas db upgrade`", "every worker"))
    assert "s3cret-db" not in result.output
    assert _at(shared_url) == ("0003", 0)
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0  # the operator's step, then the flows run
    assert runner.invoke(app, ["collect"]).exit_code == 0
    assert _at(shared_url) == ("0005", 1)



def test_db_status_says_who_holds_the_cluster_writes_and_until_when(shared_url: str) -> None:
    """On a bad day the first question is whether a run (maybe one killed on another host) holds the writes."""
    from datetime import timedelta

    from gpuaas.store import WRITES_LOCK, Store

    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    free = runner.invoke(app, ["db", "status"])
    assert free.exit_code == 0 and "cluster writes ('cluster-writes' lock): free" in free.stdout
    with Store(shared_url) as store:
        assert store.acquire_lock(WRITES_LOCK, "rebalance-1a2b@worker-7/pid:311", timedelta(minutes=15))
        held = store.held_lock(WRITES_LOCK)
    assert held is not None
    busy = runner.invoke(app, ["db", "status"])
    assert busy.exit_code == 0, busy.output
    assert (f"cluster writes ('cluster-writes' lock): held by rebalance-1a2b@worker-7/pid:311 until "
            f"{held.expires_at:%Y-%m-%d %H:%M:%S} UTC unless it renews it") in busy.stdout
