"""A ClusterQueue's ``namespaceSelector`` on the real manager, beside the embedded emulator, and as gpuaas reads it.

Kueue keeps a Workload from a namespace its ClusterQueue does not select pending (``QuotaReserved=False``, "Workload
namespace doesn't match ClusterQueue selector"), and a ClusterQueue with no ``namespaceSelector`` at all selects no
namespace. The rebalance and the deadline plan rely on both (``gpuaas.kueue_gaps``), so both are checked here on
Kueue itself, the emulator is held to the same outcome, and gpuaas's own read of the real cluster names the two
LocalQueues. Each case has its own names (a prefix), so the cases share the session's real cluster.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from gpuaas.cluster.kueue import testing as t
from gpuaas.cluster.real import KubeHTTP
from gpuaas.models import SourceStatus
from gpuaas.quantity import GPU
from gpuaas.settings import GpuaasSettings
from gpuaas.snapshot import build_snapshot
from gpuaas.sources.kube import read_kube
from tests.real.differential import Backend, EmbeddedBackend, RealBackend

pytestmark = [pytest.mark.real]

P = "nssel-"
MISMATCH = "Workload namespace doesn't match ClusterQueue selector"


def _namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name, **labels}}}


def _case(backend: Backend) -> dict[str, tuple[str, str]]:
    """``{P}sel`` selects ``team=a``; ``{P}closed`` has no namespaceSelector. A 2-GPU job in ``{P}a`` (labelled) and
    ``{P}x`` (not) on ``{P}sel``, and one in ``{P}a`` on ``{P}closed``. Each job's (QuotaReserved, message)."""
    for ns, labels in ((f"{P}a", {"team": "a"}), (f"{P}x", {})):
        backend.create(_namespace(ns, **labels))
    sel = t.cluster_queue(f"{P}sel", {"h100": {GPU: 8}})
    sel["spec"]["namespaceSelector"] = {"matchLabels": {"team": "a"}}
    closed = t.cluster_queue(f"{P}closed", {"h100": {GPU: 8}})
    del closed["spec"]["namespaceSelector"]
    backend.create(sel)
    backend.create(closed)
    backend.create(t.local_queue(f"{P}a", "lq", f"{P}sel"))
    backend.create(t.local_queue(f"{P}x", "lq", f"{P}sel"))
    backend.create(t.local_queue(f"{P}a", "closed", f"{P}closed"))
    backend.settle(f"{P}a")
    backend.next_second()
    backend.create(t.raycluster(f"{P}a", f"{P}on-a", "lq", [("workers", 1, 2)]))
    backend.create(t.raycluster(f"{P}x", f"{P}on-x", "lq", [("workers", 1, 2)]))
    backend.create(t.raycluster(f"{P}a", f"{P}on-closed", "closed", [("workers", 1, 2)]))
    for ns in (f"{P}a", f"{P}x"):
        backend.settle(ns)
    out = {}
    for ns in (f"{P}a", f"{P}x"):
        for wl in backend.workloads(ns):
            cond: dict[str, Any] = next((c for c in (wl.get("status") or {}).get("conditions") or []
                         if c.get("type") == "QuotaReserved"), {})
            owner = (wl["metadata"].get("ownerReferences") or [{}])[0].get("name", wl["metadata"]["name"])
            out[str(owner).removeprefix(P)] = (str(cond.get("status", "")), str(cond.get("message", "")))
    return out


@pytest.fixture(scope="module")
def real_outcome(api: KubeHTTP) -> dict[str, tuple[str, str]]:
    backend = RealBackend(api)
    try:
        backend.create(t.resource_flavor("h100"))
    except Exception:  # noqa: BLE001 - another module of the session created it
        pass
    try:
        return _case(backend)
    finally:
        for ns in (f"{P}a", f"{P}x"):
            for wl in backend.workloads(ns):
                backend.patch("Workload", ns, wl["metadata"]["name"], {"spec": {"active": False}})


def test_kueue_admits_only_from_the_namespaces_a_queue_selects(real_outcome: dict[str, tuple[str, str]]) -> None:
    assert real_outcome["on-a"][0] == "True"
    assert real_outcome["on-x"] == ("False", MISMATCH)
    assert real_outcome["on-closed"] == ("False", MISMATCH)  # no namespaceSelector: no namespace


def test_the_emulator_does_what_kueue_does(real_outcome: dict[str, tuple[str, str]]) -> None:
    backend = EmbeddedBackend()
    backend.create(t.resource_flavor("h100"))
    emulated = _case(backend)
    assert {k: v[0] for k, v in emulated.items()} == {k: v[0] for k, v in real_outcome.items()}
    assert emulated["on-x"] == emulated["on-closed"] == ("False", MISMATCH)


def test_gpuaas_names_both_local_queues_on_the_real_cluster(real_outcome: dict[str, tuple[str, str]],
                                                           settings: GpuaasSettings) -> None:
    kube = read_kube(settings)
    snap = build_snapshot(datetime.now(UTC), [30], {"kube": SourceStatus("kube", True)}, kube=kube, prom=None)
    rows = {(r.namespace, r.name): r.value for r in snap.data_quality.itertuples() if r.kind == "LocalQueue"}
    assert rows[(f"{P}x", "lq")] == f"{P}sel" and rows[(f"{P}a", "closed")] == f"{P}closed"
    assert (f"{P}a", "lq") not in rows
    queues = snap.queues.set_index("name")
    assert queues.loc[f"{P}sel", "pending_gpus"] == 0.0  # team a's job is admitted; team x's is no backlog
    assert queues.loc[f"{P}closed", "pending_gpus"] == 0.0
