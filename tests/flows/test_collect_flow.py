"""The collect flow end to end: embedded cluster, real Prometheus, real Pushgateway, Prefect harness.

Hand-checked scenario (2 nodes x 4 H100 at $3/GPU-hour, cohort ``c``, 2 h of history, ManualClock):

* ``busy`` RayCluster, team-a, 2 GPUs at activity 0.6           -> admitted, busy
* ``nb``   Notebook,   team-b, 1 GPU at 0.0                      -> admitted, the one idle candidate
* ``dark`` StatefulSet, team-b, 1 GPU, telemetry dropped         -> admitted, telemetry unknown
* ``big``  RayCluster, team-b, 2 pods x 3 GPUs, submitted at 10m -> 6 GPUs > the 4 left: pending 110 min

So team-a-cq: 2 of 4 GPUs admitted, no backlog; team-b-cq: 2 of 4 admitted, 1 workload / 6 GPUs
waiting for 6,600 s.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.models import Snapshot
from gpuaas.settings import load_settings
from gpuaas.store import SnapshotRecord, open_store
from tests.scenarios import embedded, point_at
from tests.sources.helpers import fixture_path

pytestmark = [pytest.mark.integration, pytest.mark.flow]

@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with embedded(tmp_path_factory.mktemp("collect"), seed=3) as running:
        yield running


@pytest.fixture()
def pointed_at(cluster: EmbeddedCluster, pushgateway_url: str, monkeypatch: pytest.MonkeyPatch) -> EmbeddedCluster:
    return point_at(cluster, monkeypatch, pushgateway_url=pushgateway_url, nvml="auto")


def test_collect_flow_backlog_usage_activity_exact(pointed_at: EmbeddedCluster, prefect_harness: None) -> None:
    from flows.collect import collect

    at = pointed_at.clock.now()
    summary = collect(at=at)

    queues = {q["name"]: q for q in summary["queues"]}
    assert queues["team-a-cq"] | {} == {
        "name": "team-a-cq", "cohort": "c", "pending_workloads": 0, "pending_gpus": 0.0,
        "oldest_pending_seconds": None, "admitted_gpus": 2.0, "nominal_gpus": 4.0}
    assert queues["team-b-cq"] == {
        "name": "team-b-cq", "cohort": "c", "pending_workloads": 1, "pending_gpus": 6.0,
        "oldest_pending_seconds": 6600.0, "admitted_gpus": 2.0, "nominal_gpus": 4.0}
    assert {n: s["ok"] for n, s in summary["sources"].items()} == {
        "kube": True, "prometheus": True, "opencost": True, "nvml": False}
    assert summary["degraded"] is False  # NVML is optional in auto mode
    assert summary["workloads"] == 4 and summary["unknown_telemetry"] == 1 and summary["idle_candidates"] == 1
    # dark's dcgm series were dropped: no sample of its one GPU, so the policy can call it neither idle nor busy.
    assert summary["unjudged"] == [{"workload": "StatefulSet team-b/dark", "gpus": 1.0,
                                    "why": "telemetry incomplete for the window (no sample in the window, 0/1 GPUs seen)"}]
    assert summary["unjudged_count"] == 1
    assert summary["headline"] == (f"Snapshot {summary['snapshot_id']}: 4 workloads, 6 GPUs waiting, 1 idle candidate, "
                                   "1 GPU workload it cannot judge (never reclaimed); next: gpuaas reclaim shows "
                                   "what would be stopped.")

    store = open_store(load_settings())
    record = store.latest_snapshot()
    store.close()
    assert record is not None and record.id == summary["snapshot_id"] and record.collected_at == at
    snapshot = Snapshot.from_json(record.payload["snapshot"])
    wl = snapshot.workloads.set_index("owner_name")
    assert abs(wl.loc["busy", "activity_avg_30m"] - 0.6) < 0.01
    assert wl.loc["nb", "activity_max_30m"] == 0.0 and wl.loc["nb", "telemetry"] == "complete"
    assert wl.loc["dark", "telemetry"] == "unknown"
    assert wl.loc["big", "state"] == "pending"


def test_collect_pushes_summary_metrics(pointed_at: EmbeddedCluster, pushgateway_url: str,
                                       prefect_harness: None) -> None:
    from flows.collect import collect

    summary = collect(at=pointed_at.clock.now())
    text = httpx.get(f"{pushgateway_url}/metrics", timeout=5).text
    samples = {(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("instance",)))): s.value
               for fam in text_string_to_metric_families(text) for s in fam.samples
               if s.name.startswith("gpuaas_")}
    job = ("job", "gpuaas_collect")
    assert samples[("gpuaas_backlog_gpus", (("cluster_queue", "team-b-cq"), ("cohort", "c"), job))] == 6.0
    assert samples[("gpuaas_oldest_pending_seconds", (("cluster_queue", "team-b-cq"), ("cohort", "c"), job))] == 6600
    assert samples[("gpuaas_idle_candidates", (job,))] == 1.0
    assert samples[("gpuaas_source_up", (job, ("source", "prometheus")))] == 1.0
    assert samples[("gpuaas_unknown_telemetry_workloads", (job,))] == 1.0
    assert samples[("gpuaas_unjudged_workloads", (job,))] == 1.0  # dark, its telemetry dropped
    assert summary["pushed_samples"] == sum(1 for _, labels in samples if job in labels)


def test_collect_pushes_what_the_policy_lets_each_flow_write(pointed_at: EmbeddedCluster, pushgateway_url: str,
                                                              prefect_harness: None, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Reclaim set to apply, under a freeze of the whole fleet that ends in 2 h: the Pushgateway holds its mode,
    that it does not write, and until when; the freeze names reclaim only, so the others are not held back."""
    from flows.collect import collect

    at = pointed_at.clock.now()
    ends = at + timedelta(hours=2)
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"reclaim: {{mode: apply}}\nfreezes:\n- {{name: incident, start: '{at.isoformat()}', "
                      f"end: '{ends.isoformat()}', flows: [reclaim]}}\n")
    monkeypatch.setenv("GPUAAS_POLICY_FILE", str(policy))
    collect(at=at)
    text = httpx.get(f"{pushgateway_url}/metrics", timeout=5).text
    samples = {(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("instance", "job")))): s.value
               for fam in text_string_to_metric_families(text) for s in fam.samples
               if s.labels.get("job") == "gpuaas_collect" and s.name.startswith(("gpuaas_flow", "gpuaas_change"))}
    assert samples == {
        ("gpuaas_flow_apply_mode", (("flow", "reclaim"),)): 1.0,
        ("gpuaas_flow_apply_mode", (("flow", "rebalance"),)): 0.0,
        ("gpuaas_flow_apply_mode", (("flow", "deadlines"),)): 0.0,
        ("gpuaas_flow_writes_enabled", (("flow", "reclaim"),)): 0.0,
        ("gpuaas_flow_writes_enabled", (("flow", "rebalance"),)): 0.0,
        ("gpuaas_flow_writes_enabled", (("flow", "deadlines"),)): 0.0,
        ("gpuaas_change_freeze_end_timestamp_seconds", (("flow", "reclaim"), ("freeze", "incident"), ("tenant", ""))):
            ends.timestamp(),
    }


