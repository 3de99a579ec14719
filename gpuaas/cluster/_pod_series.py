"""vLLM and OpenCost series for the pods that hold GPUs, shared by both backends.

The embedded cluster's step loop (``simulation``) and the real backend's loopback exporter
(``real._gpu_exporter``) know the same about a running pod: the GPUs it holds and the scenario
instance it belongs to (``HeldGpu``). From that, ``PodSeries`` builds what OpenCost records for the
pod (an ``AllocationKey`` priced at its node pool's rates) and publishes (``opencost_samples``),
and, for a pod of a serving instance, its cumulative vLLM counters. Both backends therefore
expose the same series names, labels and prices for the same scenario.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime, timedelta

from gpuaas.cluster._opencost_ledger import AllocationKey
from gpuaas.cluster._scenario_objects import node_names
from gpuaas.cluster._telemetry_serving import ServingCounters
from gpuaas.cluster.opencost import opencost_samples
from gpuaas.cluster.scenario import Instance, NodePool, Scenario, WorkloadKind
from gpuaas.cluster.telemetry import HeldGpu, Sample

__all__ = ["PodSeries", "held_by_pod"]

_CONTROLLER_KIND = {
    WorkloadKind.DEPLOYMENT: "deployment",
    WorkloadKind.STATEFUL_SET: "statefulset",
    WorkloadKind.NOTEBOOK: "statefulset",
    WorkloadKind.INFERENCE_SERVICE: "deployment",
    WorkloadKind.RAY_CLUSTER: "raycluster",
    WorkloadKind.WORKLOAD: "job",
}


def _controller(inst: Instance) -> tuple[str, str]:
    """(controller, controllerKind) as OpenCost derives them from the pod's owner chain."""
    suffix = "-predictor" if inst.spec.kind is WorkloadKind.INFERENCE_SERVICE else ""
    return inst.name + suffix, _CONTROLLER_KIND[inst.spec.kind]


def held_by_pod(held: Mapping[tuple[str, int], HeldGpu]) -> dict[tuple[str, str, str], list[int]]:
    """GPU indices per ``(namespace, pod, node)``, sorted."""
    by_pod: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for (node, idx), h in sorted(held.items()):
        by_pod[(h.namespace, h.pod, node)].append(idx)
    return by_pod


class PodSeries:
    """Allocation keys and vLLM counters per pod, kept across steps (counters are cumulative)."""

    def __init__(self, scenario: Scenario, gpu_uuids: Mapping[tuple[str, int], str],
                 provider_ids: dict[str, str]) -> None:
        """``provider_ids`` (node -> ``spec.providerID``) is read when a pod is first seen, so it
        may be filled after construction (the embedded cluster learns it when it creates the nodes)."""
        self.scenario = scenario
        self._uuids = gpu_uuids
        self._provider_ids = provider_ids
        self._pools: dict[str, NodePool] = {n: p for p in scenario.pools for n in node_names(p)}
        self._keys: dict[tuple[str, str, str], AllocationKey] = {}
        self._serving: dict[tuple[str, str], ServingCounters] = {}

    def key(self, held: HeldGpu, node: str, indices: list[int]) -> AllocationKey:
        """OpenCost's allocation for the pod's GPU container on ``node``."""
        cache_key = (held.namespace, held.pod, node)
        key = self._keys.get(cache_key)
        if key is None:
            pool = self._pools[node]
            inst = held.instance
            controller, controller_kind = _controller(inst) if inst else ("", "")
            labels = {"app": inst.name, **inst.spec.labels} if inst else {}
            annotations = dict(inst.spec.annotations) if inst else {}
            key = AllocationKey(
                cluster=self.scenario.cluster, node=node, namespace=held.namespace, pod=held.pod,
                container=held.container, controller=controller, controller_kind=controller_kind,
                provider_id=self._provider_ids.get(node, node), labels=tuple(sorted(labels.items())),
                annotations=tuple(sorted(annotations.items())), gpu_model=pool.gpu_model,
                gpu_uuids=tuple(self._uuids[(node, i)] for i in sorted(indices)), gpu_price=pool.gpu_hourly_price,
                cpu_cores=inst.spec.cpu_per_pod if inst else 0.0,
                ram_bytes=(inst.spec.memory_gib_per_pod if inst else 0.0) * 2**30,
                cpu_price=pool.cpu_hourly_price, ram_gib_price=pool.ram_gib_hourly_price)
            self._keys[cache_key] = key
        return key

    def serving(self, now: datetime, dt: timedelta, held: Mapping[tuple[str, int], HeldGpu]) -> list[Sample]:
        """vLLM series of each pod of a serving instance, with the requests of ``(now - dt, now]`` added
        (an instance's traffic is split evenly between its pods)."""
        pods: dict[tuple[str, str], HeldGpu] = {(h.namespace, h.pod): h for h in held.values()}
        per_instance: dict[str, int] = defaultdict(int)
        for h in pods.values():
            if h.instance is not None:
                per_instance[h.instance.name] += 1
        out: list[Sample] = []
        for (ns, pod), h in sorted(pods.items()):
            if h.instance is None or h.instance.spec.serving is None or h.instance.spec.drop_telemetry:
                continue
            counters = self._serving.setdefault((ns, pod), ServingCounters(h.instance.spec.serving, ns, pod))
            counters.advance(now, dt, now - h.started, per_instance[h.instance.name])
            out.extend(counters.samples(now.timestamp()))
        return out

    def opencost(self, held: Mapping[tuple[str, int], HeldGpu], ts: float) -> list[Sample]:
        """OpenCost's node prices and each pod's GPU, CPU and RAM allocation (``opencost_samples``)."""
        keys = [self.key(held[(node, idx[0])], node, idx) for (_, _, node), idx in sorted(held_by_pod(held).items())]
        return opencost_samples(self.scenario, self._provider_ids, keys, ts)
