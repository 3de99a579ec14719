"""The embedded API server can require a bearer token, as a real one does.

* without a token, or with a wrong one, every API request is a 401 ``Status`` (the health
  probes stay open, as kubelet's probes need);
* the kubeconfig the server writes carries the token, is private to its owner, and the
  official client sends it;
* gpuaas's own Kubernetes reader, on a kubeconfig without the token, reports the 401 as a
  failed source naming the status, and never the token;
* ``gpuaas cluster up`` with ``GPUAAS_CLUSTER_TOKEN`` (``--token``): tests/cluster/test_embedded_cluster.py.
"""

from __future__ import annotations

import stat
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from kubernetes import client, config

from gpuaas.cluster.apiserver import ApiServer, ObjectStore
from gpuaas.settings import GpuaasSettings
from gpuaas.sources.kube import read_kube

TOKEN = "s3cret-embedded-token-1234"


@pytest.fixture()
def server() -> ApiServer:
    api = ApiServer(ObjectStore(lambda: datetime(2026, 3, 1, tzinfo=UTC)), token=TOKEN)
    api.start()
    yield api  # type: ignore[misc]
    api.stop()


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"},
                                     {"Authorization": f"Bearer {TOKEN}x"}], ids=["none", "wrong", "basic", "longer"])
def test_requests_without_the_token_are_401(server: ApiServer, headers: dict[str, str]) -> None:
    for path in ("/api/v1/namespaces", "/apis/kueue.x-k8s.io/v1beta2/workloads", "/version", "/apis"):
        resp = httpx.get(f"{server.url}{path}", headers=headers, timeout=5)
        assert resp.status_code == 401, path
        assert resp.json()["reason"] == "Unauthorized" and TOKEN not in resp.text
    assert httpx.get(f"{server.url}/healthz", timeout=5).status_code == 200


def test_the_kubeconfig_carries_the_token_and_the_official_client_sends_it(server: ApiServer, tmp_path: Path) -> None:
    path = server.write_kubeconfig(tmp_path / "kubeconfig")
    assert TOKEN in path.read_text() and stat.S_IMODE(path.stat().st_mode) == 0o600
    core = client.CoreV1Api(config.new_client_from_config(config_file=str(path)))
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    assert [n.metadata.name for n in core.list_namespace().items] == ["team-a"]
    assert httpx.get(f"{server.url}/api/v1/namespaces", headers={"Authorization": f"Bearer {TOKEN}"},
                     timeout=5).status_code == 200


def test_the_reader_reports_a_401_without_leaking_the_token(server: ApiServer, tmp_path: Path) -> None:
    from gpuaas.errors import Forbidden

    path = server.write_kubeconfig(tmp_path / "kubeconfig")
    path.write_text(path.read_text().replace(TOKEN, "stale-token"))
    with pytest.raises(Forbidden) as caught:
        read_kube(GpuaasSettings(kubeconfig=path))
    assert caught.value.status == 401 and "stale-token" not in str(caught.value) and TOKEN not in str(caught.value)
