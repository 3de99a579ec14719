"""A kubeconfig whose context in use is not among its contexts names that context, the ones it has and the
setting that picks another, instead of the client's ``Expected object with name prod in /path/contexts list``."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuaas.errors import ConfigError
from gpuaas.settings import GpuaasSettings
from gpuaas.sources._kube_client import make_api_client
from gpuaas.sources.failures import describe_failure


def _kubeconfig(path: Path, current: str | None) -> Path:
    path.write_text("apiVersion: v1\nkind: Config\n" + (f"current-context: {current}\n" if current else "") +
                    "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\n"
                    "users: [{name: u, user: {token: t}}]\n"
                    "contexts: [{name: dev, context: {cluster: c, user: u}}, {name: staging, context: {cluster: c, "
                    "user: u}}]\n")
    return path


def _line(settings: GpuaasSettings) -> str:
    with pytest.raises(ConfigError) as info:
        make_api_client(settings)
    return describe_failure(settings, "kube", info.value)


def test_a_current_context_the_file_lacks_is_named_with_the_ones_it_has(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path / "config", "prod-east")
    assert _line(GpuaasSettings(kubeconfig=path)) == (
        f"Kubernetes API at kubeconfig {path}: cannot load the credentials: its current-context 'prod-east' is not "
        "among its contexts (it has: dev, staging): set GPUAAS_KUBE_CONTEXT to one of them, or run kubectl config "
        "use-context")
    make_api_client(GpuaasSettings(kubeconfig=path, kube_context="staging")).close()  # the setting picks one it has


def test_a_context_setting_the_file_lacks_names_the_setting(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path / "config", "dev")
    assert _line(GpuaasSettings(kubeconfig=path, kube_context="prod")) == (
        f"Kubernetes API at kubeconfig {path}: cannot load the credentials: context 'prod' of GPUAAS_KUBE_CONTEXT is "
        "not in the kubeconfig (it has: dev, staging)")


def test_a_kubeconfig_without_a_current_context_says_to_choose_one(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path / "config", None)
    assert _line(GpuaasSettings(kubeconfig=path)).endswith(
        "cannot load the credentials: the kubeconfig names no current-context (it has: dev, staging): set "
        "GPUAAS_KUBE_CONTEXT to one of them")

