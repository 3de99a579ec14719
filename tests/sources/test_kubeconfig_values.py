"""A kubeconfig of the right shape with one bad value names that value, not "not a kubeconfig".

The client fails on an unclosed IPv6 bracket in ``server`` or a ``*-data`` field that is not base64
with a bare ``ValueError``, as it fails on a file that is no kubeconfig at all; the error names the
field the client reads for the selected context (``GPUAAS_KUBE_CONTEXT``, else the last
``current-context``), across the files of a ``KUBECONFIG`` list, with the URL's credentials hidden.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuaas.errors import ConfigError
from gpuaas.settings import GpuaasSettings
from gpuaas.sources._kube_client import make_api_client
from gpuaas.sources.failures import describe_failure

GOOD = {"server": "http://127.0.0.1:9"}


def _kubeconfig(path: Path, clusters: dict[str, dict[str, str]], users: dict[str, dict[str, str]],
                contexts: dict[str, tuple[str, str]], current: str | None) -> Path:
    lines = ["apiVersion: v1", "kind: Config", f"current-context: {current}" if current else "", "clusters:"]
    lines += [f"- {{name: {n}, cluster: {{{', '.join(f'{k}: {v!r}' for k, v in c.items())}}}}}" for n, c in clusters.items()]
    lines += ["users:"] + [f"- {{name: {n}, user: {{{', '.join(f'{k}: {v!r}' for k, v in u.items())}}}}}"
                           for n, u in users.items()]
    lines += ["contexts:"] + [f"- {{name: {n}, context: {{cluster: {c}, user: {u}}}}}" for n, (c, u) in contexts.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def _refusal(settings: GpuaasSettings) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        make_api_client(settings)
    return info.value


@pytest.mark.parametrize(("cluster", "user", "says"), [
    ({"server": "http://[::1"}, {"token": "t"}, "the server of cluster 'c': not a URL: Invalid IPv6 URL"),
    ({"server": "https://127.0.0.1:9", "certificate-authority-data": "!!!notbase64"}, {"token": "t"},
     "the certificate-authority-data of cluster 'c': not base64"),
    ({"server": "https://127.0.0.1:9"}, {"client-certificate-data": "Zm9v", "client-key-data": "a"},
     "the client-key-data of user 'u': not base64"),
], ids=["server", "ca-data", "client-key-data"])
def test_the_bad_value_is_named(tmp_path: Path, cluster: dict[str, str], user: dict[str, str], says: str) -> None:
    path = _kubeconfig(tmp_path / "config", {"c": cluster}, {"u": user}, {"x": ("c", "u")}, "x")
    settings = GpuaasSettings(kubeconfig=path)
    refusal = _refusal(settings)
    assert str(refusal) == f"{path}: kubeconfig: cannot load Kubernetes credentials: {says}"
    assert describe_failure(settings, "kube", refusal) == (
        f"Kubernetes API at kubeconfig {path}: cannot load the credentials: {says}")


def test_the_selected_context_is_the_one_checked(tmp_path: Path) -> None:
    """``GPUAAS_KUBE_CONTEXT`` picks a context whose cluster is bad; the current one's is fine, and not named."""
    path = _kubeconfig(tmp_path / "config", {"good": GOOD, "bad": {"server": "https://admin:s3cr3t@[::1"}},
                       {"u": {"token": "t"}}, {"x": ("good", "u"), "y": ("bad", "u")}, "x")
    assert make_api_client(GpuaasSettings(kubeconfig=path)).configuration.host == GOOD["server"]
    said = str(_refusal(GpuaasSettings(kubeconfig=path, kube_context="y")))
    assert said.endswith("the server of cluster 'bad': not a URL: Invalid IPv6 URL") and "s3cr3t" not in said


def test_a_kubeconfig_list_is_read_as_the_client_merges_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``KUBECONFIG=a:b``: the first file to define a name wins, the last ``current-context`` is the one used."""
    first = _kubeconfig(tmp_path / "a", {"c": {"server": "http://[::1"}}, {"u": {"token": "t"}},
                        {"x": ("c", "u")}, None)
    second = _kubeconfig(tmp_path / "b", {"c": GOOD}, {}, {}, "x")
    listed = f"{first}{os.pathsep}{second}"
    monkeypatch.setattr("kubernetes.config.kube_config.KUBE_CONFIG_DEFAULT_LOCATION", listed)
    assert str(_refusal(GpuaasSettings())) == (
        f"{listed}: kubeconfig: cannot load Kubernetes credentials: the server of cluster 'c': not a URL: "
        "Invalid IPv6 URL")


def test_a_file_of_another_shape_is_still_not_a_kubeconfig(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    assert str(_refusal(GpuaasSettings(kubeconfig=path))).endswith(
        "cannot load Kubernetes credentials: not a kubeconfig (a YAML mapping of clusters, users and contexts)")


def test_a_directory_is_said_in_words(tmp_path: Path) -> None:
    refusal = _refusal(GpuaasSettings(kubeconfig=tmp_path))
    assert str(refusal) == (f"{tmp_path}: kubeconfig: cannot load Kubernetes credentials: a directory, not a kubeconfig "
                            "file (set GPUAAS_KUBECONFIG to the cluster's kubeconfig file)")
    assert "Errno" not in describe_failure(GpuaasSettings(kubeconfig=tmp_path), "kube", refusal)