def test_collect_publishes_artifacts(pointed_at: EmbeddedCluster, prefect_harness: None) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from flows.collect import collect

    collect(at=pointed_at.clock.now())
    with get_client(sync_client=True) as client:
        backlog = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["gpuaas-collect-backlog"])))
        quality = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["gpuaas-collect-data-quality"])))
    assert backlog and quality
    latest = max(backlog, key=lambda a: a.created.timestamp() if a.created else 0.0)
    assert latest.type == "table"
    assert "team-b-cq" in str(latest.data) and "1h50m" in str(latest.data)
    assert "prometheus" in str(max(quality, key=lambda a: a.created.timestamp() if a.created else 0.0).data)


def test_collect_degrades_when_prometheus_is_down_and_fails_when_all_are(
    pointed_at: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch, prefect_harness: None, tmp_path: Path
) -> None:
    from flows.collect import collect

    monkeypatch.setenv("GPUAAS_PROMETHEUS_URL", "http://127.0.0.1:9")  # nothing listens on the discard port
    monkeypatch.setenv("GPUAAS_RETRIES", "1")
    monkeypatch.setenv("GPUAAS_RETRY_BACKOFF_SECONDS", "0")
    summary = collect(at=pointed_at.clock.now())
    assert summary["degraded"] is True and summary["sources"]["prometheus"]["ok"] is False
    assert summary["unknown_telemetry"] == 3 and summary["idle_candidates"] == 0  # missing data is never idle

    monkeypatch.setenv("GPUAAS_KUBECONFIG", str(tmp_path / "missing-kubeconfig"))
    monkeypatch.setenv("GPUAAS_OPENCOST_URL", "http://127.0.0.1:9")
    state = collect(at=pointed_at.clock.now(), return_state=True)
    assert state.is_failed() and "every source failed" in str(state.result(raise_on_failure=False))


