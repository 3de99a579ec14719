"""The real backend: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and the Kueue manager,
built from the Go module proxy.

``build_all`` builds (or finds in the cache) the binaries; ``RealCluster`` starts them on loopback
and loads a scenario. The embedded emulator (``gpuaas.cluster.runner``) stays the default; this
backend is what the conformance and differential suites hold the emulator to.
"""

from gpuaas.cluster.real._build import *  # noqa: F403
from gpuaas.cluster.real._build import __all__ as _build_all
from gpuaas.cluster.real._cluster import *  # noqa: F403
from gpuaas.cluster.real._cluster import __all__ as _cluster_all
from gpuaas.cluster.real._kubeapi import *  # noqa: F403
from gpuaas.cluster.real._kubeapi import __all__ as _kubeapi_all

__all__ = [*_build_all, *_cluster_all, *_kubeapi_all]
