"""The incident_review flow and ``gpuaas incident`` end to end: embedded cluster, real store, Prefect harness.

Scenario: ``tests/flows/incident_scenario.py``. The incident is lived once per module (reclaim
dry-run, reclaim apply, rebalance apply, collect); the tests then review it: every audit row in
order with its evidence, the backlog / idle series equal to the stored history, the filters, the
artifacts, undo through the review (one restored, one refused because its team changed it since),
the CLI's three formats and its bad input.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.settings import load_settings
from gpuaas.store import open_store
from tests.flows.incident_scenario import Incident, incident_cluster, live_through_incident, write_policy
from tests.scenarios import point_at

pytestmark = [pytest.mark.integration, pytest.mark.flow]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("incident-data")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with incident_cluster(tmp_path_factory.mktemp("incident")) as running:
        yield running


@pytest.fixture(scope="module")
def incident(cluster: EmbeddedCluster, data_dir: Path, prefect_harness: None) -> Iterator[Incident]:
    with pytest.MonkeyPatch.context() as mp:
        point_at(cluster, mp, data_dir=data_dir, policy_file=write_policy(data_dir / "policy.yaml"))
        yield live_through_incident(cluster)


@pytest.fixture()
def pointed_at(cluster: EmbeddedCluster, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> EmbeddedCluster:
    return point_at(cluster, monkeypatch, data_dir=data_dir, policy_file=data_dir / "policy.yaml")


def _review(**params: Any) -> dict[str, Any]:
    from flows.incident import incident_review

    state = incident_review(**params, return_state=True)
    assert state.is_completed(), state.message
    return state.result()  # type: ignore[no-any-return]


def _window(incident: Incident) -> dict[str, str]:
    return {"start": (min(incident.started, incident.collects[0]) - timedelta(minutes=1)).isoformat(),
            "end": (incident.collects[-1] + timedelta(minutes=10)).isoformat()}


def _artifact(key: str) -> Any:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))
    return max(found, key=lambda a: a.created)


def test_the_review_lists_every_action_in_order_with_its_evidence(incident: Incident,
                                                                  pointed_at: EmbeddedCluster) -> None:
    window = _window(incident)
    result = _review(**window)
    store = open_store(load_settings())
    try:
        rows = store.audit(since=incident.started - timedelta(minutes=1), limit=None)
    finally:
        store.close()
    # Every audit row of the window, oldest first: 2 dry-run decisions, 2 reclaims (intent + applied each),
    # the quota plan (intent, one patch per queue, completion).
    assert [e["audit_id"] for e in result["events"]] == [r.id for r in rows] and len(rows) == 10
    assert [e["at"] for e in result["events"]] == sorted(e["at"] for e in result["events"])
    got = [(e["action"], e["object"], e["mode"], e["outcome"]) for e in result["events"]]
    assert got == [
        ("reclaim", "Deployment team-a/dep", "dry-run", "planned"), ("reclaim", "Notebook team-a/nb", "dry-run", "planned"),
        ("reclaim", "Deployment team-a/dep", "apply", "planned"), ("reclaim", "Deployment team-a/dep", "apply", "applied"),
        ("reclaim", "Notebook team-a/nb", "apply", "planned"), ("reclaim", "Notebook team-a/nb", "apply", "applied"),
        ("quota-plan", "Cohort c", "apply", "planned"), ("quota-change", "ClusterQueue team-c-cq", "apply", "applied"),
        ("quota-change", "ClusterQueue team-b-cq", "apply", "applied"), ("quota-plan", "Cohort c", "apply", "applied"),
    ]
    events = result["events"]
    assert all("max activity 0.00 ≤ 0.05" in e["evidence"] for e in events[:6])  # the reclaim's numbers
    assert events[3]["reason"] == "replicas-to-zero: frees quota" and events[5]["reason"] == "stop-annotation: frees quota"
    assert events[6]["evidence"] == "team-b-cq h100 2 -> 4, team-c-cq h100 4 -> 2"  # the plan, decreases patched first
    assert [e["audit_id"] for e in events if e["undoable"]] == [rows[2].id, rows[4].id, rows[6].id]
    plan_id = incident.rebalanced["cohorts"][0]["plan_id"]
    assert rows[6].id == plan_id

    # The fleet, as the store holds it (hand-checked from the scenario): b-big (4 GPUs) waits in every collect;
    # nb and dep (1 GPU each) are idle in every collect (the last one is evaluated over the 30 min before T,
    # when they still ran); team-b's quota moves 2 -> 4 and team-c's 4 -> 2 between the 3rd and 4th collect.
    fleet = result["fleet"]
    assert [f["at"] for f in fleet] == [t.isoformat() for t in incident.collects]
    assert [f["pending_workloads"] for f in fleet] == [1, 1, 1, 1]
    assert [f["pending_gpus"] for f in fleet] == [4, 4, 4, 4]
    assert [f["idle_gpus"] for f in fleet] == [2, 2, 2, 2]
    assert [f["nominal_gpus"] for f in fleet] == [16, 16, 16, 16]  # the cohort's total is conserved
    changes = {(q["queue"], q["flavor"]): [(c["at"], c["before"], c["after"]) for c in q["changes"]]
               for q in result["quota"]}
    last = incident.collects[-1].isoformat()
    assert changes == {("team-a-cq", "h100"): [], ("team-b-cq", "h100"): [(last, 2, 4)],
                       ("team-c-cq", "h100"): [(last, 4, 2)]}
    # A window that crosses midnight (UTC) dates its instants, one within a day gives the time only.
    spans_days = window["start"][:10] != window["end"][:10]
    peak = f"{incident.collects[0]:%m-%d %H:%M}" if spans_days else f"{incident.collects[0]:%H:%M}"
    assert result["summary"].endswith(": 2 reclaims applied, 2 dry-run reclaim decisions (2 planned), 1 quota plan "
                                      "applied; backlog peaked at "
                                      f"1 workload ({peak}), idle GPUs at most 2 over 4 collects.")

    review = _artifact("incident-review")
    markdown = str(review.data)
    # its sentence is the artifact's description, shown above the page and on every card: once, not twice
    assert review.description == result["summary"] and result["summary"] not in markdown
    assert "10 audit rows: 5 decisions or actions begun in the window, 5 steps or completions." in markdown
    assert "data:image/png;base64,iVBOR" in markdown  # the plot: a PNG (base64 of \\x89PNG)
    lines = [line for line in markdown.splitlines() if line.startswith("- **")]
    assert [int(line.split("`#")[1].split("`")[0]) for line in lines] == [r.id for r in rows]
    assert "undoable (`undo: [" in lines[2] and "| team-b-cq | h100 | 2 |" in markdown
    found = _artifact("incident-review-timeline")
    table_rows = json.loads(found.data) if isinstance(found.data, str) else found.data
    assert [r["audit id"] for r in table_rows] == [r.id for r in rows]
    # the table's description says what it lists (the summary is the markdown's description)
    assert found.description == (f"Incident review timeline: the {len(rows)} audit rows of the window, oldest first; "
                                 "each one's reason and evidence in incident-review")


def test_the_deployment_defaults_review_the_last_hour(incident: Incident, pointed_at: EmbeddedCluster) -> None:
    """``prefect deployment run incident_review/incident_review`` with no parameters: the hour up to now."""
    result = _review()
    assert len(result["fleet"]) == 4 and len(result["events"]) == 10 and result["undo"] == []
    assert _artifact("incident-review").description == result["summary"]


@pytest.mark.parametrize(("filters", "objects", "pending", "idle", "nominal"), [
    ({"namespaces": ["team-a"]}, {"Deployment team-a/dep", "Notebook team-a/nb"}, 0, 2, [10, 10, 10, 10]),
    # The quota plan raised team-b's queue: its intent, that queue's patch and the completion; not team-c's patch.
    ({"namespaces": ["team-b"]}, {"Cohort c", "ClusterQueue team-b-cq"}, 1, 0, [2, 2, 2, 4]),
    ({"queues": ["team-c-cq"]}, {"Cohort c", "ClusterQueue team-c-cq"}, 0, 0, [4, 4, 4, 2]),
    ({"namespaces": ["team-a"], "queues": ["team-b-cq"]}, set(), 0, None, [0, 0, 0, 0]),
], ids=["namespace-team-a", "namespace-team-b", "queue-team-c", "namespace-and-other-queue"])
def test_filters_keep_the_rows_and_series_of_their_scope(incident: Incident, pointed_at: EmbeddedCluster,
                                                         filters: dict[str, list[str]], objects: set[str],
                                                         pending: int, idle: int | None, nominal: list[int]) -> None:
    result = _review(**_window(incident), **filters)
    assert {e["object"] for e in result["events"]} == objects
    assert all(f["pending_workloads"] == pending for f in result["fleet"])
    assert all(f["idle_gpus"] == idle for f in result["fleet"])
    assert [f["nominal_gpus"] for f in result["fleet"]] == nominal
    if idle is None:
        assert any("idle GPUs are not shown" in n for n in result["notes"])


def test_undo_through_the_review_restores_one_and_refuses_one_changed_since(incident: Incident,
                                                                            pointed_at: EmbeddedCluster) -> None:
    dep_id, nb_id = (next(d["audit_id"] for d in incident.applied["decisions"] if d["name"] == n) for n in ("dep", "nb"))
    # its team scaled it up beyond what it had (back to what it had would be a restart: undone by the mark alone)
    pointed_at.store.patch("Deployment", "team-a", "dep", {"spec": {"replicas": 5}})
    result = _review(**_window(incident), undo=[nb_id, dep_id])
    by_id = {u["audit_id"]: u for u in result["undo"]}
    assert by_id[nb_id]["result"] == "restored"
    assert by_id[dep_id]["result"] == "skipped" and "replicas" in by_id[dep_id]["message"]
    nb = pointed_at.store.get("Notebook", "team-a", "nb")
    assert "kubeflow-resource-stopped" not in (nb["metadata"].get("annotations") or {})
    assert pointed_at.store.get("Deployment", "team-a", "dep")["spec"]["replicas"] == 5  # not overwritten
    assert result["summary"].endswith("; undo: 1 restored, 1 refused.")
    # The window reaches past now: the undo's own audit rows are in the timeline, and nb is no longer undoable.
    restores = [e for e in result["events"] if e["action"] == "restore"]
    assert {e["object"] for e in restores} == {"Notebook team-a/nb", "Deployment team-a/dep"}
    assert not next(e for e in result["events"] if e["audit_id"] == nb_id)["undoable"]

    markdown = str(_artifact("incident-review").data)
    assert "## Undo" in markdown and f"- undone: `#{nb_id}` Notebook team-a/nb" in markdown
    assert f"- refused: `#{dep_id}` Deployment team-a/dep (skipped): " in markdown

    again = _review(**_window(incident), undo=[nb_id])
    assert again["undo"][0]["result"] == "no-op" and "already restored" in again["undo"][0]["message"]


def test_an_undo_that_cannot_get_the_writes_lock_writes_nothing_and_says_so(
        incident: Incident, pointed_at: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.actions.reclaim_scenario import writes

    monkeypatch.setenv("GPUAAS_WRITES_WAIT_SECONDS", "1")
    plan_id = incident.rebalanced["cohorts"][0]["plan_id"]
    store = open_store(load_settings())
    try:
        assert store.acquire_lock("cluster-writes", "rebalance-elsewhere", timedelta(minutes=5))
        before = writes(pointed_at)
        result = _review(**_window(incident), undo=[plan_id])
        assert writes(pointed_at) == before and result["undo"] == []
    finally:
        store.release_lock("cluster-writes", "rebalance-elsewhere")
        store.close()
    assert "rebalance-elsewhere holds the 'cluster-writes' lock" in result["writes_busy"]
    assert result["summary"].endswith(f"; nothing undone ({result['writes_busy']}).")
    assert f"Nothing was undone: {result['writes_busy']}." in str(_artifact("incident-review").data)


def test_an_unknown_undo_id_fails_the_run_and_undoes_nothing(incident: Incident, pointed_at: EmbeddedCluster) -> None:
    from flows.incident import incident_review

    plan_id = incident.rebalanced["cohorts"][0]["plan_id"]
    state = incident_review(**_window(incident), undo=[plan_id, 99999], return_state=True)
    assert state.is_failed() and "no audit row #99999" in str(state.result(raise_on_failure=False))
    store = open_store(load_settings())
    try:
        assert not [r for r in store.audit(refers_to=[plan_id], limit=None) if r.action == "restore"]
    finally:
        store.close()


def test_an_undo_the_cluster_refuses_ends_the_run_failed_with_its_review(incident: Incident,
                                                                         pointed_at: EmbeddedCluster) -> None:
    """The writer's role is not bound (the reader's alone): the undo of the quota plan is refused with a 403. The run
    ends Failed, as ``gpuaas incident --undo`` exits 1 for it, and still returns the review saying so."""
    from flows._outcome import result_of
    from flows.incident import incident_review
    from gpuaas.cluster.apiserver import RBACRules

    plan_id = incident.rebalanced["cohorts"][0]["plan_id"]
    manifest = Path(__file__).resolve().parents[2] / "deployments" / "kubernetes" / "rbac.yaml"
    pointed_at.api.rbac = RBACRules.from_manifest(manifest, ["gpuaas-reader"])
    try:
        state = incident_review(**_window(incident), undo=[plan_id], return_state=True)
    finally:
        pointed_at.api.rbac = None
    assert state.is_failed(), state.message
    review = result_of(state.result(raise_on_failure=False))
    assert [u["result"] for u in review["undo"]] == ["failed"], review["undo"]
    assert state.message == review["summary"]


def _cli(*args: str) -> Any:
    from typer.testing import CliRunner

    from gpuaas.cli.app import app

    return CliRunner().invoke(app, ["incident", *args])


def test_cli_prints_the_review_as_json_table_and_markdown(incident: Incident, pointed_at: EmbeddedCluster) -> None:
    window = _window(incident)
    span = ["--from", window["start"], "--to", window["end"]]
    done = _cli(*span, "--namespace", "team-a", "--format", "json")
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    assert {"summary", "start", "end", "fleet", "quota", "events", "actions", "notes", "undo"} <= set(doc)
    assert doc["namespaces"] == ["team-a"] and {e["namespace"] for e in doc["events"]} == {"team-a"}
    assert "markdown" not in doc and "base64" not in done.stdout
    assert " ".join(doc["summary"].split()) in " ".join(done.stderr.split())  # its first line, beside the JSON

    table = _cli(*span, "--queue", "team-b-cq", "--format", "table")
    assert table.exit_code == 0, table.output
    first = table.stdout.splitlines()[0]
    assert first.startswith(f"{incident.collects[0]:%Y-%m-%d}") and "(queue team-b-cq)" in first
    assert "Decisions and actions" in table.stdout and "Nominal quota changes" in table.stdout
    assert "team-b-cq" in table.stdout and "2 -> 4" in table.stdout

    markdown = _cli(*span, "--format", "markdown")
    assert markdown.exit_code == 0, markdown.output
    lines = markdown.stdout.splitlines()
    assert lines[0].startswith("**") and "quota plan applied" in lines[0]
    assert "## What gpuaas decided and did, oldest first" in lines and "base64" not in markdown.stdout


@pytest.mark.parametrize(("args", "code", "message"), [
    (["--from", "yesterday-ish"], 2, "Invalid value for '--from' / '--since': expected an ISO time"),
    (["--from", "2026-11-29T03:00", "--to", "2026-11-29T02:00"], 2, "is not before end"),
    (["--from", "2h", "--to", "3h"], 2, "is not before end"),
    (["--undo", "99999"], 1, "--undo: no audit row #99999"),
], ids=["bad-time", "from-after-to", "relative-backwards", "unknown-audit-id"])
def test_cli_bad_input_is_one_error_line(incident: Incident, pointed_at: EmbeddedCluster, args: list[str],
                                         code: int, message: str) -> None:
    """A time or window given wrong is a usage error (2); an id the log does not hold a failure (1)."""
    from tests.actions.reclaim_scenario import writes

    before = writes(pointed_at)
    done = _cli(*args)
    assert done.exit_code == code, done.output
    assert done.stdout == ""
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and message in line
    assert writes(pointed_at) == before