class _Scripted:
    """A loopback OpenCost that gives one scripted answer per request (the last one repeats),
    and records when each request arrived."""

    def __init__(self, answers: list[tuple[int, bytes]]) -> None:
        self.answers, self.arrivals = answers, []  # type: list[tuple[int, bytes]], list[float]
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                scripted.arrivals.append(time.monotonic())
                status, body = scripted.answers[min(len(scripted.arrivals), len(scripted.answers)) - 1]
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


ALLOCATION = fixture_path("telemetry", "opencost", "allocation-compute.aggregate-namespace.swagger-example.json")
UNAVAILABLE = (503, b'{"code":503}')


@pytest.mark.parametrize(
    ("answers", "requests", "ok", "error"),
    [
        ([UNAVAILABLE, UNAVAILABLE, (200, ALLOCATION.read_bytes())], 3, True, None),
        ([UNAVAILABLE], 3, False, "HTTP 503"),  # 1 + GPUAAS_RETRIES attempts, then degraded
        ([(400, b'{"code":400}')], 1, False, "HTTP 400"),  # permanent: never retried
        ([(200, b"{not json")], 1, False, "not JSON"),  # malformed: retrying cannot fix it
    ],
    ids=["transient-then-ok", "transient-exhausted", "permanent-400", "malformed"],
)
def test_only_transient_errors_are_retried_with_backoff(
    pointed_at: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch, prefect_harness: None,
    answers: list[tuple[int, bytes]], requests: int, ok: bool, error: str | None,
) -> None:
    from flows.collect import collect

    opencost = _Scripted(answers)
    monkeypatch.setenv("GPUAAS_OPENCOST_URL", opencost.url)
    monkeypatch.setenv("GPUAAS_RETRIES", "2")
    monkeypatch.setenv("GPUAAS_RETRY_BACKOFF_SECONDS", "0.4")
    try:
        summary = collect(at=pointed_at.clock.now())
    finally:
        opencost.close()
    assert len(opencost.arrivals) == requests
    assert summary["sources"]["opencost"]["ok"] is ok and summary["degraded"] is not ok
    if error:
        store = open_store(load_settings())
        record = store.latest_snapshot()
        store.close()
        assert record is not None
        assert error in (Snapshot.from_json(record.payload["snapshot"]).sources["opencost"].error or "")
    if requests == 3:
        # Delays of 0.4 s then 0.8 s with jitter factor 0.5 (Prefect draws within x0.63..x1.5).
        first, second = (b - a for a, b in zip(opencost.arrivals, opencost.arrivals[1:], strict=False))
        assert first >= 0.25 and second >= 0.5


def test_collect_prunes_snapshots_past_retention(pointed_at: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch,
                                                prefect_harness: None, tmp_path: Path) -> None:
    from sqlmodel import select

    from flows.collect import collect

    policy = tmp_path / "policy.yaml"
    policy.write_text("collect:\n  windows_minutes: [30]\n  retention_days: 2\n")
    monkeypatch.setenv("GPUAAS_POLICY_FILE", str(policy))
    at = pointed_at.clock.now()
    store = open_store(load_settings())
    for age in (timedelta(days=3), timedelta(days=1)):
        store.save_snapshot(at - age, {"seeded": True}, {})
    store.close()

    summary = collect(at=at)

    store = open_store(load_settings())
    with store.session() as session:
        kept = sorted(r.collected_at for r in session.exec(select(SnapshotRecord)))
    store.close()
    assert kept == [at - timedelta(days=1), at]  # the 3-day-old one is gone, the 1-day-old one stays
    assert summary["snapshot_id"]


