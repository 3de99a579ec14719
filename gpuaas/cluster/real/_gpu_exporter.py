"""dcgm-exporter, vLLM and OpenCost series for the real backend's pods, scraped by the real backend's Prometheus.

No GPU exists on the real backend, so the series come from the embedded backend's generators
(``gpuaas.cluster.telemetry.TelemetryGenerator`` and ``gpuaas.cluster._pod_series.PodSeries``):
one dcgm series set per GPU of the scenario's nodes, with the same names and labels; a GPU a
Running pod holds (by the device stand-in's ``gpu-indices`` annotation) carries that pod's
``namespace``/``pod``/``container`` and the load of the scenario workload the pod belongs to.
For those pods, OpenCost's metrics (node prices, ``container_gpu_allocation``, ...,
``kube_pod_labels``) at the scenario's node pool prices, and for a pod of a serving workload
its vLLM series, whose counters grow by the scenario's traffic between two scrapes. Samples are
computed at each scrape, stamped with the wall clock. OpenCost's allocation API is not served
here: gpuaas reads the same figures from these metrics when no ``opencost_url`` is set.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from gpuaas.cluster._pod_series import PodSeries
from gpuaas.cluster.metrics_server import MetricsServer
from gpuaas.cluster.real._scenario import real_fleet_objects
from gpuaas.cluster.real._standin import BoundPod
from gpuaas.cluster.scenario import Instance, Scenario, instances
from gpuaas.cluster.telemetry import HeldGpu, Sample, TelemetryGenerator

__all__ = ["GpuExporter", "held_gpus"]


def held_gpus(pods: list[BoundPod], by_name: dict[tuple[str, str], Instance]) -> dict[tuple[str, int], HeldGpu]:
    """``(node, GPU index)`` -> the pod holding it, with the scenario instance of the pod's job."""
    return {(p.node, i): HeldGpu(p.namespace, p.name, p.container, by_name.get((p.namespace, p.owner_name)),
                                 p.started)
            for p in pods for i in p.indices}


class GpuExporter(MetricsServer):
    """A loopback ``/metrics`` over the pods ``bound()`` returns."""

    def __init__(self, scenario: Scenario, bound: Callable[[], list[BoundPod]], seed: int = 0) -> None:
        super().__init__(self.samples, name="gpu-exporter")
        self._generator = TelemetryGenerator(scenario, seed)
        provider_ids = {o["metadata"]["name"]: o["spec"]["providerID"]
                        for o in real_fleet_objects(scenario) if o["kind"] == "Node"}
        self._series = PodSeries(scenario, {(g.node, g.index): g.uuid for g in self._generator.gpus}, provider_ids)
        self._bound = bound
        self._by_name = {(inst.tenant.ns, inst.name): inst for inst in instances(scenario)}
        self._last: datetime | None = None

    def samples(self) -> list[Sample]:
        """Called under the server's lock: one scrape at a time advances the vLLM counters."""
        now = datetime.now(UTC)
        held = held_gpus(self._bound(), self._by_name)
        out = self._generator.gpu_samples(now, held)
        out.extend(self._series.serving(now, now - (self._last or now), held))
        out.extend(self._series.opencost(held, now.timestamp()))
        self._last = now
        return out
