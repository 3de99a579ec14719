"""The step loop: submit what is due, let Kueue admit, finish what is done, emit telemetry.

``Simulation.step(dt)`` moves the injected clock by ``dt`` and brings the cluster up to the
new instant; ``tick()`` does the same for a clock that moves by itself (the live runner).
Everything the loop decides depends only on the scenario, the seed and the clock, so two runs
with the same inputs create the same objects and the same samples.

A workload's duration counts from when its pods first hold GPUs (not from submission), as a
job's run time does; the loop then finishes its Kueue Workload, which frees the quota.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from gpuaas.cluster._opencost_ledger import CostLedger
from gpuaas.cluster._pod_series import PodSeries, held_by_pod
from gpuaas.cluster._scenario_objects import GPU
from gpuaas.cluster._telemetry_kueue import quantity
from gpuaas.cluster.clock import Clock
from gpuaas.cluster.scenario import (
    Instance,
    Scenario,
    WorkloadKind,
    fleet_objects,
    instances,
    workload_objects,
)
from gpuaas.cluster.telemetry import HeldGpu, Sample, TelemetryGenerator, container_name, kueue_samples

__all__ = ["KueueLike", "Simulation", "StoreLike"]


class StoreLike(Protocol):
    def create(self, obj: dict[str, Any]) -> dict[str, Any]: ...

    def list(self, kind: str, namespace: str | None = None, label_selector: str | None = None) -> Any: ...

    def page(self, kind: str) -> Any: ...

    @property
    def resource_version(self) -> str: ...


class KueueLike(Protocol):
    def reconcile(self) -> Any: ...

    def finish(self, namespace: str, name: str, succeeded: bool = True) -> Any: ...

    def workloads_for(self, kind: str, namespace: str, name: str) -> list[dict[str, Any]]: ...

    def gpu_assignments(self) -> Any: ...


@dataclass
class _Running:
    instance: Instance
    started: datetime
    finished: bool = False


class Simulation:
    """Drives one scenario on a store and a Kueue controller, under an injected clock."""

    def __init__(self, scenario: Scenario, store: StoreLike, kueue: KueueLike, clock: Clock, seed: int = 0,
                 ledger: CostLedger | None = None) -> None:
        self.scenario = scenario
        self.store = store
        self.kueue = kueue
        self.clock = clock
        self.seed = seed
        self.epoch = clock.now()
        self.last = self.epoch
        self.ledger = ledger or CostLedger()
        self.telemetry = TelemetryGenerator(scenario, seed)
        self._queue = instances(scenario)
        self._next = 0
        self._by_owner: dict[tuple[str, str], Instance] = {}
        self._running: dict[tuple[str, str], _Running] = {}
        self._lq_to_cq = {(t.ns, t.lq): t.cq for t in scenario.tenants}
        self.provider_ids: dict[str, str] = {}
        self.series = PodSeries(scenario, {(g.node, g.index): g.uuid for g in self.telemetry.gpus}, self.provider_ids)
        self.current: list[Sample] = []
        self.installed = False
        self._pending_at: tuple[str, dict[tuple[str, str], float]] | None = None  # (store rv, requests)

    # --- set-up --------------------------------------------------------------------------
    def install(self) -> None:
        """Create the fleet (namespaces, nodes, flavors, queues); call once, before stepping."""
        for obj in fleet_objects(self.scenario):
            self.store.create(obj)
            if obj["kind"] == "Node":
                self.provider_ids[obj["metadata"]["name"]] = obj["spec"]["providerID"]
        self.installed = True

    @property
    def submitted(self) -> list[Instance]:
        return self._queue[: self._next]

    # --- the loop ------------------------------------------------------------------------
    def step(self, dt: timedelta) -> list[Sample]:
        """Advance the clock by ``dt`` and bring the cluster up to date; returns the samples."""
        if dt > timedelta(0):
            self.clock.advance(dt)
        return self.tick()

    def tick(self) -> list[Sample]:
        """Bring the cluster up to ``clock.now()`` (however far it moved) and return the samples."""
        if not self.installed:
            self.install()
        now = self.clock.now()
        self._submit_due(now)
        self._finish_due(now)
        self.kueue.reconcile()
        held = self._held(now)
        self.current = self._samples(now, held)
        self._record_costs(now, held)
        self.last = now
        return self.current

    def _submit_due(self, now: datetime) -> None:
        while self._next < len(self._queue) and self.epoch + self._queue[self._next].submit_at <= now:
            inst = self._queue[self._next]
            for obj in workload_objects(inst.spec, inst.name, inst.tenant, self.epoch):
                self.store.create(obj)
            self._by_owner[(inst.tenant.ns, inst.name)] = inst
            self._next += 1

    def _finish_due(self, now: datetime) -> None:
        for (ns, name), run in sorted(self._running.items()):
            duration = run.instance.spec.duration
            if run.finished or duration is None or run.started + duration > now:
                continue
            if run.instance.spec.kind is WorkloadKind.WORKLOAD:
                names = [name]
            else:
                names = [wl["metadata"]["name"] for wl in self.kueue.workloads_for(run.instance.owner_kind, ns, name)]
            for wl_name in names:
                self.kueue.finish(ns, wl_name, succeeded=True)
            run.finished = True

    def _resolve(self, namespace: str, owner_name: str, workload: str) -> Instance | None:
        return self._by_owner.get((namespace, owner_name)) or self._by_owner.get((namespace, workload))

    def _held(self, now: datetime) -> dict[tuple[str, int], HeldGpu]:
        held: dict[tuple[str, int], HeldGpu] = {}
        for a in sorted(self.kueue.gpu_assignments(), key=lambda a: (a.node, a.gpu_index)):
            inst = self._resolve(a.namespace, a.owner_name, a.workload)
            started = now
            if inst is not None:
                run = self._running.setdefault((a.namespace, inst.name), _Running(inst, now))
                started = run.started
            container = container_name(inst.spec.kind, inst.name) if inst else "main"
            held[(a.node, a.gpu_index)] = HeldGpu(a.namespace, a.pod, container, inst, started)
        return held

    def _samples(self, now: datetime, held: dict[tuple[str, int], HeldGpu]) -> list[Sample]:
        ts = now.timestamp()
        out = self.telemetry.gpu_samples(now, held)
        out.extend(self.series.serving(now, now - self.last, held))
        out.extend(kueue_samples(self.store.list("ClusterQueue"), ts, self._pending_requests()))
        out.extend(self.series.opencost(held, ts))
        return out

    def _pending_requests(self) -> dict[tuple[str, str], float]:
        """GPUs requested by pending Workloads per ClusterQueue; recomputed only after a write."""
        rv = self.store.resource_version
        if self._pending_at is None or self._pending_at[0] != rv:
            self._pending_at = (rv, self._count_pending())
        return dict(self._pending_at[1])

    def _count_pending(self) -> dict[tuple[str, str], float]:
        pending: dict[tuple[str, str], float] = defaultdict(float)
        for wl in self.store.page("Workload").items:  # read only: no copy of every Workload each step
            conditions = (wl.get("status") or {}).get("conditions") or []
            if any(c.get("type") in ("QuotaReserved", "Finished") and c.get("status") == "True" for c in conditions):
                continue
            spec = wl.get("spec") or {}
            if spec.get("active") is False:
                continue
            cq = self._lq_to_cq.get((wl["metadata"].get("namespace", ""), spec.get("queueName", "")))
            if cq is None:
                continue
            for ps in spec.get("podSets") or []:
                for c in ((ps.get("template") or {}).get("spec") or {}).get("containers") or []:
                    req = (c.get("resources") or {}).get("requests") or {}
                    pending[(cq, GPU)] += quantity(req.get(GPU)) * int(ps.get("count", 1))
        return dict(pending)

    def _record_costs(self, now: datetime, held: dict[tuple[str, int], HeldGpu]) -> None:
        """Charge each pod's GPUs for ``(last, now]``, from when the pod started holding them."""
        for (_, _, node), indices in sorted(held_by_pod(held).items()):
            h = held[(node, indices[0])]
            start = max(self.last, h.started)
            if start >= now:
                continue
            inst = h.instance
            util = None
            if inst is not None and not inst.spec.drop_telemetry:
                util = sum(self.telemetry.utilisation(held[(node, i)], now) for i in indices) / len(indices)
            self.ledger.record(self.series.key(h, node, indices), start, now, util)
