"""Sources: what gpuaas reads (Kubernetes and Kueue, Prometheus, OpenCost, NVML, traces), as typed records.

Each reader is a module (``kube``, ``prometheus``, ``opencost``, ``nvml``, ``history``, ``cost_window``...);
the names other packages build on are here: the Kubernetes client and its paginated lister, the parsers
of Kueue objects and of the deadline fields, the Prometheus client and the PromQL label helper, and the
JSON decoder every answer is read through (``read_json``: a decoder's every failure one ``UnreadableJSON``).

Why they load on first use: a command pays for the clients it touches (the Kubernetes client alone is
a noticeable share of a short command's start), so importing this package loads none of them.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuaas.sources._concurrent import PROMQL_AT_ONCE
    from gpuaas.sources._json_answer import UnreadableJSON, read_json
    from gpuaas.sources._kube_client import KubeLister, make_api_client
    from gpuaas.sources._kube_deadlines import DEADLINE, EXPECTED_RUNTIME, parse_deadline_fields
    from gpuaas.sources._kube_kueue import (
        parse_cluster_queue,
        parse_local_queue,
        parse_resource_flavor,
        parse_workload,
        pod_spec_gpus,
    )
    from gpuaas.sources._prom_client import PromClient
    from gpuaas.sources._promql import tag
    from gpuaas.sources._retry_after import RETRYING

_HOME = {
    "PROMQL_AT_ONCE": "_concurrent",
    "UnreadableJSON": "_json_answer", "read_json": "_json_answer",
    "KubeLister": "_kube_client", "make_api_client": "_kube_client",
    "DEADLINE": "_kube_deadlines", "EXPECTED_RUNTIME": "_kube_deadlines", "parse_deadline_fields": "_kube_deadlines",
    "parse_cluster_queue": "_kube_kueue", "parse_local_queue": "_kube_kueue", "parse_resource_flavor": "_kube_kueue",
    "parse_workload": "_kube_kueue", "pod_spec_gpus": "_kube_kueue",
    "PromClient": "_prom_client",
    "tag": "_promql",
    "RETRYING": "_retry_after",
}

__all__ = [
    "DEADLINE", "EXPECTED_RUNTIME", "PROMQL_AT_ONCE", "RETRYING", "KubeLister", "PromClient", "UnreadableJSON", "make_api_client",
    "parse_cluster_queue", "parse_deadline_fields", "parse_local_queue", "parse_resource_flavor", "parse_workload",
    "pod_spec_gpus", "read_json", "tag",
]


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value
