"""GPU, serving and Kueue metrics for the embedded cluster, with real names and labels.

Sources of truth: which pod holds which GPU comes from the Kueue emulator
(``kueue.gpu_assignments()``); how busy a GPU is comes from the scenario's profile for the
workload owning the pod. Series and labels copy what real exporters emit:

* dcgm-exporter, per GPU: ``DCGM_FI_DEV_GPU_UTIL`` (0-100), ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``
  (0-1), ``DCGM_FI_DEV_FB_USED``/``_FB_FREE`` (MiB), ``DCGM_FI_DEV_POWER_USAGE`` (W),
  ``DCGM_FI_DEV_GPU_TEMP`` (C), ``DCGM_FI_DEV_XID_ERRORS`` (with ``err_code``/``err_msg``), labelled
  ``gpu, UUID, pci_bus_id, device, modelName, Hostname, DCGM_FI_DRIVER_VERSION`` and, for a GPU
  held by a pod, ``container, namespace, pod`` (or ``exported_*``, as a ServiceMonitor with
  ``honorLabels: false`` renames them). Free GPUs keep their series without pod labels.
* vLLM (``_telemetry_serving``), Kueue (``_telemetry_kueue``), OpenCost (``opencost``).

A workload with ``drop_telemetry`` has no GPU or vLLM series at all: gpuaas must read that
as "unknown", never as "idle". Jitter on each GPU sample is uniform, zero-mean and never
clipped (its half-width shrinks near 0 and 1), so a window's average equals the profile's.
The generator is deterministic: the jitter of a step comes from a RNG seeded with
``(seed, timestamp)`` and GPUs are visited in a fixed order.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import IO

from gpuaas.cluster._profiles import level
from gpuaas.cluster._scenario_objects import gpu_uuid, node_names, pci_bus_id
from gpuaas.cluster._telemetry_kueue import kueue_samples
from gpuaas.cluster._telemetry_serving import E2E_BUCKETS, ServingCounters
from gpuaas.cluster.scenario import Instance, NodePool, Scenario, WorkloadKind

__all__ = [
    "E2E_BUCKETS",
    "GpuDevice",
    "HeldGpu",
    "Sample",
    "ServingCounters",
    "TelemetryGenerator",
    "container_name",
    "format_exposition",
    "kueue_samples",
    "write_openmetrics",
]

Sample = tuple[str, dict[str, str], float, float]
"""``(metric, labels, value, unix_seconds)``, as ``prometheus.to_openmetrics`` takes them."""

_FB_RESERVED_MIB = 512
_MAX_POWER_W = {"H100": 700.0, "H200": 700.0, "B200": 1000.0, "A100": 400.0, "L40": 350.0, "L4": 72.0}


def container_name(kind: WorkloadKind | str, instance_name: str) -> str:
    """The GPU container's name in the pods each kind creates."""
    kind = WorkloadKind(kind)
    return {
        WorkloadKind.RAY_CLUSTER: "ray-worker",
        WorkloadKind.INFERENCE_SERVICE: "kserve-container",
        WorkloadKind.NOTEBOOK: instance_name,
    }.get(kind, "main")


@dataclass(frozen=True)
class GpuDevice:
    """One physical GPU and the labels dcgm-exporter always puts on its series."""

    node: str
    index: int
    uuid: str
    pool: NodePool
    labels: tuple[tuple[str, str], ...]

    @cached_property
    def max_power(self) -> float:
        return next((w for key, w in _MAX_POWER_W.items() if key in self.pool.gpu_model), 350.0)


@dataclass(frozen=True)
class HeldGpu:
    """A GPU held by a running pod, with the scenario instance that explains its load."""

    namespace: str
    pod: str
    container: str
    instance: Instance | None
    started: datetime


def _gpus(scenario: Scenario) -> list[GpuDevice]:
    opts = scenario.telemetry
    out = []
    for pool in scenario.pools:
        for node in node_names(pool):
            for i in range(pool.gpus_per_node):
                uuid = gpu_uuid(scenario.cluster, node, i)
                labels = (("gpu", str(i)), ("UUID", uuid), ("pci_bus_id", pci_bus_id(i)), ("device", f"nvidia{i}"),
                          ("modelName", pool.gpu_model), (opts.hostname_label, node),
                          ("DCGM_FI_DRIVER_VERSION", opts.driver_version))
                out.append(GpuDevice(node, i, uuid, pool, labels))
    return out


