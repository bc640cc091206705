"""CPU, memory and disk use of containers, for the Docker adapter (runtime/docker.py, which delegates
here): the engine's one-shot stats, CPU computed as `docker stats` does, from two samples; the size of
each writable layer from one list call (`docker ps --size`); GPU access from the container's device
requests (inspected once per container).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import docker.errors
import requests.exceptions

from emulator.errors import EngineError
from emulator.runtime.base import ContainerStats, DiskUsage


class DockerStats:
    """stats() of DockerRuntime: remembers each container's previous sample, the base of its CPU share."""

    def __init__(self, client: Callable[[], Any]) -> None:
        self._client = client
        self._lock = threading.Lock()
        #: container id -> (container CPU ns, system CPU ns) of its previous stats sample.
        self._cpu_seen: dict[str, tuple[int, int]] = {}
        #: container id -> whether it has GPUs (fixed when it is created).
        self._gpus: dict[str, bool] = {}

    @property
    def client(self) -> Any:
        return self._client()

    def stats(self, container_id: str) -> ContainerStats | None:
        """The engine's one-shot stats (no 1 s wait for a second sample): CPU from the difference to
        this adapter's previous sample of the same container, as `docker stats` computes it."""
        try:
            raw = self.client.api.stats(container_id, stream=False, one_shot=True)
        except docker.errors.NotFound:
            with self._lock:
                self._cpu_seen.pop(container_id, None)
            return None
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise EngineError(f"Docker engine error: {exc}") from exc
        return self._stats_of(container_id, raw)

    def _stats_of(self, container_id: str, raw: Mapping[str, Any]) -> ContainerStats | None:
        cpu_stats = raw.get("cpu_stats") or {}
        system = cpu_stats.get("system_cpu_usage")
        usage = (cpu_stats.get("cpu_usage") or {}).get("total_usage")
        if system is None or usage is None:
            return None  # not running
        cores = (
            cpu_stats.get("online_cpus")
            or len((cpu_stats.get("cpu_usage") or {}).get("percpu_usage") or [])
            or 1
        )
        pre = raw.get("precpu_stats") or {}
        previous: tuple[int, int] | None = None
        if pre.get("system_cpu_usage"):
            previous = ((pre.get("cpu_usage") or {}).get("total_usage", 0), pre["system_cpu_usage"])
        with self._lock:
            previous = previous or self._cpu_seen.get(container_id)
            self._cpu_seen[container_id] = (usage, system)
        cpu: float | None = None
        if previous is not None and system > previous[1]:
            cpu = max(usage - previous[0], 0) / (system - previous[1]) * cores * 100.0
        mem = raw.get("memory_stats") or {}
        memory: float | None = None
        if mem.get("limit"):
            details = mem.get("stats") or {}
            cache = details.get("inactive_file", details.get("total_inactive_file", details.get("cache", 0)))
            memory = max(mem.get("usage", 0) - cache, 0) / mem["limit"] * 100.0
        return ContainerStats(cpu_percent=cpu, memory_percent=memory)

    def disk_usage(self, labels: Mapping[str, str]) -> dict[str, DiskUsage]:
        """One list call with sizes (GET /containers/json?size=1): the engine computes each running
        container's SizeRw by walking its writable layer, so the cost grows with the files written
        (docs/metrics.md has the figures)."""
        filters = {"label": [f"{k}={v}" for k, v in labels.items()], "status": "running"}
        try:
            rows = self.client.api.containers(filters=filters, size=True)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise EngineError(f"Docker engine error: {exc}") from exc
        out: dict[str, DiskUsage] = {}
        for row in rows:
            sources = tuple(
                str(m["Source"])
                for m in row.get("Mounts") or ()
                if m.get("Type") == "bind" and not m.get("RW", True) and m.get("Source")
            )
            out[row["Id"]] = DiskUsage(int(row.get("SizeRw") or 0), sources)
        return out

    def gpu_access(self, container_id: str) -> bool:
        with self._lock:
            known = self._gpus.get(container_id)
        if known is not None:
            return known
        try:
            attrs = self.client.api.inspect_container(container_id)
        except docker.errors.NotFound:
            return False
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise EngineError(f"Docker engine error: {exc}") from exc
        requests_ = (attrs.get("HostConfig") or {}).get("DeviceRequests") or ()
        found = any("gpu" in {c for caps in (r.get("Capabilities") or ()) for c in caps} for r in requests_)
        with self._lock:
            if len(self._gpus) > 4096:  # containers come and go: forget the oldest answers
                self._gpus.clear()
            self._gpus[container_id] = found
        return found
