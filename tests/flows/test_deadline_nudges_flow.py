"""Nudging Kueue toward the deadline plan, end to end on the embedded cluster (official client, real
Prometheus, Prefect harness). Scenario: ``tests/flows/deadline_scenario.py``.

Cohort fc has a proven plan that Kueue's own order would miss: its two late Workloads start in 50 min
and the wide one, which Kueue would admit first, in 110 min. With a 30 min release margin each is
held (``spec.active: false``) until its start less the margin, the least urgent first under the cap:
the wide one until 80 min from now. Cohort rush cannot meet every deadline on its GPUs: nothing there
is held. Covers dry-run (no writes), apply with a cap of 1
(one held, one deferred, audited with the plan), undo (released, annotation gone), the release
at ``release_at`` from the objects alone, with no snapshot and no plan, and a Workload in Kueue's requeue
backoff planned after it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuaas.actions._kube_writer import KubeWriter
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.operations.deadlines import release_sweep
from gpuaas.policies.deadlines import HOLD_ANNOTATION
from gpuaas.settings import load_settings
from gpuaas.store import open_store
from tests.actions.reclaim_scenario import writes
from tests.scenarios import point_at

pytestmark = [pytest.mark.integration, pytest.mark.flow]


@pytest.fixture(scope="module")
def cluster(deadline_fleet: EmbeddedCluster) -> EmbeddedCluster:
    return deadline_fleet  # one cluster for the plan and nudge tests: each leaves no hold behind


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("nudges-data")


@pytest.fixture()
def pointed_at(cluster: EmbeddedCluster, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> EmbeddedCluster:
    policy = data_dir / "policy.yaml"
    policy.write_text(yaml.safe_dump({"deadlines": {"max_holds_per_run": 1, "release_margin_minutes": 30,
                                                 "runtime_estimate_error": 1}}))
    return point_at(cluster, monkeypatch, data_dir=data_dir, policy_file=policy)


def _run(**params: Any) -> dict[str, Any]:
    from flows.deadlines import deadlines

    state = deadlines(**params, return_state=True)
    assert state.is_completed(), state.message
    return state.result()  # type: ignore[no-any-return]


def _workloads(cluster: EmbeddedCluster, namespace: str) -> list[dict[str, Any]]:
    return [o for o in cluster.store.list("Workload") if o["metadata"]["namespace"] == namespace]


def _held(cluster: EmbeddedCluster) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: json.loads(o["metadata"]["annotations"][HOLD_ANNOTATION])
            for o in cluster.store.list("Workload") if HOLD_ANNOTATION in (o["metadata"].get("annotations") or {})}


def test_dry_run_plans_holds_and_writes_nothing(pointed_at: EmbeddedCluster, prefect_harness: None) -> None:
    before = writes(pointed_at)
    result = _run(at=pointed_at.clock.now())
    assert writes(pointed_at) == before and result["mode"] == "dry-run"
    holds = [n for n in result["nudges"] if n["action"] == "hold"]
    assert [n["result"] for n in holds] == ["planned", "deferred", "deferred"]  # the cap of 1
    assert "-fc-wide-" in holds[0]["workload"]  # the least urgent first
    assert all(n["workload"].startswith("forecast/") for n in holds)  # rush's plan is not feasible: no holds there
    assert result["headline"].endswith(" 1 hold would be written (dry-run).")  # what it would do, in numbers


def test_a_workload_in_its_requeue_backoff_is_planned_after_it_and_needs_no_hold(
        pointed_at: EmbeddedCluster, prefect_harness: None) -> None:
    """Evicted with a backoff, the wide Workload stays out of Kueue's queue for two hours
    (``status.requeueState.requeueAt``): the plan starts it then, Kueue's own order (which would otherwise give it
    the GPUs first) now meets every deadline too, and nothing is held."""
    [wide] = [o for o in _workloads(pointed_at, "forecast") if "-fc-wide-" in o["metadata"]["name"]]
    name, now = wide["metadata"]["name"], pointed_at.clock.now()
    requeue_at = (now + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    pointed_at.store.patch("Workload", "forecast", name, {"status": {"requeueState": {"count": 1, "requeueAt": requeue_at}}},
                           subresource="status")
    try:
        result = _run(at=now)
    finally:
        pointed_at.store.patch("Workload", "forecast", name, {"status": {"requeueState": None}}, subresource="status")
    [fc] = [p for p in result["pools"] if p["cohort"] == "fc"]
    starts = {s["name"]: s["start"] for s in fc["schedule"]}
    assert starts[f"forecast/{name}"] == pytest.approx(7200, abs=1)
    assert f"forecast/{name} is in Kueue's requeue backoff for 120 min more" in " ".join(fc["notes"])
    assert fc["feasible"] and fc["exact"] and (fc["plan_on_time"], fc["kueue_order_on_time"]) == (5, 5)
    assert [n for n in result["nudges"] if n["action"] == "hold"] == []
    assert "requeueState" not in pointed_at.store.get("Workload", "forecast", name)["status"]


def test_apply_holds_one_with_its_plan_and_undo_releases_it(pointed_at: EmbeddedCluster,
                                                            prefect_harness: None) -> None:
    now = pointed_at.clock.now()
    result = _run(apply=True, at=now)
    [applied] = [n for n in result["nudges"] if n["result"] == "applied"]
    assert result["headline"].endswith(" 1 hold written.")
    held = _held(pointed_at)
    assert list(held) == [applied["workload"].split("/")[1]]
    [(name, mark)] = held.items()
    assert mark["audit_id"] == applied["audit_id"] and mark["before"] == {"active": True}
    release_at = datetime.fromisoformat(mark["release_at"])
    assert release_at == pytest.approx(now + timedelta(minutes=80), abs=timedelta(minutes=2))
    obj = pointed_at.store.get("Workload", "forecast", name)
    assert obj["spec"]["active"] is False

    store = open_store(load_settings())
    try:
        intent = store.get_audit(applied["audit_id"])
        assert intent is not None and intent.action == "deadline-hold" and intent.outcome == "planned"
        assert intent.evidence["plan_exact"] and intent.evidence["plan_feasible"]
        assert intent.evidence["planned_start_s"] == pytest.approx(6600, abs=90)
        assert intent.evidence["latest_start_s"] >= intent.evidence["planned_start_s"]
        assert len(intent.evidence["schedule"]) == 5  # the pool's plan: 2 running, 3 pending
        # why it is held at all: Kueue's own order meets fewer of the pool's deadlines on the same estimates
        assert (intent.evidence["plan_on_time"], intent.evidence["kueue_order_on_time"]) == (5, 3)
    finally:
        store.close()
    again = _run(apply=True, at=now)  # the held one stays held; the other is the one new hold
    assert not [n for n in again["nudges"] if n["action"] == "release"]
    assert len(_held(pointed_at)) == 2

    from typer.testing import CliRunner

    from gpuaas.cli.app import app

    cli = CliRunner().invoke(app, ["undo", str(applied["audit_id"]), "--format", "json"])  # the one undo command
    assert cli.exit_code == 0, cli.output
    assert [u["result"] for u in json.loads(cli.stdout)["undo"]] == ["restored"]
    obj = pointed_at.store.get("Workload", "forecast", name)
    assert obj["spec"]["active"] is True and HOLD_ANNOTATION not in (obj["metadata"].get("annotations") or {})
    assert _run(undo=[applied["audit_id"]])["undo"][0]["result"] == "no-op"  # undo twice: nothing more


def test_release_at_its_time_needs_no_plan(pointed_at: EmbeddedCluster) -> None:
    settings = load_settings()
    held = _held(pointed_at)
    assert held, "the previous test leaves one hold"
    [(name, mark)] = held.items()
    release_at = datetime.fromisoformat(mark["release_at"])
    store = open_store(settings)
    try:
        with KubeWriter(settings) as writer:
            early = release_sweep(_workloads(pointed_at, "forecast"), store, writer,
                                  now=release_at - timedelta(seconds=1), flow_run_id=None)
            assert early.nudges == ()
            [done] = release_sweep(_workloads(pointed_at, "forecast"), store, writer, now=release_at,
                                   flow_run_id=None).nudges
    finally:
        store.close()
    assert done.result == "released" and done.nudge.name == name
    obj = pointed_at.store.get("Workload", "forecast", name)
    assert obj["spec"]["active"] is True and not _held(pointed_at)


def _make_due(cluster: EmbeddedCluster, now: datetime) -> None:
    """Move the one hold's release time to a minute before ``now``, as time passing would."""
    [(name, mark)] = _held(cluster).items()
    [obj] = [o for o in cluster.store.list("Workload") if o["metadata"]["name"] == name]
    mark = {**mark, "release_at": (now - timedelta(minutes=1)).isoformat()}
    cluster.store.patch("Workload", obj["metadata"]["namespace"], name,
                        {"metadata": {"annotations": {HOLD_ANNOTATION: json.dumps(mark)}}})


