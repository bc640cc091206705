"""A byte budget over the cache's model directories: their sizes, when each was last handed out, and
which are in use now (pinned), to evict the least recently used unpinned ones when the cache outgrows
the budget (the multi-model cache: issue 23, where it grew 15x the instances' disk budget).

Pure bookkeeping (ModelCache calls it under its guard and deletes what `victims` names)."""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path


def tree_bytes(path: Path) -> int:
    """Bytes of the files under `path` (not following links)."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


class CacheBudget:
    def __init__(self, budget_bytes: float) -> None:
        self.budget_bytes = budget_bytes
        self._sizes: dict[str, int] = {}
        self._used: dict[str, float] = {}
        self._pins: Counter[str] = Counter()

    @property
    def total_bytes(self) -> int:
        return sum(self._sizes.values())

    def add(self, digest: str, size: int, used: float | None = None) -> None:
        self._sizes[digest] = size
        self._used[digest] = time.monotonic() if used is None else used

    def touch(self, digest: str) -> None:
        if digest in self._sizes:
            self._used[digest] = time.monotonic()

    def pin(self, digest: str) -> None:
        self._pins[digest] += 1

    def unpin(self, digest: str) -> None:
        self._pins[digest] -= 1
        if self._pins[digest] <= 0:
            del self._pins[digest]

    def pinned(self, digest: str) -> bool:
        return self._pins[digest] > 0

    def remove(self, digest: str) -> None:
        self._sizes.pop(digest, None)
        self._used.pop(digest, None)

    def victims(self) -> list[str]:
        """Unpinned directories, least recently used first, whose removal brings the total within
        the budget (as far as unpinned ones can)."""
        excess = self.total_bytes - self.budget_bytes
        found: list[str] = []
        for digest in sorted(self._sizes, key=lambda d: self._used[d]):
            if excess <= 0:
                break
            if self.pinned(digest):
                continue
            found.append(digest)
            excess -= self._sizes[digest]
        return found
