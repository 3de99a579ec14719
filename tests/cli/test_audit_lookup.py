"""``gpuaas audit list``: finding a decision's rows by the name the deciding command printed, and the flags it refuses.

A reclaim that stops a RayCluster through its Kueue Workload writes its rows for the Workload
(``Workload team-a/raycluster-ray-…``) while ``gpuaas reclaim`` names the RayCluster it stops
(``RayCluster team-a/ray``). ``--object`` finds the rows by either, the kind in any case, and the
table names the owner first, as reclaim does. The rows here are written by the real reclaim and undo
against the embedded cluster, on SQLite and on PostgreSQL (the owner is matched in SQL on both).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.services import fresh_schema_url
from gpuaas.cluster.testbed import write_policy
from gpuaas.operations import incident
from gpuaas.policy import Mode
from gpuaas.settings import GpuaasSettings, load_settings
from gpuaas.store import Store, open_store
from tests.actions.reclaim_scenario import decide, run, undo
from tests.scenarios import point_at

runner = CliRunner()
NAMESPACE = "team-a"
"""The reclaim fleet's RayClusters and Notebooks are all the tenant team-a's."""


def _listed(*args: str) -> list[dict[str, object]]:
    result = runner.invoke(app, ["audit", "list", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    entries: list[dict[str, object]] = json.loads(result.stdout)["entries"]
    return entries


# --- against the embedded cluster, rows the real reclaim and undo wrote --------------------------

@pytest.fixture(scope="module")
def cluster(reclaim_fleet: EmbeddedCluster) -> EmbeddedCluster:
    return reclaim_fleet


@pytest.fixture(params=[("sqlite", "ray", "nb"), ("postgresql", "ray-b", "nb-b")], ids=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, cluster: EmbeddedCluster, tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[GpuaasSettings, Store, str, str]]:
    """Settings pointed at the cluster and a store on the backend, with the RayCluster and Notebook to stop there
    (each backend stops its own: the cluster is the module's)."""
    name, ray, notebook = request.param
    database = {}
    if name == "postgresql":
        database["database_url"] = fresh_schema_url(request.getfixturevalue("postgres_url"), "audit_lookup")
    point_at(cluster, monkeypatch, policy_file=write_policy(tmp_path / "policy.yaml", max_actions_per_run=20),
             **database)
    settings = load_settings()
    store = open_store(settings)
    yield settings, store, ray, notebook
    store.close()


@pytest.mark.integration
def test_a_reclaim_is_found_by_the_owner_it_stopped_and_by_the_workload_written(
        backend: tuple[GpuaasSettings, Store, str, str], cluster: EmbeddedCluster) -> None:
    settings, store, ray, notebook = backend
    decisions = decide(settings, cluster, store, Mode.apply, only={("RayCluster", ray), ("Notebook", notebook)})
    results = {r.decision.stops: r for r in run(settings, cluster, store, decisions, Mode.apply)}
    stopped = results[("RayCluster", ray)]
    assert stopped.result == "applied" and stopped.decision.kind == "Workload"  # stopped through its Workload
    workload = stopped.decision.name
    [undone] = undo(settings, store, [int(stopped.audit_id or 0)])
    assert undone.result == "restored"
    named = f"RayCluster {NAMESPACE}/{ray} (Workload {workload})"
    assert undone.subject == named  # what the undo prints: the RayCluster the team knows, then the Workload

    # Every row written for the Workload: the decision, its apply, the undo's restore (written from the rows,
    # not from the filter under test).
    about = {int(r.id or 0) for r in store.audit(limit=None) if r.name == workload}
    actions = {r.action for r in store.audit(limit=None) if r.name == workload}
    assert len(about) >= 3 and actions == {"reclaim", "restore"}
    for form in (f"RayCluster/{NAMESPACE}/{ray}", f"raycluster/{NAMESPACE}/{ray}", f"RayCluster {NAMESPACE}/{ray}",
                 named, f"{NAMESPACE}/{ray}", ray,
                 f"Workload/{NAMESPACE}/{workload}", f"workload/{NAMESPACE}/{workload}", workload):
        entries = _listed("--object", form)
        assert {e["id"] for e in entries} == about, form
        # one voice: the owner first, as reclaim names its subject, then the object written
        assert {e["subject"] for e in entries} == {f"RayCluster {NAMESPACE}/{ray} (Workload {workload})"}, form
        assert {e["object"] for e in entries} == {f"Workload {NAMESPACE}/{workload}"}, form

    # the same kind in another namespace, another kind, a name that only ends the same: none of these rows
    assert _listed("--object", f"RayCluster/team-b/{ray}") == []
    assert _listed("--object", f"Notebook/{NAMESPACE}/{ray}") == []
    assert _listed("--object", ray[1:]) == []

    nb = results[("Notebook", notebook)]
    assert nb.result == "applied" and nb.decision.kind == "Notebook"  # stopped itself: no owner
    for form in (f"Notebook/{NAMESPACE}/{notebook}", f"notebook/{NAMESPACE}/{notebook}", notebook):
        assert [e["id"] for e in _listed("--object", form)] == [
            int(r.id or 0) for r in store.audit(limit=None) if r.kind == "Notebook" and r.name == notebook], form
        assert {e["subject"] for e in _listed("--object", form)} == {f"Notebook {NAMESPACE}/{notebook}"}

    # the newest row alone (the undo's completion, which records no evidence) still names the owner first
    [last] = _listed("--object", ray, "--limit", "1")
    assert last["action"] == "restore" and last["subject"] == f"RayCluster {NAMESPACE}/{ray} (Workload {workload})"

    table = runner.invoke(app, ["audit", "list", "--object", ray], env={"COLUMNS": "240"})
    assert table.exit_code == 0, table.output
    assert f"RayCluster {NAMESPACE}/{ray} (Workload {workload})" in table.stdout
    assert "restore" in table.stdout and "reclaim" in table.stdout

    # the incident review of the same rows names them the same way, every row about the Workload, and its
    # actions (the reclaim, the undo) too; the Notebook, stopped itself, by its own name
    rows = store.audit(limit=None)
    start, end = min(r.created_at for r in rows), max(r.created_at for r in rows) + timedelta(seconds=1)
    review = incident.plan(incident.read(store, start, end, scoped=False), settings.policy)
    events = {e.audit_id: e for e in review.events}
    assert {i for i, e in events.items() if e.subject == named} == about
    assert {e.object_ref for i, e in events.items() if i in about} == {f"Workload {NAMESPACE}/{workload}"}
    assert {o.subject for o in review.actions if o.audit_id in about} == {named}
    assert {e.subject for e in events.values() if e.name == notebook} == {f"Notebook {NAMESPACE}/{notebook}"}


# --- without a cluster: the flags refused, and an empty answer ----------------------------------

@pytest.mark.parametrize("value", ["a/b/c/d", "/nb", "team-a/", "Notebook/team-a/", "/team-a/nb", "K//", "",
                                   "Notebook team-a/nb/x", "Notebook  team-a/", "a b team-a/nb", "Notebook (x y)"])
def test_a_malformed_object_is_a_usage_error_naming_the_forms(value: str) -> None:
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    result = runner.invoke(app, ["audit", "list", "--object", value])
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: Invalid value for '--object': ")
    for form in ("NAME", "NAMESPACE/NAME", "KIND/NAMESPACE/NAME", "KIND//NAME"):
        assert form in line
    assert f"(got {value!r})" in line and "see gpuaas audit list --help" in line


@pytest.mark.parametrize("value", ["nb", "team-a/nb", "Notebook/team-a/nb", "ClusterQueue//team-a-cq",
                                   "Notebook team-a/nb", "ClusterQueue team-a-cq",
                                   "RayCluster team-a/ray (Workload raycluster-ray-3f2a1)"])
def test_each_object_form_is_accepted(value: str) -> None:
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    result = runner.invoke(app, ["audit", "list", "--object", value])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_an_unknown_flow_is_a_usage_error_naming_the_flows(fmt: str) -> None:
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    result = runner.invoke(app, ["audit", "list", "--since", "2h", "--flow", "nosuch", "--format", fmt])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: Invalid value for '--flow': ") and "(got 'nosuch')" in line
    for flow in ("reclaim", "rebalance", "deadlines", "load_test"):  # the flows that write audit rows
        assert flow in line


@pytest.mark.parametrize("flow", ["reclaim", "rebalance", "deadlines", "load_test"])
def test_a_known_flow_with_no_rows_is_an_empty_answer(flow: str) -> None:
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    assert _listed("--flow", flow) == []
    table = runner.invoke(app, ["audit", "list", "--flow", flow])
    assert table.exit_code == 0 and table.stdout == f"audit log: 0 entries match --flow {flow}.\n"


@pytest.mark.parametrize(("since", "until"), [("2h", "3h"), ("2h", "2h"),
                                              ("2026-11-29T03:00", "2026-11-29T02:00")])
def test_a_window_that_runs_backwards_is_a_usage_error(since: str, until: str) -> None:
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    result = runner.invoke(app, ["audit", "list", "--since", since, "--until", until])
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: Invalid value for '--since' / '--from': ") and "is not before --until" in line
    assert f"(got {since!r})" in line


def test_no_rows_is_one_sentence_and_no_table() -> None:
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    empty = runner.invoke(app, ["audit", "list"])
    assert empty.exit_code == 0 and empty.stdout == "audit log: 0 entries: nothing recorded yet.\n"
    filtered = runner.invoke(app, ["audit", "list", "--since", "2h", "--object", "team-a/nb"])
    assert filtered.exit_code == 0
    assert filtered.stdout.startswith("audit log: 0 entries match --since 2h (")  # the UTC instant 2h stood for
    assert filtered.stdout.endswith(" UTC) --object team-a/nb.\n")
