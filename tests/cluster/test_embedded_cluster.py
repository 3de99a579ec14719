"""The embedded cluster end to end, through the clients production code uses.

A hand-checked scenario (8 GPUs at $3/GPU-hour, 2 h of history, ManualClock, seed 11):

* ``busy``  RayCluster, team-a, 1 pod x 2 GPUs at utilisation 0.6 -> admitted, 2 x 2 h x $3 = $12
* ``nb``    Notebook, team-b, 1 GPU at 0.0                     -> admitted, 1 x 2 h x $3 = $6
* ``dark``  StatefulSet, team-b, 1 GPU, telemetry dropped      -> admitted, $6, no dcgm series
* ``big``   RayCluster, team-b, 2 pods x 3 GPUs                -> 6 GPUs > the 4 left: pending

Checked through the official ``kubernetes`` client (kubeconfig), ``PrometheusConnect`` (a real
Prometheus with backfilled history), plain ``httpx`` against OpenCost, and the real CLI as a
subprocess. Prometheus is required: missing binaries fail these tests, they do not skip.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from kubernetes import client, config
from prometheus_api_client import PrometheusConnect

from gpuaas.cluster.prometheus import free_port
from gpuaas.cluster.runner import EmbeddedCluster
from tests.scenarios import embedded

pytestmark = [pytest.mark.integration]

EXAMPLE_SCENARIO = Path(__file__).resolve().parents[2] / "examples" / "scenario.yaml"



def test_prometheus_is_installed() -> None:
    for binary in ("prometheus", "promtool"):
        assert shutil.which(binary) or Path(f"/usr/bin/{binary}").exists(), (
            f"{binary} is required (apt-get install prometheus); these tests must not be skipped")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with embedded(tmp_path_factory.mktemp("embedded"), seed=11) as running:
        yield running


def _conditions(obj: dict) -> dict[str, str]:  # type: ignore[type-arg]
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions", [])}


def test_objects_and_admission_through_the_official_client(cluster: EmbeddedCluster) -> None:
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    custom = client.CustomObjectsApi(api)
    ray = custom.get_namespaced_custom_object("ray.io", "v1", "team-a", "rayclusters", "busy")
    assert ray["spec"]["workerGroupSpecs"][0]["replicas"] == 1
    workloads = custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "workloads")["items"]
    by_owner = {w["metadata"]["ownerReferences"][0]["name"]: w for w in workloads}
    assert set(by_owner) == {"busy", "nb", "dark", "big"}
    for name in ("busy", "nb", "dark"):
        assert _conditions(by_owner[name]).get("Admitted") == "True", name
    assert _conditions(by_owner["big"]).get("QuotaReserved") != "True"
    nodes = client.CoreV1Api(api).list_node().items
    assert len(nodes) == 2 and nodes[0].status.allocatable["nvidia.com/gpu"] == "4"


def test_utilisation_in_prometheus_equals_the_scenario(cluster: EmbeddedCluster) -> None:
    """avg over 30 one-minute samples of uniform jitter (half-width 0.02): std ~0.002, tolerance 0.01 (~5 sigma)."""
    prom = PrometheusConnect(url=cluster.prometheus_url, disable_ssl=True)
    at = cluster.clock.now()
    pod = next(a.pod for a in cluster.kueue.gpu_assignments() if a.owner_name == "busy")
    result = prom.custom_query(f'avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{{pod="{pod}"}}[30m])',
                               params={"time": at.timestamp()})
    assert len(result) == 2  # one series per GPU of the pod
    for series in result:
        assert abs(float(series["value"][1]) - 0.6) < 0.01
        assert series["metric"]["namespace"] == "team-a" and series["metric"]["Hostname"].startswith("h100-node-")
    nb = prom.custom_query('max_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{namespace="team-b"}[2h])',
                           params={"time": at.timestamp()})
    assert [s["metric"]["pod"] for s in nb] and all(float(s["value"][1]) == 0.0 for s in nb)
    dark_pod = next(a.pod for a in cluster.kueue.gpu_assignments() if a.owner_name == "dark")
    assert prom.custom_query(f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{pod="{dark_pod}"}}',
                             params={"time": at.timestamp()}) == []
    usage = prom.custom_query('kueue_cluster_queue_resource_usage{cluster_queue="team-b-cq"}',
                              params={"time": at.timestamp()})
    assert float(usage[0]["value"][1]) == 2.0


def test_opencost_totals_equal_price_times_gpu_hours(cluster: EmbeddedCluster) -> None:
    body = httpx.get(f"{cluster.opencost_url}/allocation", params={"window": "2h", "aggregate": "namespace"}).json()
    assert body["code"] == 200
    sets = body["data"]
    assert sets[0]["team-a"]["gpuHours"] == 4.0 and sets[0]["team-a"]["totalCost"] == 12.0
    assert sets[0]["team-b"]["gpuHours"] == 4.0 and sets[0]["team-b"]["totalCost"] == 12.0
    by_pod = httpx.get(f"{cluster.opencost_url}/allocation/compute",
                       params={"window": "2h", "aggregate": "controller"}).json()["data"][0]
    gpu = by_pod["raycluster:busy"]["gpuAllocation"]
    assert gpu["gpuRequestAverage"] == 2.0 and abs(gpu["gpuUsageAverage"] - 0.6) < 1e-6
    assert by_pod["statefulset:nb"]["gpuAllocation"]["gpuUsageAverage"] == 0.0


def _children(pid: int) -> list[tuple[int, str]]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            comm = stat[stat.index("(") + 1: stat.rindex(")")]
            if int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
                out.append((int(entry.name), comm))
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(") ")[1][0] != "Z"


def _up(env_file: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    """``gpuaas cluster up --env-file`` in the background, once its env file is written: the process and the file."""
    gpuaas = Path(sys.executable).with_name("gpuaas")
    proc = subprocess.Popen([str(gpuaas), "cluster", "up", "--env-file", str(env_file), "--seed", "1",
                             "--history", "30m"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 90
    try:
        while not env_file.exists():
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            assert time.monotonic() < deadline, "no env file within 90 s"
            time.sleep(0.2)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc, dict(line.split("=", 1) for line in env_file.read_text().splitlines())


def test_cli_up_env_file_and_sigterm(tmp_path: Path) -> None:
    env_file = tmp_path / "cluster.env"
    # GPUAAS_CLUSTER_TOKEN is `cluster up --token`: every request below runs authenticated.
    env = {**os.environ, "GPUAAS_DATA_DIR": str(tmp_path / "data"), "GPUAAS_CLUSTER_TOKEN": "up-token-7f3a"}
    gpuaas = Path(sys.executable).with_name("gpuaas")
    proc, values = _up(env_file, env)
    try:
        assert set(values) == {"GPUAAS_KUBECONFIG", "GPUAAS_PROMETHEUS_URL", "GPUAAS_OPENCOST_URL",
                               "GPUAAS_METRICS__SAMPLE_INTERVAL_SECONDS", "GPUAAS_DATA_DIR", "GPUAAS_POLICY_FILE",
                               # an OpenAI endpoint per InferenceService of the default scenario
                               "GPUAAS_ENDPOINT_PLATFORM_LLM_LEGACY", "GPUAAS_ENDPOINT_PLATFORM_LLM_CHAT",
                                   "GPUAAS_ENDPOINT_PLATFORM_LLM_EVAL", "GPUAAS_ENDPOINT_PLATFORM_LLM_ABORT"}
        # the scenario's own policy, so that the walkthrough on this fleet sees what `gpuaas demo` sees
        assert Path(values["GPUAAS_POLICY_FILE"]).name == "default-policy.yaml"
        assert Path(values["GPUAAS_POLICY_FILE"]).is_file()
        models = httpx.get(f"{values['GPUAAS_ENDPOINT_PLATFORM_LLM_CHAT']}/models").json()
        assert [m["id"] for m in models["data"]] == ["Qwen/Qwen2.5-7B-Instruct"]
        # A data dir of its own: a trial never shares the database of the deployment on this host.
        trial = Path(values["GPUAAS_DATA_DIR"])
        assert trial != (tmp_path / "data").resolve() and not (trial / "gpuaas.db").exists()
        # Any gpuaas command run with these settings targets the embedded cluster.
        collected = subprocess.run([str(gpuaas), "collect", "--format", "json"], env={**env, **values},
                                   capture_output=True, text=True, timeout=240)
        assert collected.returncode == 0, collected.stderr[-2000:]
        summary = json.loads(collected.stdout)
        assert {n for n, s in summary["sources"].items() if s["ok"]} == {"kube", "prometheus", "opencost"}
        assert summary["workloads"] > 0 and any(q["name"] == "vision-cq" for q in summary["queues"])
        api = config.new_client_from_config(config_file=values["GPUAAS_KUBECONFIG"])
        names = {ns.metadata.name for ns in client.CoreV1Api(api).list_namespace().items}
        assert {"vision", "nlp", "platform"} <= names
        assert "up-token-7f3a" in Path(values["GPUAAS_KUBECONFIG"]).read_text()
        assert httpx.get(f"{api.configuration.host}/api/v1/namespaces", timeout=5).status_code == 401
        assert httpx.get(f"{values['GPUAAS_PROMETHEUS_URL']}/-/ready").status_code == 200
        assert (trial / "gpuaas.db").exists() and not (tmp_path / "data" / "gpuaas.db").exists()
        prom_children = [pid for pid, comm in _children(proc.pid) if comm == "prometheus"]
        assert len(prom_children) == 1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        time.sleep(0.2)
        assert not _alive(prom_children[0]), "the Prometheus child outlived 'cluster up'"

        # Started again, it is a new cluster: the trial's database starts afresh with it, so the same env file
        # and the same commands work (the last trial's history is another cluster's, which the store refuses).
        env_file.unlink()
        proc, again = _up(env_file, env)
        assert again["GPUAAS_DATA_DIR"] == values["GPUAAS_DATA_DIR"]
        collected = subprocess.run([str(gpuaas), "collect", "--format", "json"], env={**env, **again},
                                   capture_output=True, text=True, timeout=240)
        assert collected.returncode == 0, collected.stderr[-2000:]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _pending(api: client.ApiClient, cluster_queue: str) -> dict:  # type: ignore[type-arg]
    """GET the visibility subresource the way any generic call through the official client goes."""
    request = api.param_serialize(
        method="GET", resource_path="/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/{name}/pendingworkloads",
        path_params={"name": cluster_queue}, header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
    )
    response = api.call_api(*request)
    response.read()
    assert response.status == 200
    return json.loads(response.data)  # type: ignore[no-any-return]


def test_visibility_api_lists_the_pending_workload(cluster: EmbeddedCluster) -> None:
    """Kueue's visibility API through the official client: ``big`` waits in team-b-cq."""
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    summary = _pending(api, "team-b-cq")
    assert summary["kind"] == "PendingWorkloadsSummary"
    [item] = summary["items"]
    assert item["metadata"]["ownerReferences"][0]["name"] == "big"
    assert item["positionInClusterQueue"] == 0 and item["localQueueName"] == "team-b-queue"
    assert _pending(api, "team-a-cq")["items"] == []


