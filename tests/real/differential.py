"""Run a differential case on a backend and observe what Kueue decided.

Two backends with one interface: ``EmbeddedBackend`` (the emulator's store and Kueue controller on
a fake clock moved one second per created job) and ``RealBackend`` (the real API server and Kueue
manager; it waits for the next wall-clock second between jobs, so creation times are as distinct as
on the emulator, and lets Kueue settle after each write). An observation is the admitted jobs (their
Workloads, named by the owning RayCluster) with the GPU flavor each got, and the evicted ones.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any, Protocol

from gpuaas.cluster.apiserver import ObjectStore
from gpuaas.cluster.kueue import KueueController
from gpuaas.cluster.kueue import testing as t
from gpuaas.cluster.kueue.testing import PRIORITY_LABEL
from gpuaas.cluster.real import KubeHTTP
from tests.real.differential_cases import GPU, NIC, PRIORITIES, Case, Op

__all__ = ["Backend", "EmbeddedBackend", "Observation", "RealBackend", "observe", "run_case"]

Observation = tuple[dict[str, str], frozenset[str]]  # ({name: GPU flavor} admitted, evicted names)


class Backend(Protocol):
    def create(self, obj: dict[str, Any]) -> None: ...
    def patch(self, kind: str, namespace: str | None, name: str, patch: dict[str, Any]) -> None: ...
    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any]: ...
    def workloads(self, namespace: str) -> list[dict[str, Any]]: ...
    def next_second(self) -> None: ...
    def settle(self, namespace: str) -> None: ...


def _cond(wl: dict[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in (wl.get("status") or {}).get("conditions") or [])


def _job_name(wl: dict[str, Any]) -> str:
    """The RayCluster a Workload was created for (Kueue names Workloads with a hash of the job's uid)."""
    owners = wl["metadata"].get("ownerReferences") or [{}]
    return str(owners[0].get("name") or wl["metadata"]["name"])


def observe(workloads: list[dict[str, Any]], prefix: str) -> Observation:
    admitted: dict[str, str] = {}
    evicted: set[str] = set()
    for wl in workloads:
        name = _job_name(wl).removeprefix(prefix)
        if _cond(wl, "QuotaReserved"):
            flavors = [a.get("flavors", {}).get(GPU, "")
                       for a in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []]
            admitted[name] = ",".join(f for f in flavors if f)  # the head asks no GPU
        if _cond(wl, "Evicted"):
            evicted.add(name)
    return admitted, frozenset(evicted)


class EmbeddedBackend:
    def __init__(self) -> None:
        self.clock = t.FakeClock(datetime.now(UTC).replace(microsecond=0))
        self.store = ObjectStore(self.clock)
        self.kueue = KueueController(self.store, self.clock)

    def create(self, obj: dict[str, Any]) -> None:
        self.store.create(obj)  # Namespaces too: a ClusterQueue's namespaceSelector reads their labels

    def patch(self, kind: str, namespace: str | None, name: str, patch: dict[str, Any]) -> None:
        self.store.patch(kind, namespace, name, patch)

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        return self.store.get(kind, namespace, name)

    def workloads(self, namespace: str) -> list[dict[str, Any]]:
        return self.store.list("Workload", namespace)

    def next_second(self) -> None:
        self.clock.advance(1)

    def settle(self, namespace: str) -> None:
        for _ in range(6):  # eviction, then admission: a few passes, as Kueue's loop would run them
            self.kueue.reconcile()
            self.clock.advance(1)


class RealBackend:
    def __init__(self, api: KubeHTTP) -> None:
        self.api = api

    def create(self, obj: dict[str, Any]) -> None:
        self.api.create(obj)

    def patch(self, kind: str, namespace: str | None, name: str, patch: dict[str, Any]) -> None:
        self.api.merge_patch(kind, name, patch, namespace)

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        return self.api.get(kind, name, namespace)

    def workloads(self, namespace: str) -> list[dict[str, Any]]:
        return self.api.list("Workload", namespace)

    def next_second(self) -> None:
        time.sleep(1.0 - (time.time() % 1.0) + 0.02)

    def settle(self, namespace: str) -> None:
        """Until Kueue has seen every job and nothing changed for 3 s: each RayCluster has its
        Workload, each Workload a ``QuotaReserved`` condition (Kueue's scheduler has looked at it) and
        no eviction is under way (evicted, its job suspended, its quota not yet released); eviction
        then admission may take two passes. Under load Kueue takes seconds per step."""
        last: Observation | None = None
        stable_since = time.monotonic()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            workloads = self.workloads(namespace)
            now = observe(workloads, "")
            seen = len(workloads) == len(self.api.list("RayCluster", namespace)) and all(
                any(c.get("type") == "QuotaReserved" for c in (w.get("status") or {}).get("conditions") or [])
                and not (_cond(w, "Evicted") and _cond(w, "QuotaReserved"))  # an eviction still under way
                for w in workloads)
            if now != last or not seen:
                last, stable_since = now, time.monotonic()
            elif time.monotonic() - stable_since >= 3.0:
                return
            time.sleep(0.25)


def _setup(backend: Backend, case: Case, prefix: str, ns: str) -> None:
    backend.create({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}}})
    for queue in case.queues:
        obj = {**queue, "metadata": {"name": prefix + queue["metadata"]["name"]}, "spec": dict(queue["spec"])}
        if "cohortName" in obj["spec"]:
            obj["spec"]["cohortName"] = prefix + obj["spec"]["cohortName"]
        backend.create(obj)
        backend.create(t.local_queue(ns, queue["metadata"]["name"], obj["metadata"]["name"]))


