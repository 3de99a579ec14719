"""What the real cluster is given, checked without starting it: Kueue's own webhooks pointed at loopback,
the conversion webhook on the CRDs Kueue converts, the manager's configuration, and a user's Job in
place of a Workload the emulator stores."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpuaas.cluster.real import build_all
from gpuaas.cluster.real._manifests import kueue_config, kueue_crds, webhook_configurations
from gpuaas.cluster.real._scenario import QUEUE_LABEL, real_workload_objects
from gpuaas.cluster.scenario import default_scenario

pytestmark = [pytest.mark.real]

URL = "https://127.0.0.1:9443"


@pytest.fixture(scope="module")
def manifests() -> Path:
    return build_all().manifests


def test_every_kept_webhook_points_at_the_manager_on_loopback(manifests: Path) -> None:
    configs = webhook_configurations(manifests, URL, "Q0E=")
    hooks = [h for c in configs for h in c["webhooks"]]
    names = {h["name"] for h in hooks}
    assert {"mworkload.kb.io", "vclusterqueue.kb.io", "mjob.kb.io", "mraycluster.kb.io"} <= names
    assert not any("appwrapper" in name or "jobset" in name for name in names)  # integrations not enabled
    for hook in hooks:
        assert hook["clientConfig"]["url"].startswith(URL + "/") and hook["clientConfig"]["caBundle"] == "Q0E="
    pod = next(h for h in hooks if h["name"] == "mpod.kb.io")
    assert pod["namespaceSelector"]["matchExpressions"][0]["values"] == ["kube-system", "kueue-system"]


def test_the_crds_kueue_converts_carry_the_conversion_webhook(manifests: Path) -> None:
    crds = {c["metadata"]["name"]: c for c in kueue_crds(manifests, URL, "Q0E=")}
    for name in ("workloads.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io"):
        conversion = crds[name]["spec"]["conversion"]
        assert conversion["webhook"]["clientConfig"]["url"] == f"{URL}/convert"
    served = {v["name"] for v in crds["workloads.kueue.x-k8s.io"]["spec"]["versions"] if v["served"]}
    assert served == {"v1beta1", "v1beta2"}


def test_the_manager_config_keeps_to_loopback_without_leader_election(tmp_path: Path) -> None:
    config = kueue_config(webhook_port=1, cert_dir=tmp_path, metrics_port=2, health_port=3)
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["internalCertManagement"] == {"enable": False}
    assert config["metrics"] == {"bindAddress": "127.0.0.1:2", "enableClusterQueueResources": True}
    assert {"batch/job", "ray.io/raycluster", "pod", "deployment", "statefulset"} <= set(
        config["integrations"]["frameworks"])


def test_a_scenario_workload_becomes_a_suspended_job_with_the_queue_label() -> None:
    objects = real_workload_objects(default_scenario(), datetime.now(UTC))
    assert not any(o["kind"] == "Workload" for o in objects)  # Kueue creates them
    for job in (o for o in objects if o["kind"] == "Job"):
        assert job["spec"]["suspend"] is True and QUEUE_LABEL in job["metadata"]["labels"]
        assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