def test_the_kubeconfig_works_for_a_standard_client(cluster: EmbeddedCluster) -> None:
    """What ``kubectl --kubeconfig FILE get clusterqueues -o name`` does, through the official client's own
    kubeconfig loader (no kubectl binary: Debian 12 packages none, and CI must not skip this)."""
    with config.new_client_from_config(config_file=str(cluster.kubeconfig)) as api:
        assert api.configuration.host.startswith("http://127.0.0.1:")
        listed = client.CustomObjectsApi(api).list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues")
    names = {f"clusterqueue.kueue.x-k8s.io/{item['metadata']['name']}" for item in listed["items"]}
    assert names == {"clusterqueue.kueue.x-k8s.io/team-a-cq", "clusterqueue.kueue.x-k8s.io/team-b-cq"}


def test_cli_down_stops_a_running_cluster_and_its_prometheus(tmp_path: Path) -> None:
    env = {**os.environ, "GPUAAS_DATA_DIR": str(tmp_path / "data")}
    gpuaas = Path(sys.executable).with_name("gpuaas")
    kubeconfig = tmp_path / "kc.yaml"
    rbac = Path(__file__).resolve().parents[2] / "deployments" / "kubernetes" / "rbac.yaml"
    proc = subprocess.Popen([str(gpuaas), "cluster", "up", "--kubeconfig", str(kubeconfig), "--history", "10m",
                             "--rbac", str(rbac), "--role", "gpuaas-reader"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while not kubeconfig.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "cluster up did not write the kubeconfig"
            time.sleep(0.2)
        # --rbac: the shipped read-only role lists but may not patch.
        custom = client.CustomObjectsApi(config.new_client_from_config(config_file=str(kubeconfig)))
        queues = custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues")["items"]
        assert queues
        with pytest.raises(client.ApiException) as refused:
            custom.patch_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues",
                                               queues[0]["metadata"]["name"], {"metadata": {"labels": {"x": "y"}}})
        assert refused.value.status == 403 and "cannot patch" in json.loads(refused.value.body)["message"]
        prometheus = [pid for pid, comm in _children(proc.pid) if comm == "prometheus"]
        second = subprocess.run([str(gpuaas), "cluster", "up", "--history", "10m"], env=env, capture_output=True,
                                text=True, timeout=60)
        assert second.returncode == 1 and "already running" in second.stderr
        down = subprocess.run([str(gpuaas), "cluster", "down"], env=env, capture_output=True, text=True, timeout=60)
        assert down.returncode == 0, down.stderr
        assert proc.wait(timeout=30) == 0
        time.sleep(0.2)
        assert prometheus and not any(_alive(pid) for pid in prometheus)
        again = subprocess.run([str(gpuaas), "cluster", "down"], env=env, capture_output=True, text=True, timeout=60)
        assert again.returncode == 0 and "no embedded cluster is running" in again.stdout
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _procs_mentioning(text: str) -> list[int]:
    """Live processes whose command line mentions ``text`` (a test's own temporary directory)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if text in (entry / "cmdline").read_bytes().decode(errors="replace") and _alive(int(entry.name)):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_cli_up_ctrl_c_while_starting_and_while_running_leaves_no_process(tmp_path: Path) -> None:
    """SIGINT (what Ctrl-C sends) stops 'up' in both phases; nothing it started survives it."""
    env = {**os.environ, "GPUAAS_DATA_DIR": str(tmp_path / "data")}
    gpuaas = str(Path(sys.executable).with_name("gpuaas"))
    kubeconfig = tmp_path / "kc.yaml"
    # While starting: 6 h of the default fleet take several seconds to replay and backfill.
    starting = subprocess.Popen([gpuaas, "cluster", "up", "--kubeconfig", str(kubeconfig)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        pid_file = tmp_path / "data" / "cluster" / "cluster.pid"
        deadline = time.monotonic() + 30
        while not pid_file.exists():  # written once 'up' handles signals, before it starts anything
            assert starting.poll() is None and time.monotonic() < deadline, "cluster up wrote no pid file"
            time.sleep(0.05)
        time.sleep(1.0)
        assert starting.poll() is None and not kubeconfig.exists()
        starting.send_signal(signal.SIGINT)
        assert starting.wait(timeout=20) == 0, starting.stderr.read().decode() if starting.stderr else ""
        assert not kubeconfig.exists() and _procs_mentioning(str(tmp_path)) == []
    finally:
        if starting.poll() is None:
            starting.kill()
            starting.wait()
    # While running, on the port and scenario file given on the command line.
    port = free_port()
    running = subprocess.Popen([gpuaas, "cluster", "up", "--kubeconfig", str(kubeconfig), "--port", str(port),
                                "--scenario", str(EXAMPLE_SCENARIO), "--history", "10m"], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while not kubeconfig.exists():
            assert running.poll() is None and time.monotonic() < deadline, "cluster up did not write the kubeconfig"
            time.sleep(0.2)
        api = config.new_client_from_config(config_file=str(kubeconfig))
        assert api.configuration.host == f"http://127.0.0.1:{port}"
        assert client.CoreV1Api(api).list_node().items
        assert any(comm == "prometheus" for _, comm in _children(running.pid))
        running.send_signal(signal.SIGINT)
        assert running.wait(timeout=30) == 0
        time.sleep(0.2)
        assert _procs_mentioning(str(tmp_path)) == []
        assert not (tmp_path / "data" / "cluster" / "cluster.pid").exists()
    finally:
        if running.poll() is None:
            running.kill()
            running.wait()
