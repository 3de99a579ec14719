"""A first contact with a real cluster that goes wrong, as the command line meets it on the real API server.

Kueue not installed, a refused token, and a server error behind a Kueue list each make the Kubernetes source
fail in one line that says what is wrong and what to do, the command exiting 3, never a traceback; above all a
cluster without Kueue is never read as a fleet with nothing in it ("nothing to reclaim", exit 0).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gpuaas.cluster.real import KubeHTTP, KubeHTTPError, RealCluster
from gpuaas.errors import RetriesSpent
from gpuaas.settings import GpuaasSettings
from gpuaas.sources.failures import describe_failure
from gpuaas.sources.kube import read_kube

pytestmark = [pytest.mark.real]

CLUSTER_QUEUES = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/clusterqueues.kueue.x-k8s.io"


def _gpuaas(real_cluster: RealCluster, tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GPUAAS_", "PREFECT_API_URL"))}
    base |= real_cluster.settings_env() | {"GPUAAS_DATA_DIR": str(tmp_path / "data"), "GPUAAS_NVML": "off",
                                           "GPUAAS_RETRIES": "0", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "gpuaas.cli.app", *args], env=base | env, capture_output=True,
                          text=True, timeout=180, check=False)


def _served(api: KubeHTTP, v1beta1: bool, v1beta2: bool) -> None:
    """Serve (or not) each version of the ClusterQueue CRD, and wait until discovery says so."""
    api.request("PATCH", CLUSTER_QUEUES, [{"op": "replace", "path": f"/spec/versions/{i}/served", "value": on}
                                          for i, on in enumerate((v1beta1, v1beta2))],
                content_type="application/json-patch+json")
    wanted = {v for v, on in (("v1beta1", v1beta1), ("v1beta2", v1beta2)) if on}
    deadline = time.monotonic() + 30
    while True:
        served = set()
        for version in ("v1beta1", "v1beta2"):
            try:
                resources = api.request("GET", f"/apis/kueue.x-k8s.io/{version}")["resources"]
            except KubeHTTPError:
                continue
            if any(r["name"] == "clusterqueues" for r in resources):
                served.add(version)
        if served == wanted:
            return
        assert time.monotonic() < deadline, f"ClusterQueues still served at {served}, not {wanted}"
        time.sleep(0.2)


@pytest.fixture()
def clusterqueues_unserved(api: KubeHTTP) -> Iterator[None]:
    """No version of ClusterQueue served, as on a cluster without Kueue; both served again afterwards."""
    _served(api, v1beta1=False, v1beta2=False)
    try:
        yield
    finally:
        _served(api, v1beta1=True, v1beta2=True)


@pytest.fixture()
def only_v1beta1(api: KubeHTTP) -> Iterator[None]:
    """ClusterQueues served at v1beta1 alone, so gpuaas falls back to v1beta1 for every Kueue list."""
    _served(api, v1beta1=True, v1beta2=False)
    try:
        yield
    finally:
        _served(api, v1beta1=True, v1beta2=True)


def test_a_cluster_without_kueue_degrades_the_collect_naming_kueue(
        real_cluster: RealCluster, tmp_path: Path, clusterqueues_unserved: None) -> None:
    proc = _gpuaas(real_cluster, tmp_path, "collect", "--format", "json")
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["degraded"] is True and doc["workloads"] == 0
    assert doc["source_errors"]["kube"] == (
        f"Kubernetes API at {real_cluster.api_url}: Kueue is not installed: no version of "
        "clusterqueues.kueue.x-k8s.io is served (install Kueue v0.15 or newer)")
    assert doc["headline"].startswith(f"Degraded: {doc['source_errors']['kube']}.")


def test_a_refused_token_names_the_kubeconfig_user_to_renew(real_cluster: RealCluster, tmp_path: Path) -> None:
    config = yaml.safe_load(real_cluster.kubeconfig.read_text())
    for user in config["users"]:
        user["user"] = {"token": "eyJhbGciOiJSUzI1NiJ9.e30.expired"}
    path = tmp_path / "expired-kubeconfig"
    path.write_text(yaml.safe_dump(config))
    user = config["users"][0]["name"]
    proc = _gpuaas(real_cluster, tmp_path, "collect", "--format", "json", GPUAAS_KUBECONFIG=str(path))
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr and "e30.expired" not in proc.stderr + proc.stdout
    assert json.loads(proc.stdout)["source_errors"]["kube"] == (
        f"Kubernetes API at {real_cluster.api_url}: HTTP 401: unauthorized: the credentials of user {user!r} of "
        f"kubeconfig {path} were refused (a token expired, revoked or of another cluster: issue a new one with "
        "kubectl create token)")


def test_a_server_error_names_the_request_and_what_the_server_said(
        settings: GpuaasSettings, only_v1beta1: None) -> None:
    """Read through v1beta1, Kueue v0.17's conversion webhook refuses the ResourceFlavors (stored at v1beta2):
    the API server answers 500, and the line says which list and the webhook's words, not "server error" alone."""
    quick = settings.model_copy(update={"retries": 1, "retry_backoff_seconds": 0.1})  # asked again once, then said
    with pytest.raises(RetriesSpent) as info:
        read_kube(quick)
    line = describe_failure(quick, "kube", info.value)
    assert line.startswith("Kubernetes API at https://127.0.0.1:") and "\n" not in line, line
    assert (": HTTP 500: server error (listing resourceflavors.kueue.x-k8s.io/v1beta1: 500 Internal Server Error: "
            "conversion webhook for kueue.x-k8s.io/v1beta2, Kind=ResourceFlavor failed") in line, line
    assert "(asked 2 times over " in str(info.value)


@pytest.fixture()
def job_without_its_queue(api: KubeHTTP) -> Iterator[str]:
    """A suspended 2-GPU Job labelled for a LocalQueue its namespace lacks; Kueue makes its Workload, which waits."""
    namespace = "no-queue"
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    api.create({"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": "lost", "namespace": namespace,
                             "labels": {"kueue.x-k8s.io/queue-name": "no-queue-lq"}},
                "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
                    {"name": "c", "image": "busybox", "resources": {"requests": {"nvidia.com/gpu": "2"},
                                                                    "limits": {"nvidia.com/gpu": "2"}}}]}}}})
    api.wait_for("Kueue makes the Workload of Job no-queue/lost", lambda: bool(api.list("Workload", namespace)), 30)
    try:
        yield namespace
    finally:
        api.request("DELETE", f"/apis/batch/v1/namespaces/{namespace}/jobs/lost?propagationPolicy=Background")
        api.wait_for("the Workload goes with its Job", lambda: not api.list("Workload", namespace), 60)


def test_the_preflight_names_a_workload_whose_local_queue_is_missing(
        real_cluster: RealCluster, tmp_path: Path, job_without_its_queue: str) -> None:
    """Its 2 GPUs are in no ClusterQueue's backlog and Kueue never admits them: the preflight says so, and how."""
    proc = _gpuaas(real_cluster, tmp_path, "config", "preflight", "--format", "json")
    assert "Traceback" not in proc.stderr
    check = next(c for c in json.loads(proc.stdout)["checks"] if c["check"] == "Kubernetes API and Kueue")
    assert check["verdict"] == "warning", check
    assert check["detail"].endswith(
        "; 1 pending Workload asks for a LocalQueue its namespace lacks: Job no-queue/lost asks for no-queue-lq; "
        "2 GPUs that Kueue never admits and no ClusterQueue's backlog counts (create the LocalQueue, or correct "
        "the job's kueue.x-k8s.io/queue-name label)"), check
