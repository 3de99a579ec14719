"""NVML: the real binding on whatever host runs the tests, and a stand-in module for a host with GPUs.

The stand-in is injected at the binding boundary (``sample_nvml(nvml=...)``) so that the
conversions are checked on a host without a GPU too; it mimics ``pynvml``'s call names and units
(power in milliwatts, memory in bytes) as documented for nvidia-ml-py.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpuaas.sources.nvml import sample_nvml


def _gpus_nvml_reports() -> int | None:
    """What this host's NVML says directly: its GPU count, or None where it cannot start (no driver)."""
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    try:
        return int(pynvml.nvmlDeviceGetCount())
    finally:
        pynvml.nvmlShutdown()


def test_real_binding_reports_what_this_host_has() -> None:
    """Holds on a GPU-less CI host and on a host with a driver: the source agrees with NVML itself."""
    samples, status = sample_nvml()
    expected = _gpus_nvml_reports()
    assert status.name == "nvml"
    if expected is None:
        assert samples == () and not status.ok
        assert status.error is not None and status.error.startswith("NVML not available: ")
        return
    assert status.ok and status.error is None and status.staleness_s == 0.0
    assert len(samples) == expected
    assert [s.index for s in samples] == list(range(expected))
    for gpu in samples:
        assert gpu.uuid.startswith(("GPU-", "MIG-")) and gpu.model
        assert gpu.memory_total_bytes is None or gpu.memory_total_bytes > 0
        assert gpu.utilization_percent is None or 0 <= gpu.utilization_percent <= 100


class _NVMLError(Exception):
    pass


def _fake_nvml(fail_init: bool = False) -> SimpleNamespace:
    def init() -> None:
        if fail_init:
            raise _NVMLError("Driver Not Loaded")

    def util(handle: int) -> SimpleNamespace:
        if handle == 1:
            raise _NVMLError("Not Supported")  # e.g. a MIG-enabled GPU
        return SimpleNamespace(gpu=37, memory=10)

    return SimpleNamespace(
        NVMLError=_NVMLError, NVML_TEMPERATURE_GPU=0,
        nvmlInit=init, nvmlShutdown=lambda: None, nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda i: i, nvmlDeviceGetUUID=lambda h: f"GPU-{h}",
        nvmlDeviceGetName=lambda h: "NVIDIA L4", nvmlDeviceGetUtilizationRates=util,
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(used=2 * 2**30, total=24 * 2**30, free=22 * 2**30),
        nvmlDeviceGetPowerUsage=lambda h: 16365, nvmlDeviceGetTemperature=lambda h, s: 31,
        nvmlDeviceGetComputeRunningProcesses=lambda h: [SimpleNamespace(pid=4242, usedGpuMemory=None)],
    )


def test_samples_every_gpu_with_units_converted() -> None:
    samples, status = sample_nvml(_fake_nvml())
    assert status.ok and len(samples) == 2
    first, second = samples
    assert (first.uuid, first.model, first.utilization_percent) == ("GPU-0", "NVIDIA L4", 37.0)
    assert first.power_watts == pytest.approx(16.365) and first.temperature_c == 31
    assert first.memory_used_bytes == 2 * 2**30 and first.process_pids == (4242,)
    assert second.utilization_percent is None  # unsupported field is missing, not zero


def test_init_failure_is_reported() -> None:
    samples, status = sample_nvml(_fake_nvml(fail_init=True))
    assert samples == () and status.error == "NVML not available: Driver Not Loaded"
