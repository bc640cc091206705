"""The host's GPUs as SageMaker's GPUUtilization and GPUMemoryUtilization see them (§10.2): each
device's utilization and memory in use, read through NVML (`pynvml`, from the nvidia-ml-py package)
where it is installed, else through `nvidia-smi`; neither, or no device: no reader at all, and the
metrics have no datapoints (docs/metrics.md).

The readers are blocking (NVML calls, a subprocess): call them in a thread, off the request path.
"""

from __future__ import annotations

import importlib
import logging
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

NVIDIA_SMI_QUERY = ("--query-gpu=utilization.gpu,memory.used,memory.total", "--format=csv,noheader,nounits")
NVIDIA_SMI_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class GpuDevice:
    """One GPU: its utilization (percent of the last sample window) and memory (MiB as nvidia-smi
    reports it; bytes from NVML: only the ratio matters). None where the device does not report it."""

    utilization_percent: float | None
    memory_used: float | None
    memory_total: float | None

    @property
    def memory_percent(self) -> float | None:
        if self.memory_used is None or not self.memory_total:
            return None
        return self.memory_used / self.memory_total * 100.0


GpuReader = Callable[[], list[GpuDevice]]


def parse_nvidia_smi(text: str) -> list[GpuDevice]:
    """`nvidia-smi --query-gpu=utilization.gpu,memory.used,memory.total --format=csv,noheader,nounits`:
    one line per device; "[N/A]" or "[Not Supported]" fields become None."""
    devices: list[GpuDevice] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 3:
            raise ValueError(f"unexpected nvidia-smi line: {line!r}")
        util, used, total = (_number(f) for f in fields)
        devices.append(GpuDevice(util, used, total))
    return devices


def _number(field: str) -> float | None:
    try:
        return float(field)
    except ValueError:
        return None  # [N/A], [Not Supported]


class NvidiaSmiReader:
    """Reads the devices with one `nvidia-smi` process per call (~tens of ms)."""

    def __init__(self, executable: str) -> None:
        self.executable = executable

    def __call__(self) -> list[GpuDevice]:
        done = subprocess.run(
            [self.executable, *NVIDIA_SMI_QUERY],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT_S,
            check=True,
        )
        return parse_nvidia_smi(done.stdout)


class NvmlReader:
    """Reads the devices through NVML (no process per call); `nvml` is the pynvml module."""

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml
        nvml.nvmlInit()

    def __call__(self) -> list[GpuDevice]:
        nvml = self._nvml
        devices: list[GpuDevice] = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            util: float | None
            try:
                util = float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
            except nvml.NVMLError:
                util = None
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            devices.append(GpuDevice(util, float(memory.used), float(memory.total)))
        return devices


def find_reader() -> GpuReader | None:
    """NVML if pynvml imports and initialises, else nvidia-smi if it is on PATH and lists a device;
    None when neither reads a GPU (this host has none, or no driver)."""
    try:
        nvml = importlib.import_module("pynvml")
        reader: GpuReader = NvmlReader(nvml)
        if reader():
            return reader
    except Exception as exc:  # noqa: BLE001 - not installed, no driver, no device: try the next
        log.debug("no GPUs through NVML: %s", exc)
    executable = shutil.which("nvidia-smi")
    if executable is not None:
        try:
            reader = NvidiaSmiReader(executable)
            if reader():
                return reader
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            log.debug("no GPUs through nvidia-smi: %s", exc)
    return None


def totals(devices: list[GpuDevice]) -> tuple[float | None, float | None]:
    """GPUUtilization and GPUMemoryUtilization of an instance with these GPUs: each summed over
    the devices (0-100 x GPUs, as SageMaker reports them); None where no device reports it."""
    utils = [d.utilization_percent for d in devices if d.utilization_percent is not None]
    mems = [m for d in devices if (m := d.memory_percent) is not None]
    return (sum(utils) if utils else None, sum(mems) if mems else None)
