"""``gpuaas cluster up --backend real`` as a user runs it: the env file appears, the kubeconfig reaches
the real API server with Kueue's Workloads in it, and SIGTERM stops every process it started."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kubernetes import client, config

pytestmark = [pytest.mark.real]


def _children(pid: int) -> set[int]:
    out = subprocess.run(["ps", "-eo", "pid=,ppid=,sid="], capture_output=True, text=True, check=True).stdout
    rows = [tuple(int(x) for x in line.split()) for line in out.splitlines() if line.strip()]
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, parent, _ in rows if parent in frontier} - found
        found |= frontier
    return found


def test_cluster_up_real_serves_the_scenario_and_stops_on_sigterm(tmp_path: Path) -> None:
    env_file = tmp_path / "real.env"
    env = {**os.environ, "GPUAAS_DATA_DIR": str(tmp_path / "data")}
    proc = subprocess.Popen([sys.executable, "-m", "gpuaas.cli.app", "cluster", "up", "--backend", "real",
                             "--env-file", str(env_file)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        while not env_file.exists():
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "the env file never appeared"
            time.sleep(0.5)
        values = dict(line.split("=", 1) for line in env_file.read_text().splitlines())
        assert {"GPUAAS_KUBECONFIG", "GPUAAS_PROMETHEUS_URL", "GPUAAS_DATA_DIR"} <= values.keys()
        api = config.new_client_from_config(config_file=values["GPUAAS_KUBECONFIG"])
        custom = client.CustomObjectsApi(api)
        deadline = time.monotonic() + 60
        while not custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "workloads")["items"]:
            assert time.monotonic() < deadline, "Kueue created no Workload from the default scenario"
            time.sleep(0.5)
        version = client.VersionApi(api).get_code()
        assert version.git_version.startswith("v1.35.")
        children = _children(proc.pid)
        assert children, "no control-plane process found"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        left = {pid for pid in children if Path(f"/proc/{pid}").exists()}
        assert not left, f"processes left behind: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
