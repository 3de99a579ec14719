"""The real control plane's build: the pinned staging modules match the kubernetes module's own go.mod,
the binaries are cached and report the versions they were stamped with, and a second build is a cache hit."""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest

from gpuaas.cluster.real import (
    ETCD_VERSION,
    KUBERNETES_VERSION,
    KWOK_VERSION,
    build_all,
    find_go,
    staging_replaces,
    tools_dir,
)

pytestmark = [pytest.mark.real]


def test_the_apiserver_tool_module_pins_every_staging_module_of_kubernetes() -> None:
    go = find_go(print)
    module = tools_dir() / "apiserver"
    out = subprocess.run([go, "mod", "download", "-json", f"k8s.io/kubernetes@{KUBERNETES_VERSION}"], cwd=module,
                         capture_output=True, text=True, check=True, timeout=600)
    upstream = open(json.loads(out.stdout)["GoMod"]).read()
    want = staging_replaces(upstream, KUBERNETES_VERSION.replace("v1.", "v0.", 1))
    assert len(want) > 20
    ours = (module / "go.mod").read_text()
    have = sorted(f"\t{m[1]} => {m[2]} {m[3]}" for m in re.finditer(r"^\s*(k8s\.io/\S+) => (\S+) (v\S+)$", ours,
                                                                   re.MULTILINE))
    assert have == want, "regenerate the replace block of tools/k8s/apiserver/go.mod (staging_replaces)"


def test_the_cached_binaries_carry_their_versions_and_a_second_build_is_a_cache_hit() -> None:
    bins = build_all(print)
    started = time.monotonic()
    lines: list[str] = []
    assert build_all(lines.append) == bins
    assert time.monotonic() - started < 5 and lines and "cached" in lines[0]
    for binary in (bins.kube_apiserver, bins.kube_controller_manager, bins.kube_scheduler):
        version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60)
        assert version.stdout.strip() == f"Kubernetes {KUBERNETES_VERSION}", binary.name
    kubectl = subprocess.run([str(bins.kubectl), "version", "--client"], capture_output=True, text=True, timeout=60)
    assert f"Client Version: {KUBERNETES_VERSION}" in kubectl.stdout, kubectl.stdout
    kwok = subprocess.run([str(bins.kwok), "--version"], capture_output=True, text=True, timeout=60)
    assert KWOK_VERSION.lstrip("v") in kwok.stdout, kwok.stdout
    assert sorted(p.name for p in (bins.manifests / "kwok-stages").iterdir()) == ["pod-delete.yaml", "pod-ready.yaml"]
    etcd = subprocess.run([str(bins.etcd), "--version"], capture_output=True, text=True, timeout=60)
    assert f"etcd Version: {ETCD_VERSION.lstrip('v')}" in etcd.stdout
