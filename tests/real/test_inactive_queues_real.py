"""What Kueue does with a stopped ClusterQueue and with a cohort whose parents loop, on the real manager
(the facts the rebalance and the deadline planner rely on):

- a ClusterQueue with ``spec.stopPolicy: HoldAndDrain`` gets ``Active=False`` (reason ``Stopped``) and
  admits nothing; an active queue of its cohort still borrows the stopped queue's unused quota
  (Kueue's scheduler snapshot keeps the cohort's subtree quota whole and leaves only the stopped
  queue out);
- a ClusterQueue under a cohort whose ``spec.parentName`` loops admits nothing.

Each case gets its own names (a prefix), so the cases share the session's real cluster. The embedded
emulator does neither (it admits into both: docs/embedded-cluster.md), so these run on the real manager only.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from gpuaas.cluster.kueue import testing as t
from gpuaas.cluster.real import KubeHTTP
from gpuaas.quantity import GPU
from tests.real.differential import Backend, Observation, RealBackend, observe

pytestmark = [pytest.mark.real]

KUEUE = t.KUEUE


def _active(backend: Backend, name: str) -> tuple[str, str]:
    cq = backend.get("ClusterQueue", None, name)
    cond: dict[str, Any] = next((c for c in (cq.get("status") or {}).get("conditions") or [] if c.get("type") == "Active"), {})
    return str(cond.get("status", "")), str(cond.get("reason", ""))


def _queue(backend: Backend, ns: str, name: str, gpus: int, cohort: str) -> None:
    backend.create(t.cluster_queue(name, {"h100": {GPU: gpus}}, cohort=cohort))
    backend.create(t.local_queue(ns, name, name))


def _stopped(backend: Backend, p: str) -> tuple[tuple[str, str], Observation]:
    """``{p}s`` (8 GPUs, stopped) and ``{p}a`` (4 GPUs) in one cohort; an 8-GPU job on each."""
    ns = f"{p}ns"
    backend.create({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}}})
    _queue(backend, ns, f"{p}s", 8, f"{p}c")
    _queue(backend, ns, f"{p}a", 4, f"{p}c")
    backend.patch("ClusterQueue", None, f"{p}s", {"spec": {"stopPolicy": "HoldAndDrain"}})
    backend.settle(ns)
    backend.next_second()
    backend.create(t.raycluster(ns, f"{p}on-stopped", f"{p}s", [("workers", 1, 2)]))
    backend.next_second()
    backend.create(t.raycluster(ns, f"{p}borrows", f"{p}a", [("workers", 2, 4)]))
    backend.settle(ns)
    # Under load Kueue may first find the job inadmissible and retry it only after its backoff, past the 3 quiet
    # seconds ``settle`` waits for: wait a bounded minute more for the admission the stopped queue's quota allows.
    deadline = time.monotonic() + 60
    while not observe(backend.workloads(ns), p)[0] and time.monotonic() < deadline:
        time.sleep(0.5)
    return _active(backend, f"{p}s"), observe(backend.workloads(ns), p)


def _looping(backend: Backend, p: str) -> tuple[tuple[str, str], Observation]:
    """``{p}y`` (4 GPUs) under cohort ``{p}child``, whose parent ``{p}root`` has ``{p}child`` as its parent."""
    ns = f"{p}ns"
    backend.create({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}}})
    for name, parent in ((f"{p}root", f"{p}child"), (f"{p}child", f"{p}root")):
        backend.create({"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name},
                        "spec": {"parentName": parent}})
    _queue(backend, ns, f"{p}y", 4, f"{p}child")
    backend.next_second()
    backend.create(t.raycluster(ns, f"{p}job", f"{p}y", [("workers", 1, 2)]))
    backend.settle(ns)
    return _active(backend, f"{p}y"), observe(backend.workloads(ns), p)


@pytest.fixture(scope="module")
def real_backend(api: KubeHTTP) -> RealBackend:
    backend = RealBackend(api)
    try:
        backend.create(t.resource_flavor("h100"))
    except Exception:  # noqa: BLE001 - another module of the session created it
        pass
    return backend


def _cleanup(backend: Backend, ns: str) -> None:
    """Deactivate the case's Workloads so its pods leave the nodes for the tests after it."""
    for wl in backend.workloads(ns):
        backend.patch("Workload", ns, wl["metadata"]["name"], {"spec": {"active": False}})


def test_a_stopped_queue_admits_nothing_and_its_quota_is_still_borrowed(real_backend: RealBackend) -> None:
    try:
        condition, (admitted, _) = _stopped(real_backend, "stop-")
    finally:
        _cleanup(real_backend, "stop-ns")
    assert condition == ("False", "Stopped") and admitted == {"borrows": "h100"}


def test_a_queue_under_a_cohort_loop_admits_nothing(real_backend: RealBackend) -> None:
    try:
        _, (admitted, _) = _looping(real_backend, "loop-")
    finally:
        _cleanup(real_backend, "loop-ns")
    assert admitted == {}