def _apply(backend: Backend, op: Op, prefix: str, ns: str) -> None:
    if op.verb == "create":
        a = op.args
        obj = t.raycluster(ns, prefix + op.name, a["queue"], [("workers", a["count"], a["gpus"])])
        if a["nics"]:
            worker = obj["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
            worker["resources"]["limits"][NIC] = str(a["nics"])
        if a["priority"]:
            obj["metadata"]["labels"][PRIORITY_LABEL] = a["priority"]
        backend.next_second()
        backend.create(obj)
    elif op.verb in ("deactivate", "activate"):
        backend.next_second()
        [workload] = [w for w in backend.workloads(ns) if _job_name(w) == prefix + op.name]
        backend.patch("Workload", ns, workload["metadata"]["name"], {"spec": {"active": op.verb == "activate"}})
    elif op.verb == "demote":
        backend.next_second()
        [workload] = [w for w in backend.workloads(ns) if _job_name(w) == prefix + op.name]
        priority = int(workload["spec"].get("priority") or 0)
        backend.patch("Workload", ns, workload["metadata"]["name"], {"spec": {"priority": priority - 1}})
    elif op.verb == "quota":
        name = prefix + op.name
        spec = backend.get("ClusterQueue", None, name)["spec"]
        for flavor in spec["resourceGroups"][0]["flavors"]:
            if flavor["name"] == op.args["flavor"]:
                for res in flavor["resources"]:
                    if res["name"] == op.args["resource"]:
                        res["nominalQuota"] = op.args["nominal"]
        backend.patch("ClusterQueue", None, name, {"spec": {"resourceGroups": spec["resourceGroups"]}})
    else:
        raise ValueError(f"unknown op {op.verb}")


def common_objects() -> list[dict[str, Any]]:
    """Flavors and priority classes every case shares (cluster-scoped, created once per backend)."""
    return [t.resource_flavor("h100"), t.resource_flavor("a100"),
            *(t.workload_priority_class(name, value) for name, value in PRIORITIES.items())]


def run_case(backend: Backend, case: Case, prefix: str) -> list[Observation]:
    """Set up, then one observation per step."""
    ns = f"{prefix}ns".rstrip("-")
    _setup(backend, case, prefix, ns)
    out = []
    for step in case.steps:
        for op in step.ops:  # Kueue reacts to each write as it lands: so does the emulator here
            _apply(backend, op, prefix, ns)
            backend.settle(ns)
        out.append(observe(backend.workloads(ns), prefix))
    return out
