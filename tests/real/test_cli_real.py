"""``gpuaas cluster up --backend real`` as a user runs it: the env file appears, the kubeconfig reaches
the real API server with Kueue's Workloads in it, a second cluster runs beside the first on the same
machine, and SIGTERM stops every process each one started without touching the other."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kubernetes import client, config

from gpuaas.policy import Policy, load_policy

pytestmark = [pytest.mark.real]


def _children(pid: int) -> set[int]:
    out = subprocess.run(["ps", "-eo", "pid=,ppid=,sid="], capture_output=True, text=True, check=True).stdout
    rows = [tuple(int(x) for x in line.split()) for line in out.splitlines() if line.strip()]
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, parent, _ in rows if parent in frontier} - found
        found |= frontier
    return found


def _up(data_dir: Path, env_file: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "GPUAAS_DATA_DIR": str(data_dir)}
    return subprocess.Popen([sys.executable, "-m", "gpuaas.cli.app", "cluster", "up", "--backend", "real",
                             "--env-file", str(env_file)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _serving(proc: subprocess.Popen[bytes], env_file: Path) -> tuple[client.ApiClient, dict[str, str]]:
    """Wait for the env file, then for Kueue's first Workload: the cluster answers as a user sees it."""
    deadline = time.monotonic() + 300
    while not env_file.exists():
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert time.monotonic() < deadline, "the env file never appeared"
        time.sleep(0.5)
    values = dict(line.split("=", 1) for line in env_file.read_text().splitlines())
    assert {"GPUAAS_KUBECONFIG", "GPUAAS_PROMETHEUS_URL", "GPUAAS_DATA_DIR", "GPUAAS_POLICY_FILE"} <= values.keys()
    # the default scenario's policy, as the embedded backend's env file names it: a file that parses as a policy
    assert Path(values["GPUAAS_POLICY_FILE"]).name == "default-policy.yaml"
    assert isinstance(load_policy(Path(values["GPUAAS_POLICY_FILE"])), Policy)
    api = config.new_client_from_config(config_file=values["GPUAAS_KUBECONFIG"])
    custom = client.CustomObjectsApi(api)
    deadline = time.monotonic() + 90
    while not custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "workloads")["items"]:
        assert time.monotonic() < deadline, "Kueue created no Workload from the default scenario"
        time.sleep(0.5)
    return api, values


def _stop(proc: subprocess.Popen[bytes]) -> None:
    children = _children(proc.pid)
    assert children, "no control-plane process found"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    left = {pid for pid in children if Path(f"/proc/{pid}").exists()}
    assert not left, f"processes left behind: {left}"


@pytest.mark.timeout(900)
def test_two_real_clusters_serve_side_by_side_and_each_stops_alone_on_sigterm(tmp_path: Path) -> None:
    first = _up(tmp_path / "a", tmp_path / "a.env")
    second = _up(tmp_path / "b", tmp_path / "b.env")
    try:
        api_a, values_a = _serving(first, tmp_path / "a.env")
        api_b, values_b = _serving(second, tmp_path / "b.env")
        assert values_a["GPUAAS_KUBECONFIG"] != values_b["GPUAAS_KUBECONFIG"]
        assert values_a["GPUAAS_PROMETHEUS_URL"] != values_b["GPUAAS_PROMETHEUS_URL"]
        assert api_a.configuration.host != api_b.configuration.host
        assert client.VersionApi(api_a).get_code().git_version.startswith("v1.35.")

        # a third start in a data dir whose cluster runs is refused in one line, and starts nothing
        again = subprocess.run([sys.executable, "-m", "gpuaas.cli.app", "cluster", "up", "--backend", "real"],
                               env={**os.environ, "GPUAAS_DATA_DIR": str(tmp_path / "b")},
                               capture_output=True, text=True, timeout=60)
        assert again.returncode == 1 and "already running" in again.stderr and "Traceback" not in again.stderr

        _stop(first)
        # the other cluster is untouched by the first one's stop
        names = client.CustomObjectsApi(api_b).list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "workloads")
        assert names["items"]
        _stop(second)
    finally:
        for proc in (first, second):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
