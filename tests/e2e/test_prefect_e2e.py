"""``make e2e``: gpuaas operated through a real Prefect server, as an ops engineer runs it (issue 13, point 8; partial).

Starts ``prefect server start`` on a free loopback port, creates the process work pool, deploys with
``prefect --no-prompt deploy --all`` from the checkout, starts a worker against an embedded cluster
and runs, through the worker, every deployment of ``prefect.yaml`` in the cycle that exists here
(collect, reclaim, rebalance, cost_report); checks through the Prefect API that each run Completed
and made its artifacts; then headless Chromium opens each run's page and the reclaim decisions
artifact (screenshots under the test's tmp dir). Everything it started is stopped, also on failure.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from gpuaas.cluster.runner import EmbeddedCluster
from tests.scenarios import embedded

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CYCLE = ["collect", "reclaim", "rebalance", "cost_report"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def _chromium(url: str, screenshot: Path, tmp_path: Path) -> str:
    """The page's DOM after headless Chromium rendered it (and a screenshot next to the test's output)."""
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
             "--window-size=1600,1000", "--virtual-time-budget=30000"]
    for extra in ([f"--screenshot={screenshot}"], ["--dump-dom"]):
        profile = tmp_path / f"chromium-{len(list(tmp_path.glob('chromium-*')))}"
        done = subprocess.run(["chromium", *flags, f"--user-data-dir={profile}", *extra, url],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
    assert screenshot.exists()
    return done.stdout


@pytest.fixture()
def prefect_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_API_URL": api,
           "PREFECT_UI_API_URL": api, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
           "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "false", "PYTHONPATH": str(ROOT)}
    env.pop("GPUAAS_PROJECT_DIR", None)
    log = (tmp_path / "server.log").open("wb")
    server = subprocess.Popen([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                              env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            try:
                if httpx.get(f"{api}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "prefect server not healthy within 120 s"
            time.sleep(0.5)
        yield env
    finally:
        _stop(server)
        log.close()


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    with embedded(tmp_path / "cluster") as running:
        yield running


def test_the_cycle_runs_through_a_worker_and_completes(prefect_env: dict[str, str], cluster: EmbeddedCluster,
                                                       tmp_path: Path) -> None:
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    prefect = str(BIN / "prefect")
    for command in ([prefect, "work-pool", "create", "gpuaas", "--type", "process"],
                    [prefect, "--no-prompt", "deploy", "--all"]):
        done = subprocess.run(command, cwd=ROOT, env=prefect_env, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    worker_env = {**prefect_env, **cluster.settings_env(), "GPUAAS_NVML": "off",
                  "GPUAAS_DATA_DIR": str(tmp_path / "gpuaas-data")}
    log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen([prefect, "worker", "start", "--pool", "gpuaas"], cwd=tmp_path, env=worker_env,
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deployed = [d["name"] for d in yaml.safe_load((ROOT / "prefect.yaml").read_text())["deployments"]]
    runs: dict[str, str] = {}
    decisions_id = ""
    try:
        with SyncPrefectClient(prefect_env["PREFECT_API_URL"]) as client:
            for name in [n for n in CYCLE if n in deployed]:
                deployment = client.read_deployment_by_name(f"{name}/{name}")
                run = client.create_flow_run_from_deployment(deployment.id)
                deadline = time.monotonic() + 240
                while not (state := client.read_flow_run(run.id).state) or not state.is_final():
                    assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
                    assert time.monotonic() < deadline, f"{name}: not finished within 240 s ({state})"
                    time.sleep(1)
                assert state.is_completed(), f"{name}: {state.name} {state.message}\n" \
                    + (tmp_path / "worker.log").read_text()[-3000:]
                artifacts = client.read_artifacts(
                    artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[run.id])))
                assert artifacts, f"{name}: no artifacts"
                first = str(artifacts[0].data).strip().splitlines()
                assert first and first[0].strip(), f"{name}: an artifact with an empty first line"
                runs[name] = str(run.id)
                if name == "reclaim":
                    decisions_id = next(str(a.id) for a in artifacts if a.key == "gpuaas-reclaim-decisions")
        ui = prefect_env["PREFECT_API_URL"].removesuffix("/api")
        for name, run_id in runs.items():  # the run page a person opens from the runs list
            page = _chromium(f"{ui}/runs/flow-run/{run_id}", tmp_path / f"run-{name}.png", tmp_path)
            assert "Completed" in page, f"{name}: the UI does not show the run as Completed"
        decisions = _chromium(f"{ui}/artifacts/artifact/{decisions_id}", tmp_path / "reclaim-decisions.png", tmp_path)
        # The hand-checked fleet's one idle workload, with its evidence, in the decisions table.
        assert "Notebook team-b/nb" in decisions and "max activity 0.00" in decisions
    finally:
        _stop(worker)
        log.close()
