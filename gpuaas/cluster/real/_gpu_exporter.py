"""dcgm-exporter series for the stand-in's pods, scraped by the real backend's Prometheus.

No GPU exists on the real backend, so the series come from the embedded backend's generator
(``gpuaas.cluster.telemetry.TelemetryGenerator``): one series set per GPU of the scenario's nodes,
with the same names and labels; a GPU a Running pod holds (by the stand-in's ``gpu-indices``
annotation) carries that pod's ``namespace``/``pod``/``container`` and the load of the scenario
workload the pod belongs to. Samples are computed at each scrape, stamped with the wall clock.
Only DCGM series: no vLLM or OpenCost series are written on this backend.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from gpuaas.cluster.metrics_server import MetricsServer
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
        self._bound = bound
        self._by_name = {(inst.tenant.ns, inst.name): inst for inst in instances(scenario)}

    def samples(self) -> list[Sample]:
        return self._generator.gpu_samples(datetime.now(UTC), held_gpus(self._bound(), self._by_name))
