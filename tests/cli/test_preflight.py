"""``gpuaas config preflight`` on the embedded cluster, as an operator runs it: a real process.

The reclaim scenario (``gpuaas.cluster.testbed``) holds 17 GPU workloads, two of them without a
sample (``dark``, whose telemetry is dropped, and ``wl``, a Workload with no pods): a warning names
them. The misconfigurations a collect reports only as ``unknown`` workloads are each a failed check
saying what to set: metrics renamed by the install, a pod label dcgm-exporter does not set. An unreachable source is its degraded line; the Pushgateway
is probed with the trust the pushes use; the database is read, never created. With the shipped
roles enforced by the embedded API, the permissions check names the role a flow set to apply lacks.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gpuaas.cluster.apiserver import RBACRules
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.testbed import write_policy

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _preflight(tmp_path: Path, cluster: EmbeddedCluster, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GPUAAS_", "PREFECT_API_URL"))}
    base |= cluster.settings_env() | {"GPUAAS_DATA_DIR": str(tmp_path / "data"), "GPUAAS_NVML": "off",
                                      "GPUAAS_RETRIES": "0", "GPUAAS_REQUEST_TIMEOUT_SECONDS": "10",
                                      "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "gpuaas.cli.app", "config", "preflight", "--format", "json", *args],
                          env=base | env, capture_output=True, text=True, timeout=240, check=False)


def _checks(run: subprocess.CompletedProcess[str]) -> dict[str, tuple[str, str]]:
    assert "Traceback" not in run.stderr
    return {c["check"]: (c["verdict"], c["detail"]) for c in json.loads(run.stdout)["checks"]}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_working_setup_passes_and_names_the_workloads_without_telemetry(
        tmp_path: Path, reclaim_fleet: EmbeddedCluster) -> None:
    run = _preflight(tmp_path, reclaim_fleet)
    assert run.returncode == 0, run.stderr
    checks = _checks(run)
    assert checks["Kubernetes API and Kueue"][0] == "ok"
    assert checks["Kubernetes API and Kueue"][1].startswith("kueue.x-k8s.io/v1beta2: 2 ClusterQueues")
    assert checks["Prometheus"][0] == checks["OpenCost"][0] == "ok"
    assert checks["Kueue metrics"][0] == "ok"
    assert checks["Kueue metrics"][1].startswith("2 ClusterQueues in kueue_pending_workloads, the newest sample ")
    verdict, detail = checks["GPU telemetry"]
    assert verdict == "warning" and detail.startswith("2 of 17 GPU workloads have incomplete telemetry")
    assert "(StatefulSet team-a/dark, Workload team-a/wl; 2 with no sample" in detail  # the scenario's two
    assert checks["Pushgateway"] == ("skipped", "GPUAAS_PUSHGATEWAY_URL not set: nothing is pushed")
    assert checks["database"][0] == "ok" and "no database there yet" in checks["database"][1]
    assert not (tmp_path / "data" / "gpuaas.db").exists()  # a check reads; it creates nothing
    # whose permissions: the embedded cluster without rules takes every caller for an admin, as a real cluster
    # takes an admin kubeconfig (the answers then say nothing of the service account's roles)
    assert checks["permissions"] == ("ok", "as embedded-admin: allowed: the 25 reads every flow makes; no flow "
                                           "applies, so no write was asked about (--all-writes, or all_writes for "
                                           "the flow, asks)")
    verdict, detail = checks["permissions beyond need"]  # an admin may do anything: more than gpuaas should
    assert verdict == "warning" and detail.startswith("as embedded-admin: get secrets, create pods, * on * (every "
                                                      "verb on every resource), delete workloads.kueue.x-k8s.io")
    verdict, detail = checks["admission policy"]  # an admin may patch, and nothing limits it to gpuaas's fields
    assert verdict == "warning" and detail.startswith("patch workloads.kueue.x-k8s.io, patch rayclusters.ray.io, "
                                                      "patch inferenceservices.serving.kserve.io and 4 more are "
                                                      "allowed, but the cluster has no ValidatingAdmissionPolicy and "
                                                      "no ValidatingAdmissionPolicyBinding named gpuaas-write-fields")
    assert detail.endswith("kubectl apply -f deployments/kubernetes/admission-policy.yaml")
    assert checks["policy against the cluster"] == ("skipped", "the policy names no tenant and no cohort")
    assert json.loads(run.stdout)["headline"] == "Preflight: 12 checks: 7 ok, 3 warnings (permissions beyond need, admission policy, GPU telemetry), 2 skipped."
    assert "Preflight: 12 checks: 7 ok, 3 warnings (permissions beyond need, admission policy, GPU telemetry), 2 skipped." in run.stderr  # beside the JSON, as every headline


@pytest.mark.parametrize(("env", "said"), [
    ({"GPUAAS_METRICS__GPU_ACTIVITY": "DCGM_RENAMED_ACTIVE", "GPUAAS_METRICS__GPU_UTIL_FALLBACK": "DCGM_RENAMED_UTIL",
      "GPUAAS_METRICS__GPU_ACTIVITY_SCALE": "1", "GPUAAS_METRICS__GPU_UTIL_FALLBACK_SCALE": "100"},
     "no series of DCGM_RENAMED_ACTIVE or DCGM_RENAMED_UTIL in Prometheus: is dcgm-exporter scraped?"),
    ({"GPUAAS_METRICS__POD_LABELS": '["container_pod"]'},
     "carry none of the pod labels container_pod: set GPUAAS_METRICS__POD_LABELS"),
], ids=["metrics-renamed", "pod-label-unset"])
def test_telemetry_no_workload_can_use_fails_saying_what_to_set(
        tmp_path: Path, reclaim_fleet: EmbeddedCluster, env: dict[str, str], said: str) -> None:
    run = _preflight(tmp_path, reclaim_fleet, **env)
    assert run.returncode == 1
    verdict, detail = _checks(run)["GPU telemetry"]
    assert verdict == "failed" and said in detail, detail
    assert run.stderr.strip().splitlines()[-1] == "error: 1 of 12 checks failed: GPU telemetry"


def test_unreachable_sources_are_named_and_the_telemetry_check_waits_for_them(
        tmp_path: Path, reclaim_fleet: EmbeddedCluster) -> None:
    nowhere = f"http://127.0.0.1:{_closed_port()}"
    run = _preflight(tmp_path, reclaim_fleet, GPUAAS_PROMETHEUS_URL=nowhere, GPUAAS_PUSHGATEWAY_URL=nowhere)
    assert run.returncode == 1
    checks = _checks(run)
    refused = "connection refused (nothing listens on that port)"
    assert checks["Prometheus"] == ("failed", f"Prometheus at {nowhere}: {refused}")
    assert checks["Pushgateway"] == ("failed", f"Pushgateway at {nowhere}: {refused}")
    assert checks["GPU telemetry"][0] == checks["Kueue metrics"][0] == "skipped"
    assert run.stderr.strip().splitlines()[-1] == "error: 2 of 12 checks failed: Prometheus, Pushgateway"


def test_a_reachable_pushgateway_and_a_database_behind_this_gpuaas(
        tmp_path: Path, reclaim_fleet: EmbeddedCluster, pushgateway_url: str) -> None:
    from gpuaas.store import Store

    database = tmp_path / "old.db"
    Store(f"sqlite:///{database}", migrate=False).upgrade("0003")  # a database an older gpuaas left
    run = _preflight(tmp_path, reclaim_fleet, GPUAAS_PUSHGATEWAY_URL=pushgateway_url,
                     GPUAAS_DATABASE_URL=f"sqlite:///{database}")
    checks = _checks(run)
    assert checks["Pushgateway"] == ("ok", "ready")
    assert checks["database"][0] == "warning"
    assert ("is at schema 0003, behind the 0005 this gpuaas reads: run `gpuaas db upgrade` (or let the next flow run "
            "upgrade it)") in checks["database"][1]
    assert run.returncode == 0, run.stderr


MANIFEST = Path(__file__).resolve().parents[2] / "deployments" / "kubernetes" / "rbac.yaml"


@pytest.mark.parametrize(("roles", "args", "said"), [
    (["gpuaas-reader"], ("--policy-applies",),
     "reclaim would write, but patch workloads.kueue.x-k8s.io, patch rayclusters.ray.io, patch "
     "inferenceservices.serving.kserve.io and 4 more are refused: bind gpuaas-reclaimer "
     "(kubectl apply -f deployments/kubernetes/rbac-apply-reclaim.yaml)"),
    (["gpuaas-reader", "gpuaas-reclaimer"], ("--all-writes",),
     "rebalance would write, but get clusterqueues.kueue.x-k8s.io, patch clusterqueues.kueue.x-k8s.io are "
     "refused: bind gpuaas-rebalancer (kubectl apply -f deployments/kubernetes/rbac-apply-rebalance.yaml)"),
    ([], (), "25 of the 25 reads every flow makes are refused (list clusterqueues.kueue.x-k8s.io, list "
             "localqueues.kueue.x-k8s.io, list workloads.kueue.x-k8s.io and 22 more): bind gpuaas-reader "
             "(kubectl apply -f deployments/kubernetes/rbac.yaml)"),
], ids=["reclaim-applies-without-its-role", "all-writes-without-the-rebalancer", "no-role"])
def test_a_role_missing_for_what_the_flows_do_is_named(
        tmp_path: Path, reclaim_fleet: EmbeddedCluster, roles: list[str], args: tuple[str, ...], said: str) -> None:
    env = {}
    if "--policy-applies" in args:
        env["GPUAAS_POLICY_FILE"] = str(write_policy(tmp_path / "policy.yaml", mode="apply"))
        args = ()
    reclaim_fleet.api.rbac = RBACRules.from_manifest(MANIFEST, roles) if roles else RBACRules([])
    try:
        run = _preflight(tmp_path, reclaim_fleet, *args, **env)
    finally:
        reclaim_fleet.api.rbac = None
    assert run.returncode == 1
    verdict, detail = _checks(run)["permissions"]
    reads = "" if not roles else "allowed: the 25 reads every flow makes; refused: "  # the reader role reads
    assert verdict == "failed" and detail == f"as system:serviceaccount:gpuaas:gpuaas: {reads}{said}"  # the user the rules are bound to


def test_what_the_policy_names_is_matched_to_the_cluster(tmp_path: Path, reclaim_fleet: EmbeddedCluster) -> None:
    """The scenario's tenants (team-a, team-g) are there; a misspelt namespace, ClusterQueue and cohort are named."""
    good = _checks(_preflight(tmp_path, reclaim_fleet,
                              GPUAAS_POLICY_FILE=str(write_policy(tmp_path / "good.yaml"))))
    assert good["policy against the cluster"][0] == "ok"
    typo = tmp_path / "typo.yaml"
    typo.write_text("tenants:\n  - {name: team-a, namespaces: [team-a, team-aa], cluster_queues: [team-a-cqq]}\n"
                    "rebalance: {cohorts: [reserch]}\n")
    verdict, detail = _checks(_preflight(tmp_path, reclaim_fleet, GPUAAS_POLICY_FILE=str(typo)))[
        "policy against the cluster"]
    assert verdict == "warning"
    assert detail == ("tenant team-a names ClusterQueue team-a-cqq, which the cluster lacks; tenant team-a's "
                      "namespace team-aa has no LocalQueue and no Workload; rebalance.cohorts names reserch, "
                      "which no ClusterQueue belongs to (a typo in the policy file?)")