class TelemetryGenerator:
    """Per-step dcgm-exporter samples for a scenario's fleet."""

    def __init__(self, scenario: Scenario, seed: int) -> None:
        self.scenario = scenario
        self.seed = seed
        self.gpus = _gpus(scenario)
        self._prefix = scenario.telemetry.pod_label_prefix

    def utilisation(self, held: HeldGpu | None, at: datetime) -> float:
        """The profile level (0-1) for a GPU, before jitter; a free GPU is at 0."""
        if held is None or held.instance is None:
            return 0.0
        return min(1.0, level(held.instance.spec.utilisation, at, at - held.started))

    def gpu_samples(self, at: datetime, held: Mapping[tuple[str, int], HeldGpu]) -> list[Sample]:
        ts = at.timestamp()
        rng = random.Random(f"{self.seed}:{ts:.3f}")
        out: list[Sample] = []
        for gpu in self.gpus:
            holder = held.get((gpu.node, gpu.index))
            jitter = rng.uniform(-1.0, 1.0)  # drawn for every GPU so the stream does not depend on placement
            if holder is not None and holder.instance is not None and holder.instance.spec.drop_telemetry:
                continue
            labels = dict(gpu.labels)
            u = self.utilisation(holder, at)
            fb_used = 0
            if holder is not None:
                labels[f"{self._prefix}container"] = holder.container
                labels[f"{self._prefix}namespace"] = holder.namespace
                labels[f"{self._prefix}pod"] = holder.pod
                noise = holder.instance.spec.noise if holder.instance else 0.0
                u += jitter * min(noise, u, 1.0 - u)
                share = holder.instance.spec.fb_used_fraction if holder.instance else 0.5
                fb_used = int(gpu.pool.fb_total_mib * share)
            fb_free = gpu.pool.fb_total_mib - _FB_RESERVED_MIB - fb_used
            idle_w = 65.0 + (45.0 if fb_used else 0.0)
            # One labels dict shared by a GPU's series (samples are read, never edited): a copy per
            # series was a third of a 16,000-GPU step.
            out.append(("DCGM_FI_PROF_GR_ENGINE_ACTIVE", labels, round(u, 6), ts))
            out.append(("DCGM_FI_DEV_GPU_UTIL", labels, float(round(min(100.0, 100.0 * u * 1.1))), ts))
            out.append(("DCGM_FI_DEV_FB_USED", labels, float(fb_used), ts))
            out.append(("DCGM_FI_DEV_FB_FREE", labels, float(fb_free), ts))
            out.append(("DCGM_FI_DEV_POWER_USAGE", labels, round(idle_w + (gpu.max_power - idle_w) * u, 3), ts))
            out.append(("DCGM_FI_DEV_GPU_TEMP", labels, float(round(28 + 45 * u)), ts))
            out.append(("DCGM_FI_DEV_XID_ERRORS", {**labels, "err_code": "0", "err_msg": "No Error"}, 0.0, ts))
        return out


_SPECIAL_VALUES = {"nan": "NaN", "inf": "+Inf", "-inf": "-Inf"}


def _fmt_value(value: float) -> str:
    text = repr(float(value))
    return _SPECIAL_VALUES.get(text, text)


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _series(name: str, labels: Mapping[str, str]) -> str:
    label_text = ",".join(f'{k}="{_esc(v)}"' for k, v in sorted(labels.items()) if v != "")
    return f"{name}{{{label_text}}}"


def _line(name: str, labels: Mapping[str, str], value: float) -> str:
    return f"{_series(name, labels)} {_fmt_value(value)}"


def format_exposition(samples: Iterable[Sample]) -> str:
    """Prometheus text format (0.0.4) with explicit millisecond timestamps, for a scrape."""
    return "".join(f"{_line(n, lab, v)} {int(round(ts * 1000))}\n" for n, lab, v, ts in samples)


def write_openmetrics(steps: Iterable[Iterable[Sample]], path: Path) -> int:
    """Stream samples into an OpenMetrics file for ``promtool`` backfill; returns the sample count.

    OpenMetrics wants each metric's samples contiguous, so the stream is spilled into one
    temporary file per metric and concatenated: memory stays flat however long the history.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    parts: dict[str, tuple[Path, IO[str]]] = {}
    # A series' text (name and sorted, escaped labels) is the same at every step: formatted once.
    series: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}
    count = 0
    try:
        for step in steps:
            lines: dict[str, list[str]] = {}  # per metric, written in one call per step
            for name, labels, value, ts in step:
                key = (name, tuple(labels.items()))
                text = series.get(key)
                if text is None:
                    text = series[key] = _series(name, labels)
                rows = lines.get(name)
                if rows is None:
                    rows = lines[name] = []
                rows.append(f"{text} {_fmt_value(value)} {ts:.3f}\n")
            for name, rows in lines.items():
                entry = parts.get(name)
                if entry is None:
                    part = path.with_name(f"{path.name}.{len(parts)}.part")
                    entry = parts[name] = (part, part.open("w", encoding="utf-8"))
                entry[1].write("".join(rows))
                count += len(rows)
    finally:
        for _, handle in parts.values():
            handle.close()
    with path.open("w", encoding="utf-8") as out:
        for part, _ in parts.values():
            with part.open(encoding="utf-8") as src:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
            part.unlink()
        out.write("# EOF\n")
    return count


