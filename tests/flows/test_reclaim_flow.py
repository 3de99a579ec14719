"""The reclaim flow end to end: embedded cluster, real Prometheus and Pushgateway, Prefect harness.

Scenario: ``tests/actions/reclaim_scenario.py`` (11 idle targets, one idle and opted out, skipped saying so, and 4
that get no decision). Covers: dry-run writes nothing and publishes the artifacts and the idle metric;
apply with a cap of 2 stops the 2 most wasteful (2-GPU) targets and defers the rest; the
same window again acts on no object twice; ``undo=[ids]`` restores, and again is a no-op.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gpuaas.cluster.apiserver import RBACRules
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.testbed import write_policy
from gpuaas.settings import load_settings
from gpuaas.store import open_store
from tests.actions.reclaim_scenario import IDLE_TARGETS, NEVER, OPTED_OUT, target_of, writes
from tests.scenarios import point_at

pytestmark = [pytest.mark.integration, pytest.mark.flow]

MANIFEST = Path(__file__).resolve().parents[2] / "deployments" / "kubernetes" / "rbac.yaml"


@pytest.fixture(scope="module")
def cluster(reclaim_fleet: EmbeddedCluster) -> EmbeddedCluster:
    return reclaim_fleet


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store for the module: the runs below build on each other's audit rows."""
    return tmp_path_factory.mktemp("reclaim-flow-data")


@pytest.fixture()
def pointed_at(cluster: EmbeddedCluster, data_dir: Path, pushgateway_url: str,
               monkeypatch: pytest.MonkeyPatch) -> EmbeddedCluster:
    return point_at(cluster, monkeypatch, data_dir=data_dir, pushgateway_url=pushgateway_url,
                    policy_file=write_policy(data_dir / "policy.yaml", max_actions_per_run=2))


def _run(**params: Any) -> dict[str, Any]:
    from flows.reclaim import reclaim

    state = reclaim(**params, return_state=True)
    assert state.is_completed(), state.message
    return state.result()  # type: ignore[no-any-return]


def _at(cluster: EmbeddedCluster) -> datetime:
    return cluster.clock.now()


def test_dry_run_decides_publishes_and_writes_nothing(pointed_at: EmbeddedCluster, prefect_harness: None,
                                                      pushgateway_url: str) -> None:
    before = writes(pointed_at)
    result = _run(at=_at(pointed_at))
    assert writes(pointed_at) == before
    assert result["mode"] == "dry-run"
    got = {target_of(d): d for d in result["decisions"]}
    assert set(got) == IDLE_TARGETS | {OPTED_OUT} and not NEVER & {n for _, n in got}
    assert (got[OPTED_OUT]["result"], got[OPTED_OUT]["cause"]) == ("skipped", "opted-out")
    assert sorted(d["result"] for d in result["decisions"]).count("planned") == 2  # the cap holds in dry-run too
    assert {target_of(d)[1] for d in result["decisions"] if d["result"] == "planned"} == {"ray", "dep"}

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        found = {key: client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))
                 for key in ("gpuaas-reclaim-decisions", "gpuaas-reclaim-summary")}
    latest = {key: max(artifacts, key=lambda a: a.created) for key, artifacts in found.items()}
    table = latest["gpuaas-reclaim-decisions"].data
    rows = json.loads(table) if isinstance(table, str) else table
    assert {"workload", "GPUs", "idle", "evidence", "result", "audit id"} <= set(rows[0])
    assert {r["workload"] for r in rows} == {f"{k} team-a/{n}" for k, n in IDLE_TARGETS | {OPTED_OUT}}
    summary = str(latest["gpuaas-reclaim-summary"].data)
    said = str(latest["gpuaas-reclaim-summary"].description)  # the headline: the description, once on the page
    assert "would be freed" in said and "$" in said and "per hour" in said and "GPU-hours" in summary
    # A dry-run publishes no verdict for workloads gpuaas stops itself (KEDA would act on it): only the
    # instant of its evidence (the KEDA path: tests/flows/test_idle_signal.py, test_signal_and_blind_runs.py).
    metrics = httpx.get(f"{pushgateway_url}/metrics").text
    assert not [line for line in metrics.splitlines() if line.startswith("gpuaas_workload_idle{")]
    [success] = [line for line in metrics.splitlines() if line.startswith("gpuaas_last_success_timestamp_seconds{")]
    assert 'job="gpuaas_reclaim"' in success and float(success.split()[-1]) == _at(pointed_at).timestamp()
    assert result["degraded"] is False