def test_unreachable_pushgateway_is_a_warning_not_a_failure(
    pointed_at: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch, prefect_harness: None,
) -> None:
    from flows.collect import collect

    monkeypatch.setenv("GPUAAS_PUSHGATEWAY_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("GPUAAS_RETRIES", "0")
    state = collect(at=pointed_at.clock.now(), return_state=True)
    assert state.is_completed()
    summary = state.result()
    assert summary["pushed_samples"] is None and summary["snapshot_id"]


def test_cli_collect_json_and_table(pointed_at: EmbeddedCluster, prefect_harness: None) -> None:
    """``gpuaas collect`` runs the same flow now (not at the cluster's clock: the figures that
    depend on the wall clock are bounded, the rest are exact) and prints the documented shape."""
    import json

    from typer.testing import CliRunner

    from gpuaas.cli.app import app

    runner = CliRunner()
    result = runner.invoke(app, ["collect", "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert set(doc) == {"queues", "sources", "workloads", "unknown_telemetry", "unjudged", "unjudged_count",
                        "notes", "snapshot_id", "idle_candidates", "degraded", "source_errors", "blind", "headline",
                        "cluster"}
    assert doc["notes"] == []  # every GPU of the fleet is nvidia.com/gpu, every LocalQueue's ClusterQueue exists
    assert [u["workload"] for u in doc["unjudged"]] == ["StatefulSet team-b/dark"] and doc["unjudged_count"] == 1
    assert doc["cluster"] == pointed_at.store.get("Namespace", "", "kube-system")["metadata"]["uid"]
    assert doc["degraded"] is False and doc["source_errors"] == {} and doc["headline"].startswith("Snapshot ")
    queues = {q["name"]: q for q in doc["queues"]}
    assert set(queues["team-b-cq"]) == {"name", "cohort", "pending_workloads", "pending_gpus",
                                        "oldest_pending_seconds", "admitted_gpus", "nominal_gpus"}
    assert queues["team-b-cq"]["oldest_pending_seconds"] >= 6600
    assert {k: v for k, v in queues["team-b-cq"].items() if k != "oldest_pending_seconds"} == {
        "name": "team-b-cq", "cohort": "c", "pending_workloads": 1, "pending_gpus": 6.0, "admitted_gpus": 2.0,
        "nominal_gpus": 4.0}
    assert {n: set(s) for n, s in doc["sources"].items()} == {
        n: {"ok", "latency_s", "staleness_s", "error", "required"} for n in ("kube", "prometheus", "opencost", "nvml")}
    assert doc["workloads"] == 4

    table = runner.invoke(app, ["collect", "--format", "table"])
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    [team_b] = [line for line in lines if "team-b-cq" in line]
    cells = [c.strip() for c in team_b.split("│")[1:-1]]
    assert cells[:4] == ["team-b-cq", "c", "1", "6"] and cells[5:] == ["2", "4"]  # 6, not 6.0; names never cut
    assert cells[4].startswith("1h5")  # 110 minutes and a little more: the wall clock moved on
    quality = {c[0]: c[1:] for c in ([x.strip() for x in line.split("│")[1:-1]] for line in lines) if len(c) == 5}
    assert quality["prometheus"][0] == "yes" and quality["nvml"][0] == "no (optional)"
    assert quality["nvml"][3].startswith("NVML not available")
    assert f"Snapshot {doc['snapshot_id'] + 1}: 4 workloads" in table.stdout
    assert "1 GPU workload gpuaas cannot judge, so never reclaims:" in table.stdout
    [dark] = [line for line in lines if "team-b/dark" in line]
    assert [c.strip() for c in dark.split("│")[1:3]] == ["StatefulSet team-b/dark", "1"]


NEVER_LOADED = ("prefect", "alembic", "kubernetes.client.api.core_v1_api", "kubernetes.client.api.apps_v1_api")
LOADED_BY_THE_WORK = ("kubernetes", "httpx", "sqlalchemy", "prometheus_client")
"""Imported by a plain ``gpuaas collect`` only once its work has started (the sources read, the store written,
the summary pushed: ``pointed_at`` sets a Pushgateway)."""


def test_cli_collect_without_a_prefect_api_runs_the_body_without_importing_prefect(pointed_at: EmbeddedCluster) -> None:
    """No ``PREFECT_API_URL``: the command calls the flow's Prefect-free body (importing Prefect alone costs seconds),
    an up-to-date store opens without Alembic, and the answer has the same shape as through Prefect.

    What a command pays before its work starts is what an operator waits for on every run: the clients of
    the sources, the store's SQLAlchemy and the Pushgateway's client load where they are used, and the
    Kubernetes API's generated classes (each imports every model it names, seconds of CPU) never."""
    import json
    import os
    import subprocess
    import sys

    code = ("import sys; import gpuaas.cli._flows as flows; before = []; run_body = flows._run_body\n"
            "def spy(body, what, parameters):\n"
            "    before.extend(sys.modules)\n"
            "    return run_body(body, what, parameters)\n"
            "flows._run_body = spy\n"
            "from typer.testing import CliRunner; from gpuaas.cli.app import app\n"
            "r = CliRunner().invoke(app, ['collect', '--format', 'json'])\n"
            "assert r.exit_code == 0, r.output\n"
            "print(r.stdout)\n"
            f"print([m for m in {NEVER_LOADED!r} if m in sys.modules], [m for m in {LOADED_BY_THE_WORK!r} if m in before],"
            f" [m for m in {LOADED_BY_THE_WORK!r} if m in sys.modules])")
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    for _ in range(2):  # the first one creates the database (Alembic); the second finds it up to date
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                              check=False)
        assert proc.returncode == 0, proc.stderr
    document, _, loaded = proc.stdout.rstrip().rpartition("\n")
    assert loaded == f"[] [] {list(LOADED_BY_THE_WORK)!r}"  # the last: the spy saw the work start, and what it used
    doc = json.loads(document)
    assert doc["headline"].startswith("Snapshot ") and doc["workloads"] == 4 and doc["degraded"] is False


def test_collect_keeps_queue_and_tenant_history_and_only_the_newest_full_snapshots(
    pointed_at: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch, prefect_harness: None, tmp_path: Path,
) -> None:
    """Three cycles 5 minutes apart with a full snapshot every 10 minutes, the newest 1 kept: three
    cycles of aggregates and snapshot rows, full documents at ``at - 10 min`` and ``at``, one kept.

    Hand-checked at ``at`` (module docstring): team-a holds 2 GPUs (busy); team-b holds 2 (nb idle,
    dark unknown) and waits for 6 (big, 6,600 s).
    """
    from sqlmodel import select

    from flows.collect import collect

    policy = tmp_path / "policy.yaml"
    policy.write_text("collect:\n  windows_minutes: [30]\nstore:\n  keep_full_snapshots: 1\n"
                      "  full_snapshot_every_minutes: 10\ntenants:\n"
                      "  - {name: team-a, namespaces: [team-a], cluster_queues: [team-a-cq]}\n"
                      "  - {name: team-b, namespaces: [team-b], cluster_queues: [team-b-cq]}\n")
    monkeypatch.setenv("GPUAAS_POLICY_FILE", str(policy))
    at = pointed_at.clock.now()
    cycles = [at - timedelta(minutes=10), at - timedelta(minutes=5), at]
    ids = [collect(at=when)["snapshot_id"] for when in cycles]

    store = open_store(load_settings())
    try:
        queues = store.queue_history(cycles[0], at + timedelta(seconds=1))
        tenants = store.tenant_history(cycles[1], at + timedelta(seconds=1), tenants=["team-b"])
        with store.session() as session:
            kept = sorted(int(r.id or 0) for r in session.exec(select(SnapshotRecord)))
            full = sorted(int(r.id or 0) for r in session.exec(select(SnapshotRecord)) if r.compressed is not None)
        latest = store.get_snapshot(ids[-1])
    finally:
        store.close()

    assert sorted(set(queues["collected_at"])) == cycles
    now_b = queues[(queues["collected_at"] == at) & (queues["cluster_queue"] == "team-b-cq")].iloc[0]
    assert (now_b["flavor"], now_b["cohort"], now_b["tenant"]) == ("h100", "c", "team-b")
    assert (now_b["nominal_gpus"], now_b["usage_gpus"], now_b["pending_gpus"]) == (4.0, 2.0, 6.0)
    assert (now_b["pending_workloads"], now_b["oldest_pending_seconds"]) == (1, 6600.0)
    b_before = queues[(queues["collected_at"] == cycles[0]) & (queues["cluster_queue"] == "team-b-cq")].iloc[0]
    assert b_before["oldest_pending_seconds"] == 6000.0  # the same wait, 10 minutes earlier
    assert list(tenants["collected_at"]) == cycles[1:]
    last = tenants.iloc[-1]
    assert (last["allocated_gpus"], last["idle_gpus"], last["unknown_gpus"], last["pending_gpus"]) == (
        2.0, 1.0, 1.0, 6.0)
    # Every cycle keeps its row and aggregates; the full document every 10 minutes (at-10, at), the newest 1 kept.
    assert kept == ids and full == ids[-1:]
    assert latest is not None and Snapshot.from_json(latest.payload["snapshot"]).collected_at == at


def test_a_database_holding_another_clusters_history_is_refused_before_anything_is_stored(
        pointed_at: EmbeddedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two clusters sharing one database would plan one's quotas on both's usage: the collect says so and stops."""
    from datetime import UTC, datetime

    from typer.testing import CliRunner

    from gpuaas.cli.app import app

    point_at(pointed_at, monkeypatch, data_dir=tmp_path / "shared-data")
    store = open_store(load_settings())
    try:
        store.save_snapshot(datetime(2026, 12, 5, 4, 0, tzinfo=UTC), {"cluster": "uid-of-another-cluster"}, {})
    finally:
        store.close()
    result = CliRunner().invoke(app, ["collect"])
    ours = pointed_at.store.get("Namespace", "", "kube-system")["metadata"]["uid"]
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert result.stderr.strip().splitlines()[-1] == (
        "error: GPUAAS_DATA_DIR: this database holds the history of another cluster (kube-system uid "
        f"uid-of-another-cluster, last collected 2026-12-05 04:00 UTC) than the one gpuaas reads now ({ours}): give "
        "each cluster its own database, or point gpuaas back at that cluster")
    store = open_store(load_settings())
    try:
        latest = store.latest_snapshot()
        assert latest is not None and latest.summary == {"cluster": "uid-of-another-cluster"}  # nothing stored
        assert store.queue_history(datetime(2000, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC)).empty
    finally:
        store.close()
    # the line names the setting that chose the database: the data directory above, the URL where one is set
    monkeypatch.setenv("GPUAAS_DATABASE_URL", f"sqlite:///{tmp_path / 'shared-data' / 'gpuaas.db'}")
    by_url = CliRunner().invoke(app, ["collect"])
    assert by_url.exit_code == 1 and by_url.stderr.strip().splitlines()[-1].startswith(
        "error: GPUAAS_DATABASE_URL: this database holds the history of another cluster"), by_url.output


def test_a_collect_with_no_gpu_telemetry_is_degraded_as_a_reclaim_of_it_would_be(
        pointed_at: EmbeddedCluster, prefect_harness: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Prometheus answers, but the GPU metrics named are not there (a dcgm-exporter renamed or not scraped): every GPU
    workload is unjudged. The collect says so first and is degraded (`gpuaas collect` exits 3), as reclaim is."""
    from typer.testing import CliRunner

    from gpuaas.cli.app import app

    monkeypatch.setenv("GPUAAS_METRICS__GPU_ACTIVITY", "NO_SUCH_METRIC")
    monkeypatch.setenv("GPUAAS_METRICS__GPU_UTIL_FALLBACK", "NOR_THIS_ONE")
    monkeypatch.setenv("GPUAAS_METRICS__GPU_ACTIVITY_SCALE", "1")  # names no DCGM field: their scales are set
    monkeypatch.setenv("GPUAAS_METRICS__GPU_UTIL_FALLBACK_SCALE", "100")
    done = CliRunner().invoke(app, ["collect", "--format", "json"])
    assert done.exit_code == 3, done.output
    import json

    summary = json.loads(done.stdout)
    assert summary["degraded"] is True and all(s["ok"] for n, s in summary["sources"].items() if n != "nvml")
    assert summary["headline"].startswith("Degraded snapshot: telemetry incomplete for 3 of 3 GPU workloads")


def test_a_command_run_through_prefect_sends_its_run_logs_there_and_none_to_the_terminal(
        pointed_at: EmbeddedCluster, prefect_harness: None) -> None:
    """``gpuaas collect`` in its own process, with ``PREFECT_API_URL`` set: the run's logs are in the Prefect UI
    (the API's logs of its flow run), while the terminal gets the command's own lines and no Prefect log line."""
    import os
    import subprocess
    import sys

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName, LogFilter, LogFilterFlowRunId
    from prefect.client.schemas.sorting import FlowRunSort
    from prefect.settings import PREFECT_API_URL

    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_LOGGING")}
    env["PREFECT_API_URL"] = str(PREFECT_API_URL.value())
    proc = subprocess.run([sys.executable, "-m", "gpuaas.cli.app", "collect"], env=env, capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert " | INFO " not in proc.stderr and "Flow run " not in proc.stderr, proc.stderr
    with get_client(sync_client=True) as client:
        [run] = client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=["collect"])),
                                      sort=FlowRunSort.START_TIME_DESC, limit=1)
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run.id])))
    assert logs, "the run sent no log to the Prefect API"
