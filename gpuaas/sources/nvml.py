"""NVML source: the GPUs of this host, sampled through ``nvidia-ml-py`` (module ``pynvml``).

For a single GPU host without dcgm-exporter. On a host without NVML (no driver, no GPU)
the answer is a ``SourceStatus`` saying so, not an exception: that is an expected state.
The ``pynvml`` module is a parameter so tests can pass a stand-in at the binding boundary.
"""

from __future__ import annotations

import socket
import time
from types import ModuleType
from typing import Any

from gpuaas.models import GpuSample, SourceStatus

__all__ = ["sample_nvml"]

SOURCE = "nvml"


def _optional(fn: Any, *args: Any) -> Any:
    """NVML answers ``NotSupported`` for fields a GPU lacks (utilisation on MIG): that is None, not failure."""
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - any NVMLError subclass means "not available for this GPU"
        return None


def _device(nvml: Any, index: int, host: str) -> GpuSample:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    util = _optional(nvml.nvmlDeviceGetUtilizationRates, handle)
    memory = _optional(nvml.nvmlDeviceGetMemoryInfo, handle)
    power_mw = _optional(nvml.nvmlDeviceGetPowerUsage, handle)
    temp = _optional(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU)
    procs = _optional(nvml.nvmlDeviceGetComputeRunningProcesses, handle) or []
    return GpuSample(
        index=index,
        uuid=str(nvml.nvmlDeviceGetUUID(handle)),
        model=str(nvml.nvmlDeviceGetName(handle)),
        utilization_percent=None if util is None else float(util.gpu),
        memory_used_bytes=None if memory is None else float(memory.used),
        memory_total_bytes=None if memory is None else float(memory.total),
        power_watts=None if power_mw is None else power_mw / 1000.0,
        temperature_c=None if temp is None else float(temp),
        process_pids=tuple(int(p.pid) for p in procs),
        host=host,
    )


def sample_nvml(nvml: ModuleType | Any | None = None) -> tuple[tuple[GpuSample, ...], SourceStatus]:
    """Sample every local GPU once; ``SourceStatus(ok=False, error="NVML not available: ...")`` without NVML."""
    started = time.monotonic()
    if nvml is None:
        try:
            import pynvml  # noqa: PLC0415 - optional at runtime, imported only when sampled
        except ImportError as exc:
            return (), SourceStatus(SOURCE, ok=False, error=f"NVML not available: {exc}")
        nvml = pynvml
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return (), SourceStatus(SOURCE, ok=False, latency_s=time.monotonic() - started,
                                error=f"NVML not available: {exc}")
    host = socket.gethostname()
    try:
        samples = tuple(_device(nvml, i, host) for i in range(int(nvml.nvmlDeviceGetCount())))
    except nvml.NVMLError as exc:
        return (), SourceStatus(SOURCE, ok=False, latency_s=time.monotonic() - started, error=f"NVML error: {exc}")
    finally:
        _optional(nvml.nvmlShutdown)
    return samples, SourceStatus(SOURCE, ok=True, latency_s=time.monotonic() - started, staleness_s=0.0)
