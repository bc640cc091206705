"""DiskUtilization of an instance (docs/metrics.md): what its containers keep on disk (each writable
layer, /tmp included, plus the model data mounted at /opt/ml/model, which SageMaker keeps on the same
volume) over its instance type's volume (config.instance_volume_bytes)."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterable

from emulator.runtime.base import DiskUsage


def tree_bytes(root: str) -> int:
    """Bytes of the regular files under `root` (links not followed; unreadable entries skipped)."""
    total = 0
    for folder, _dirs, files in os.walk(root, followlinks=False):
        for name in files:
            try:
                st = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total


class ModelDataSizes:
    """The size of each model data folder, measured once (a mounted model folder is read-only to its
    containers; smlocal never changes one in place). Blocking: call in a thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sizes: dict[str, int] = {}

    def size(self, root: str) -> int:
        with self._lock:
            known = self._sizes.get(root)
        if known is None:
            known = tree_bytes(root) if os.path.isdir(root) else 0
            with self._lock:
                self._sizes[root] = known
        return known

    def in_use(self, usages: Iterable[DiskUsage]) -> int:
        """Bytes an instance of these containers keeps on disk."""
        return sum(u.written_bytes + sum(self.size(s) for s in u.read_only_sources) for u in usages)


def utilization(in_use_bytes: int, volume_bytes: float) -> float:
    """DiskUtilization, percent (may pass 100 where a table volume is smaller than what was written)."""
    return in_use_bytes / volume_bytes * 100.0 if volume_bytes > 0 else 0.0