def test_a_dry_run_for_another_instant_releases_no_hold(
        cluster: EmbeddedCluster, tmp_path: Path, prefect_harness: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A release is written in a dry-run too, so one for an earlier instant (when the plan did not need it yet)
    must write none: the hold is the present plan's. One for a later instant (when the hold is due) is refused
    before it reads anything, as every run looking ahead is."""
    from flows.deadlines import deadlines

    policy = tmp_path / "policy.yaml"
    rules = {"max_holds_per_run": 1, "release_margin_minutes": 30, "runtime_estimate_error": 1}
    policy.write_text(yaml.safe_dump({"deadlines": {"mode": "apply", **rules}}))
    point_at(cluster, monkeypatch, data_dir=tmp_path / "data", policy_file=policy)  # a store of its own
    now = cluster.clock.now()
    _run(at=now)
    [mark] = _held(cluster).values()
    policy.write_text(yaml.safe_dump({"deadlines": rules}))  # dry-run from here on
    before = writes(cluster)
    result = _run(at=now - timedelta(days=1))
    assert result["released"] == [] and _held(cluster) and writes(cluster) == before
    assert all(n["result"] != "released" for n in result["nudges"])
    ahead = deadlines(at=datetime.fromisoformat(mark["release_at"]) + timedelta(minutes=1), return_state=True)
    assert ahead.is_failed() and "is in the future" in str(ahead.message)
    assert _held(cluster) and writes(cluster) == before
    _make_due(cluster, now)  # and at now, the due hold is released
    assert [n["result"] for n in _run(at=now)["released"]] == ["released"] and not _held(cluster)


def test_a_change_freeze_writes_no_hold_but_still_releases_a_due_one(
        cluster: EmbeddedCluster, tmp_path: Path, prefect_harness: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A freeze must not keep a Workload held past its planned start: the release restores, so it goes through."""
    policy = tmp_path / "policy.yaml"
    rules = {"deadlines": {"mode": "apply", "max_holds_per_run": 1, "release_margin_minutes": 30,
                           "runtime_estimate_error": 1}}
    policy.write_text(yaml.safe_dump(rules))
    point_at(cluster, monkeypatch, data_dir=tmp_path / "data", policy_file=policy)  # a store of its own
    now = cluster.clock.now()
    first = _run(at=now)
    assert [n["result"] for n in first["nudges"] if n["action"] == "hold"][0] == "applied"
    _make_due(cluster, now)

    wall = datetime.now(UTC).replace(microsecond=0)
    policy.write_text(yaml.safe_dump({**rules, "freezes": [{
        "name": "launch", "start": (wall - timedelta(hours=1)).isoformat(),
        "end": (wall + timedelta(hours=1)).isoformat(), "flows": ["deadlines"]}]}))
    before = writes(cluster)
    frozen = _run(apply=True, at=now)
    assert frozen["mode"] == "dry-run" and frozen["freeze"]["name"] == "launch"
    assert [n["result"] for n in frozen["released"]] == ["released"] and not _held(cluster)
    assert not [n for n in frozen["nudges"] if n["result"] == "applied"]
    assert writes(cluster) == before + 3  # the release and its Event on the Workload and its RayCluster, nothing else
    assert frozen["headline"].startswith(f"Change freeze launch until {wall + timedelta(hours=1):%Y-%m-%d %H:%M} UTC: "
                                         "dry-run, no hold or demotion written. ")


def test_a_tenants_change_freeze_holds_none_of_its_workloads(
        cluster: EmbeddedCluster, tmp_path: Path, prefect_harness: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run applies (no freeze of the fleet), but team forecast's Workloads are neither held nor demoted."""
    policy = tmp_path / "policy.yaml"
    wall = datetime.now(UTC).replace(microsecond=0)
    policy.write_text(yaml.safe_dump({
        "deadlines": {"mode": "apply", "max_holds_per_run": 1, "release_margin_minutes": 30,
                      "runtime_estimate_error": 1},
        "tenants": [{"name": "forecast", "namespaces": ["forecast"]}],
        "freezes": [{"name": "launch", "start": (wall - timedelta(hours=1)).isoformat(),
                     "end": (wall + timedelta(hours=1)).isoformat(), "tenants": ["forecast"]}]}))
    point_at(cluster, monkeypatch, data_dir=tmp_path / "data", policy_file=policy)  # a store of its own
    before = writes(cluster)
    result = _run(at=cluster.clock.now())
    assert result["mode"] == "apply" and result["freeze"] is None
    held_back = [n for n in result["nudges"] if n["workload"].startswith("forecast/") and n["action"] in ("hold", "demote")]
    # without the freeze this run holds one of forecast's pending Workloads (the test above)
    assert held_back and {(n["result"], n["reason"]) for n in held_back} == {
        ("skipped", f"held back by the change freeze launch of tenant forecast until {wall + timedelta(hours=1):%Y-%m-%d %H:%M} UTC")}
    assert not _held(cluster) and writes(cluster) == before


def test_apply_refuses_an_at_far_from_now_before_it_releases_or_holds(pointed_at: EmbeddedCluster,
                                                                      prefect_harness: None) -> None:
    """Two hours ahead the hold below is due, and two hours back a new hold's release time is already past:
    either way an apply run would write to the live Workloads for another instant. Refused before the
    releases too; a plan alone (nudge off) writes nothing and may look back, never ahead."""
    from flows.deadlines import deadlines

    now = pointed_at.clock.now()
    [applied] = [n for n in _run(apply=True, at=now)["nudges"] if n["result"] == "applied"]
    held = _held(pointed_at)
    before = writes(pointed_at)
    for at, says in ((now + timedelta(hours=2), "is in the future"),
                     (now - timedelta(hours=2), "collect.max_staleness_seconds")):
        state = deadlines(apply=True, at=at, return_state=True)
        assert state.is_failed()
        assert "at: " in str(state.message) and says in str(state.message)
    assert _run(apply=True, at=now - timedelta(hours=2), nudge=False)["nudges"] == []
    assert deadlines(apply=True, at=now + timedelta(hours=2), nudge=False, return_state=True).is_failed()
    assert writes(pointed_at) == before and _held(pointed_at) == held
    assert _run(undo=[applied["audit_id"]])["undo"][0]["result"] == "released"  # leaves no hold behind
    assert not _held(pointed_at)


def test_holds_the_cluster_refuses_end_the_run_failed_and_say_why(pointed_at: EmbeddedCluster, prefect_harness: None,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The deadlines role not bound (a 403 on every hold): as reclaim and rebalance do, the run ends Failed (the
    failure notification, the runs list's red) and its headline counts the refusals, names the first and the role."""
    from flows import RunFailed
    from flows.deadlines import deadlines
    from gpuaas.errors import Forbidden

    def forbidden(self: KubeWriter, kind: str, namespace: str, name: str, body: dict[str, Any],
                  **_: Any) -> dict[str, Any]:
        raise Forbidden(f'workloads.kueue.x-k8s.io "{name}" is forbidden: User "system:serviceaccount:gpuaas:gpuaas" '
                        "cannot patch resource", status=403, kind=kind, namespace=namespace, name=name,
                        verb="patching")

    monkeypatch.setattr(KubeWriter, "patch", forbidden)
    before = writes(pointed_at)
    state = deadlines(apply=True, at=pointed_at.clock.now(), return_state=True)
    assert state.is_failed(), state.message
    ended = state.result(raise_on_failure=False)
    assert isinstance(ended, RunFailed)
    [refused] = [n for n in ended.result["nudges"] if n["result"] == "failed"]  # the cap of 1: one hold tried
    headline = ended.result["headline"]
    assert state.message == headline and f" 1 failed: {refused['reason'][:40]}" in headline
    assert headline.endswith(", bind gpuaas-deadlines (kubectl apply -f deployments/kubernetes/"
                             "rbac-apply-deadlines.yaml).")
    assert writes(pointed_at) == before and _held(pointed_at) == {}
