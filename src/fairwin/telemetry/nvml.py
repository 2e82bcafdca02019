"""GPU samples through NVML (nvidia-ml-py), where fairwin runs on the GPU host.

Power is read in milliwatts and reported in watts, as nvidia-smi does. A value the
device does not support is None, never a guess.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import pynvml

from fairwin.telemetry.gpu import ComputeProcess, GpuSample

T = TypeVar("T")


def nvml_available() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    return True


def _read(call: Callable[..., T], *args: Any) -> T | None:
    """``call(*args)``, or None where the device does not support it."""
    try:
        return call(*args)
    except pynvml.NVMLError:
        return None


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


class Nvml:
    name = "nvml"

    def __init__(self) -> None:
        pynvml.nvmlInit()
        self.count = pynvml.nvmlDeviceGetCount()

    def _reasons(self, handle: Any) -> int | None:
        getter = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)  # R535+; else the old name
        reasons = _read(getter or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons, handle)
        return int(reasons) if reasons is not None else None

    def sample(self) -> list[GpuSample]:
        samples = []
        when = time.time()
        for index in range(self.count):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            power = _read(pynvml.nvmlDeviceGetPowerUsage, handle)
            limit = _read(pynvml.nvmlDeviceGetEnforcedPowerLimit, handle)
            samples.append(
                GpuSample(
                    time=when,
                    gpu=index,
                    uuid=_text(pynvml.nvmlDeviceGetUUID(handle)),
                    name=_text(pynvml.nvmlDeviceGetName(handle)),
                    sm_mhz=_read(pynvml.nvmlDeviceGetClockInfo, handle, pynvml.NVML_CLOCK_SM),
                    max_sm_mhz=_read(pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_SM),
                    applications_mhz=_read(pynvml.nvmlDeviceGetApplicationsClock, handle, pynvml.NVML_CLOCK_GRAPHICS),
                    reasons=self._reasons(handle),
                    temperature_c=_read(pynvml.nvmlDeviceGetTemperature, handle, pynvml.NVML_TEMPERATURE_GPU),
                    power_w=power / 1000.0 if power is not None else None,
                    power_limit_w=limit / 1000.0 if limit is not None else None,
                )
            )
        return samples

    def compute_processes(self) -> list[ComputeProcess]:
        found = []
        for index in range(self.count):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            uuid = _text(pynvml.nvmlDeviceGetUUID(handle))
            for process in _read(pynvml.nvmlDeviceGetComputeRunningProcesses, handle) or []:
                used = getattr(process, "usedGpuMemory", None)
                mib = used / 2**20 if isinstance(used, int) else None
                found.append(ComputeProcess(gpu_uuid=uuid, pid=int(process.pid), used_mib=mib))
        return found
