"""A command that ends on the Kubernetes API's error status names the API that answered, as a source's failure
does: ``error: Kubernetes API at URL: reading Namespace kube-system: 500 Internal Server Error``."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from gpuaas.cli._common import describe_error
from gpuaas.cli.app import app
from gpuaas.errors import KubeAPIError
from tests.fixed_answer import fixed_answer_server, token_kubeconfig


def test_a_kubernetes_error_status_that_ends_a_command_names_the_api(tmp_path: Path) -> None:
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "etcd is down", "code": 500}
    with fixed_answer_server() as answer:
        url = answer(json.dumps(status).encode(), 500)
        result = CliRunner().invoke(app, ["replay", "reclaim", "--from-prometheus", "--since", "1h"], env={
            "GPUAAS_KUBECONFIG": str(token_kubeconfig(tmp_path / "kc", url)), "GPUAAS_PROMETHEUS_URL": url,
            "GPUAAS_DATA_DIR": str(tmp_path / "data"), "GPUAAS_RETRIES": "0"})
    assert result.exit_code == 1, result.output
    [line] = result.stderr.strip().splitlines()[-1:]
    assert line.startswith(f"error: Kubernetes API at {url}: reading "), line
    assert "500 Internal Server Error" in line and "etcd is down" in line


def test_an_error_of_unknown_origin_is_worded_as_before() -> None:
    assert describe_error(KubeAPIError(status=409, reason="Conflict", verb="patching", kind="RayCluster",
                                       namespace="a", name="b")) == "patching RayCluster a/b: 409 Conflict"