def _freeze_around_now(policy: Path) -> Path:
    """Add a change freeze from an hour ago to an hour from now (the wall clock: writes happen now)."""
    now = datetime.now(UTC).replace(microsecond=0)
    data = yaml.safe_load(policy.read_text())
    data["freezes"] = [{"name": "maintenance", "start": (now - timedelta(hours=1)).isoformat(),
                        "end": (now + timedelta(hours=1)).isoformat()}]
    policy.write_text(yaml.safe_dump(data))
    return policy


def test_a_change_freeze_holds_an_apply_back_and_withdraws_the_keda_signal(
        cluster: EmbeddedCluster, tmp_path: Path, pushgateway_url: str, prefect_harness: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The policy says apply and the operator passes --apply: a freeze still makes the run a dry-run."""
    policy = _freeze_around_now(write_policy(tmp_path / "policy.yaml", mode="apply", max_actions_per_run=2))
    point_at(cluster, monkeypatch, data_dir=tmp_path / "data", pushgateway_url=pushgateway_url, policy_file=policy)
    before = writes(cluster)
    result = _run(apply=True, at=_at(cluster))
    assert writes(cluster) == before and result["mode"] == "dry-run"
    assert result["freeze"]["name"] == "maintenance"
    assert sorted(d["result"] for d in result["decisions"]).count("planned") == 2
    until = datetime.fromisoformat(result["freeze"]["until"])
    assert result["headline"].startswith(f"Change freeze maintenance until {until:%Y-%m-%d %H:%M} UTC: dry-run, "
                                         "4 GPUs would be freed by stopping 2 idle workloads")  # 2 GPUs each
    assert "--apply" not in result["headline"]

    # KEDA scales on the idle signal in every mode: the same run without the freeze publishes it, with it not.
    def published() -> list[str]:
        return [line for line in httpx.get(f"{pushgateway_url}/metrics", timeout=10).text.splitlines()
                if line.startswith("gpuaas_workload_idle{")]

    keda = write_policy(tmp_path / "keda.yaml", actuator="keda")
    monkeypatch.setenv("GPUAAS_POLICY_FILE", str(keda))
    assert _run(at=_at(cluster))["freeze"] is None and published()
    monkeypatch.setenv("GPUAAS_POLICY_FILE", str(_freeze_around_now(keda)))
    assert _run(at=_at(cluster))["freeze"] is not None and not published()
    assert writes(cluster) == before


def _tenant_freeze(policy: Path) -> dict[str, Any]:
    """A change freeze of team-a's reclaims around now; team-g's grace cut to 0, so that its idle Notebook is a
    target of another tenant."""
    data = yaml.safe_load(_freeze_around_now(policy).read_text())
    data["freezes"][0] |= {"name": "launch", "tenants": ["team-a"], "flows": ["reclaim"]}
    [team_g] = [t for t in data["tenants"] if t["name"] == "team-g"]
    team_g["reclaim"]["grace_minutes"] = 0
    policy.write_text(yaml.safe_dump(data))
    return data


def test_a_tenants_change_freeze_holds_back_its_workloads_alone(
        cluster: EmbeddedCluster, tmp_path: Path, pushgateway_url: str, prefect_harness: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A freeze of team-a: its idle workloads are skipped, saying which freeze, and take no place under the cap;
    the run itself applies, and KEDA's signal goes for team-a's workloads alone."""
    policy = write_policy(tmp_path / "policy.yaml", mode="dry-run", max_actions_per_run=1)
    data = _tenant_freeze(policy)
    point_at(cluster, monkeypatch, data_dir=tmp_path / "data", pushgateway_url=pushgateway_url, policy_file=policy)
    result = _run(at=_at(cluster))
    assert result["freeze"] is None and result["mode"] == "dry-run"
    until = datetime.fromisoformat(data["freezes"][0]["end"])
    frozen = f"held back by the change freeze launch of tenant team-a until {until:%Y-%m-%d %H:%M} UTC"
    mine = [d for d in result["decisions"] if d["tenant"] == "team-a" and target_of(d) != OPTED_OUT]  # that one: opted out
    others = [d for d in result["decisions"] if d["tenant"] != "team-a"]
    assert len(mine) >= 2 and {(d["result"], d["reason"]) for d in mine} == {("skipped", frozen)}
    assert others, "the fleet must hold an idle workload of another tenant for this test to mean anything"
    # the cap of 1 goes to the most wasteful of the others, not to a frozen one
    assert [d["result"] for d in others].count("planned") == 1, others
    assert result["headline"].startswith("Dry-run: 1 GPU would be freed by stopping 1 idle workload")
    assert result["headline"].endswith(f"; to act: gpuaas reclaim --apply. {len(mine)} idle workloads {frozen}.")

    keda = write_policy(tmp_path / "keda.yaml", actuator="keda")
    _tenant_freeze(keda)
    monkeypatch.setenv("GPUAAS_POLICY_FILE", str(keda))
    _run(at=_at(cluster))
    published = [line for line in httpx.get(f"{pushgateway_url}/metrics", timeout=10).text.splitlines()
                 if line.startswith("gpuaas_workload_idle{")]
    assert published and not [line for line in published if 'namespace="team-a"' in line]


def test_a_given_snapshot_is_judged_without_collecting_again_and_a_far_one_is_refused(
        pointed_at: EmbeddedCluster, prefect_harness: None) -> None:
    """One collect serves a whole by-hand cycle (``snapshot_id``), within the staleness bound only."""
    from flows.collect import collect
    from flows.deadlines import deadlines
    from flows.rebalance import rebalance
    from flows.reclaim import reclaim

    at = _at(pointed_at)
    taken = collect(at=at)["snapshot_id"]
    before = writes(pointed_at)
    judged = _run(at=at, snapshot_id=taken)
    assert judged["snapshot_id"] == taken
    assert {target_of(d) for d in judged["decisions"]} == IDLE_TARGETS | {OPTED_OUT}
    assert deadlines(at=at, nudge=False, snapshot_id=taken)["snapshot_id"] == taken
    assert rebalance(at=at, snapshot_id=taken)["snapshot_id"] == taken
    store = open_store(load_settings())
    try:
        latest = store.latest_snapshot()
    finally:
        store.close()
    assert latest is not None and latest.id == taken  # none of the three collected again

    limit = load_settings().policy.collect.max_staleness_seconds
    state = reclaim(at=at - timedelta(seconds=limit + 1), snapshot_id=taken, return_state=True)
    assert state.is_failed()
    assert f"snapshot {taken} was collected at" in str(state.message) and "max_staleness_seconds" in str(state.message)
    assert writes(pointed_at) == before


def _events(cluster: EmbeddedCluster, name: str) -> dict[str, str]:
    """gpuaas's Events on the objects named ``name``: reason -> note."""
    return {e["reason"]: e["note"] for e in cluster.store.list("Event")
            if e["regarding"]["name"] == name and e["reportingController"] == "gpuaas.io/gpuaas"}


def test_apply_is_capped_by_waste_and_the_same_window_acts_once(pointed_at: EmbeddedCluster, prefect_harness: None,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    at = _at(pointed_at)
    # The shipped roles less the Event rule, as a cluster whose own roles omit it: the stops stand, the run warns.
    roles = RBACRules.from_manifest(MANIFEST, ["gpuaas-reader", "gpuaas-reclaimer"])
    pointed_at.api.rbac = RBACRules([{"apiGroups": sorted(g), "resources": sorted(r), "verbs": sorted(v)}
                                     for g, r, v in roles.rules if "events" not in r])
    try:
        first = _run(apply=True, at=at)
    finally:
        pointed_at.api.rbac = None
    applied = {target_of(d)[1] for d in first["decisions"] if d["result"] == "applied"}
    assert applied == {"ray", "dep"}  # 2 GPUs x 30 min each: the most wasteful
    [warned] = [r.getMessage() for r in caplog.records if "Kubernetes Event not recorded" in r.getMessage()]
    assert warned.startswith("Kubernetes Event not recorded on 2 changed objects: Reclaimed: ")
    assert "403" in warned and warned.endswith("(and 1 more)")
    assert _events(pointed_at, "dep") == {}
    deferred = [d for d in first["decisions"] if d["result"] == "deferred"]
    assert len(deferred) == len(IDLE_TARGETS) - 2 and all("over the cap of 2" in d["reason"] for d in deferred)
    [ray] = [d for d in first["decisions"] if target_of(d) == ("RayCluster", "ray")]
    assert pointed_at.store.get(ray["kind"], "team-a", ray["name"])["spec"]["active"] is False  # its Workload
    assert pointed_at.store.get("Deployment", "team-a", "dep")["spec"]["replicas"] == 0

    second = _run(apply=True, at=at)
    again = {target_of(d)[1]: d for d in second["decisions"]}
    for name in ("ray", "dep"):  # still admitted in the snapshot (Kueue has not reconciled): stopped by the key
        assert again[name]["result"] == "skipped", again[name]
    store = open_store(load_settings())
    try:
        rows = [r for r in store.audit(flow="reclaim", limit=None) if r.outcome == "applied"]
    finally:
        store.close()
    names = [r.name for r in rows]
    assert len(names) == len(set(names)) == 4  # two per run, never the same object twice

    # A later run over another window (different ``at``, so different idempotency keys): the live
    # objects are stopped, so nothing is acted on twice.
    third = _run(apply=True, at=at - timedelta(minutes=1))
    by_name = {target_of(d)[1]: d for d in third["decisions"]}
    for name in ("ray", "dep"):
        assert by_name.get(name, {"result": "skipped"})["result"] == "skipped", by_name.get(name)
    store = open_store(load_settings())
    try:
        names = [r.name for r in store.audit(flow="reclaim", limit=None) if r.outcome == "applied"]
    finally:
        store.close()
    assert len(names) == len(set(names)) == 6

    stopped = next(d for d in third["decisions"] if d["result"] == "applied")  # its Event is recorded
    assert _events(pointed_at, stopped["name"])["Reclaimed"].endswith(f"to restore it: gpuaas undo {stopped['audit_id']}")

    undone = _run(undo=[first["decisions"][0]["audit_id"]])["undo"]
    assert undone[0]["result"] == "restored"
    assert f"undo of audit #{first['decisions'][0]['audit_id']}" in _events(pointed_at, first["decisions"][0]["name"])[
        "Restored"]
    assert _run(undo=[first["decisions"][0]["audit_id"]])["undo"][0]["result"] == "no-op"

    # A RayCluster stopped through its Workload: the team describes the RayCluster, so the Event is on it too,
    # naming the Workload gpuaas wrote (``related``), as well as on the Workload itself.
    [ray] = [d for d in first["decisions"] if target_of(d) == ("RayCluster", "ray")]
    if ray["audit_id"] != first["decisions"][0]["audit_id"]:
        assert _run(undo=[ray["audit_id"]])["undo"][0]["result"] == "restored"
    [on_ray] = [e for e in pointed_at.store.list("Event") if e["regarding"]["name"] == "ray"
                and e["regarding"]["kind"] == "RayCluster" and e["reason"] == "Restored"]
    assert on_ray["note"].startswith(f"Through its Kueue Workload {ray['name']}: Restored by gpuaas")
    assert on_ray["related"]["kind"] == "Workload" and on_ray["related"]["name"] == ray["name"]
    assert "Restored" in _events(pointed_at, ray["name"])


def test_the_writes_lock_is_released_when_a_run_fails(pointed_at: EmbeddedCluster, prefect_harness: None,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuaas.actions import KubeWriter
    from tasks.writes import LOCK

    store = open_store(load_settings())
    try:
        # Someone else holds the lock: an apply run waits, writes nothing, says so, and leaves their lock alone.
        assert store.acquire_lock(LOCK, "rebalance-run", timedelta(minutes=5))
        from flows.reclaim import reclaim

        monkeypatch.setenv("GPUAAS_WRITES_WAIT_SECONDS", "0")
        before = writes(pointed_at)
        held = reclaim(apply=True, at=_at(pointed_at))
        assert "rebalance-run holds the 'cluster-writes' lock" in held["writes_busy"] and writes(pointed_at) == before
        assert not store.acquire_lock(LOCK, "probe", timedelta(minutes=5))
        store.release_lock(LOCK, "rebalance-run")

        # The run crashes while acting: the lock is released all the same.
        def broken(*_: Any, **__: Any) -> Any:
            raise RuntimeError("API server went away")

        monkeypatch.setattr(KubeWriter, "get", broken)
        failed = reclaim(apply=True, at=_at(pointed_at), return_state=True)
        assert failed.is_failed()
        assert store.acquire_lock(LOCK, "probe", timedelta(minutes=5))
        store.release_lock(LOCK, "probe")
    finally:
        store.close()


def test_an_at_without_a_zone_or_with_an_offset_is_the_same_instant_in_utc(
        cluster: EmbeddedCluster, tmp_path: Path, prefect_harness: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same window given naive (read as UTC) or as +02:00 decides as given in UTC: the same idempotency keys,
    so each finds every decision the first run planned already made (no cap in the way: all it may plan)."""
    point_at(cluster, monkeypatch, data_dir=tmp_path / "data",
             policy_file=write_policy(tmp_path / "policy.yaml", max_actions_per_run=50))
    at = _at(cluster)
    before = writes(cluster)
    planned = {d["name"]: d["audit_id"] for d in _run(at=at)["decisions"] if d["result"] == "planned"}
    assert planned
    for same in (at.replace(tzinfo=None), at.astimezone(timezone(timedelta(hours=2)))):
        again = {d["name"]: (d["result"], d["reason"]) for d in _run(at=same)["decisions"] if d["name"] in planned}
        assert again == {name: ("skipped", f"already decided for this window (audit #{audit_id})")
                         for name, audit_id in planned.items()}
    assert writes(cluster) == before


@pytest.mark.parametrize("apart", [timedelta(hours=20), -timedelta(days=1)])
def test_apply_refuses_an_at_far_from_now_and_writes_nothing(pointed_at: EmbeddedCluster, prefect_harness: None,
                                                             apart: timedelta) -> None:
    """An apply run writes to the live objects now: evidence of another instant is refused, in either direction
    (a later one in any mode: no run looks ahead)."""
    from flows.reclaim import reclaim

    store = open_store(load_settings())
    try:
        rows = len(store.audit(flow="reclaim", limit=None))
        before = writes(pointed_at)
        state = reclaim(apply=True, at=_at(pointed_at) + apart, return_state=True)
        assert state.is_failed()
        says = "is in the future" if apart > timedelta(0) else "collect.max_staleness_seconds"
        assert "at: " in str(state.message) and says in str(state.message)
        assert writes(pointed_at) == before and len(store.audit(flow="reclaim", limit=None)) == rows
    finally:
        store.close()


def test_a_stop_whose_answer_is_lost_and_cannot_be_read_back_ends_the_run_failed(
        cluster: EmbeddedCluster, tmp_path: Path, prefect_harness: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``unknown`` stop may have landed: a run that leaves one is red (its failure notification reaches a person),
    and its headline counts it and says that the next run settles it, instead of "Stopped 0 idle workloads" alone.
    (Nothing reaches the cluster here, and the store is the test's own: the open intent binds no other test.)"""
    from flows import RunFailed
    from flows.reclaim import reclaim
    from gpuaas.actions import KubeWriter
    from gpuaas.errors import TransientError

    point_at(cluster, monkeypatch, data_dir=tmp_path / "data",
             policy_file=write_policy(tmp_path / "policy.yaml", max_actions_per_run=1))
    read, patched = KubeWriter.get, []

    def lost_answer(self: KubeWriter, kind: str, namespace: str, name: str, body: dict[str, Any],
                    **_: Any) -> dict[str, Any]:
        patched.append(name)
        raise TransientError(f"patching {kind} {namespace}/{name}: connection reset by peer")

    def read_back(self: KubeWriter, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if patched:  # the read-back after the lost answer fails too
            raise TransientError("reading back: connection reset by peer")
        return read(self, *args, **kwargs)

    monkeypatch.setattr(KubeWriter, "patch", lost_answer)
    monkeypatch.setattr(KubeWriter, "get", read_back)
    before = writes(cluster)
    state = reclaim(apply=True, at=_at(cluster), return_state=True)
    assert state.is_failed(), state.message
    ended = state.result(raise_on_failure=False)
    assert isinstance(ended, RunFailed)
    [unknown] = [d for d in ended.result["decisions"] if d["result"] == "unknown"]
    assert not [d for d in ended.result["decisions"] if d["result"] in ("applied", "failed")]
    assert state.message == ended.result["headline"] == (
        "No idle workload stopped; 1 unknown (the stop's answer was lost and the "
        "read-back failed: it may have landed; the next run settles it from the object).")
    assert unknown["audit_id"] and writes(cluster) == before


def test_the_stop_of_a_killed_run_is_settled_and_named_in_the_next_runs_headline(
        cluster: EmbeddedCluster, tmp_path: Path, prefect_harness: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run killed after its patch landed left an open intent: the next apply run closes it from the object, and
    its headline says so with the id to undo, instead of counting only its own stops (the killed run's GPUs would
    otherwise be found only in the audit log). Both stops are undone at the end: the cluster is the module's."""
    from flows.reclaim import reclaim
    from tests.actions.reclaim_scenario import crash_after_each_patch

    point_at(cluster, monkeypatch, data_dir=tmp_path / "data",
             policy_file=write_policy(tmp_path / "policy.yaml", max_actions_per_run=1))
    with monkeypatch.context() as killed:
        crash_after_each_patch(killed)
        state = reclaim(apply=True, at=_at(cluster), return_state=True)
    assert state.is_failed(), state.message
    store = open_store(load_settings())
    try:
        rows = store.audit(flow="reclaim", limit=None)
    finally:
        store.close()
    # the intent, and no completion row: the run died between the patch and its record
    [intent] = [r for r in rows if r.action == "reclaim" and r.outcome == "planned"]
    assert not [r for r in rows if r.refers_to == intent.id]

    after = _run(apply=True, at=_at(cluster))
    target = f"{intent.kind} {intent.namespace}/{intent.name}"
    assert after["settled"] == [{"action": "reclaim", "outcome": "applied", "intent_id": intent.id, "target": target}]
    assert after["headline"].endswith(
        f" An interrupted run had left 1 write open, settled now from the objects: 1 stop had landed "
        f"(to reverse: gpuaas undo {intent.id}).")
    own = [d["audit_id"] for d in after["decisions"] if d["result"] == "applied"]
    assert own and intent.id not in own  # this run's own stop is counted apart from the killed run's
    undone = _run(undo=[intent.id, *own])
    assert sorted(u["result"] for u in undone["undo"]) == ["restored"] * (1 + len(own))


def test_a_lock_the_database_cannot_release_after_the_writes_leaves_the_run_completed(
        cluster: EmbeddedCluster, tmp_path: Path, prefect_harness: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The database gone for good at the very end: the stop is made and recorded, so the run is Completed with its
    headline and undo hint (it was Failed, its headline lost), and the lock waits for its lease, with a warning."""
    import tasks.writes as writes_module
    from flows.reclaim import reclaim
    from gpuaas.errors import StoreError

    point_at(cluster, monkeypatch, data_dir=tmp_path / "data",
             policy_file=write_policy(tmp_path / "policy.yaml", max_actions_per_run=1))
    attempts: list[str] = []

    def unreachable(settings: object, holder: str) -> None:
        attempts.append(holder)
        raise StoreError("the gpuaas database at postgresql://gpuaas:***@db/gpuaas: server closed the connection "
                         "unexpectedly")

    original = writes_module.release_writes_lock
    monkeypatch.setattr(writes_module, "release_writes_lock", unreachable)
    state = reclaim(apply=True, at=_at(cluster), return_state=True)
    assert state.is_completed(), state.message
    result = state.result()
    [applied] = [d["audit_id"] for d in result["decisions"] if d["result"] == "applied"]
    assert f"to reverse: gpuaas undo {applied}" in result["headline"] and len(attempts) == 1
    with open_store(load_settings()) as store:
        assert store.lock_holder(writes_module.LOCK) == attempts[0]  # left to its lease
        store.release_lock(writes_module.LOCK, attempts[0])
    monkeypatch.setattr(writes_module, "release_writes_lock", original)
    undone = _run(undo=[applied])
    assert [u["result"] for u in undone["undo"]] == ["restored"]  # the cluster is the module's
