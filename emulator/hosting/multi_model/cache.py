"""One multi-model instance's models: which are on its disk, which its container has loaded, in what
order they were used (pure state; host.py drives the downloads and the container's model API).

A model is named for the container by an opaque id (SageMaker's `model_name` is not the TargetModel
string): a digest of the TargetModel, so that the same artifact gets the same name after a restart of
smlocal (the container may still have it loaded: its 409 then means loaded)."""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yarl import URL

from emulator.model_data.sources import Cancellation


def model_name(target: str) -> str:
    """The opaque name a TargetModel is loaded under."""
    return hashlib.sha256(target.encode()).hexdigest()[:20]


@dataclass(eq=False)
class CachedModel:
    target: str
    name: str
    #: the host folder that holds its `model` folder (mounted at /opt/ml/models/{name})
    folder: Path
    #: bytes of the extracted model: what it takes on disk, and smlocal's estimate of its memory [U]
    size: int = 0
    on_disk: bool = False
    loaded: bool = False
    last_used: float = 0.0
    #: invocations using it now (never evicted meanwhile)
    in_use: int = 0
    #: the download-and-load under way (one per model and instance, whoever asked first)
    task: asyncio.Task[None] | None = None
    #: ModelCacheSetting Disabled: the unload-and-delete under way (a new load waits for it)
    discarding: asyncio.Task[None] | None = None
    #: the container's invoke URL for it (built once: yarl's parsing costs per request otherwise)
    invoke_url: URL | None = None
    #: room was made for it and its load is under way (counted as loaded by the memory budget)
    loading: bool = False
    #: its container unload (DELETE) is under way: a new load of it waits for that to end, or the
    #: container may take the load first (409: "already loaded") and the unload after it
    unloading: bool = False
    #: its load waits for room (for another model to become idle)
    waiting: bool = False


@dataclass(eq=False)
class InstanceModels:
    """The models of one instance, within its memory and disk budgets (bytes)."""

    endpoint: str
    variant: str
    root: Path
    memory_budget: float
    disk_budget: float
    models: dict[str, CachedModel] = field(default_factory=dict)
    #: how many models were unloaded to make room (507 from the container or the memory budget)
    evictions: int = 0
    #: the instance stopped: no new load starts, the running ones were cancelled
    stopped: bool = False
    #: set when the instance stops: its downloads and links stop at their next chunk or file
    cancel: Cancellation = field(default_factory=Cancellation, repr=False)
    #: blocking work of its loads running in threads (a stop waits for them before the folder goes)
    threads: set[asyncio.Future[Any]] = field(default_factory=set, repr=False)
    #: set (and replaced) whenever room may have been freed: see `changed`
    _change: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    #: loads waiting in `wait_change` (none: `changed` costs nothing on the hot path)
    _waiters: int = 0

    def changed(self) -> None:
        """Wake the loads waiting for room: a model became idle, or a load or an unload ended."""
        if self._waiters:
            self._change.set()
            self._change = asyncio.Event()

    async def wait_change(self) -> None:
        """Until the next `changed` (the caller bounds the wait)."""
        self._waiters += 1
        try:
            await self._change.wait()
        finally:
            self._waiters -= 1

    def room_may_free(self, keep: CachedModel) -> bool:
        """Whether waiting can help a load that found no idle model to unload: another model is
        loaded but in use (it will become idle), or another load or unload is under way."""
        return any(
            m is not keep
            and (
                (m.loaded and m.in_use)
                or m.loading
                or (m.task is not None and not m.waiting)
                or m.discarding is not None
            )
            for m in self.models.values()
        )

    def get(self, target: str) -> CachedModel:
        found = self.models.get(target)
        if found is None:
            name = model_name(target)
            found = self.models[target] = CachedModel(target, name, self.root / name)
        return found

    def forget_if_idle(self, model: CachedModel) -> None:
        """Drop the entry of a model with nothing behind it: not loaded, not on disk, no call using
        it, no work under way (a failed load, a TargetModel that is not there: an entry per name
        ever asked for grew without end). Entries on disk stay: the disk budget counts them."""
        idle = not (
            model.loaded
            or model.on_disk
            or model.in_use
            or model.loading
            or model.task is not None
            or model.discarding is not None
            or model.unloading
        )
        if idle and self.models.get(model.target) is model:
            del self.models[model.target]

    def loaded_bytes(self, but: CachedModel | None = None) -> int:
        """Bytes of the models loaded or being loaded (room already made for them)."""
        return sum(m.size for m in self.models.values() if (m.loaded or m.loading) and m is not but)

    def disk_bytes(self, but: CachedModel | None = None) -> int:
        return sum(m.size for m in self.models.values() if m.on_disk and m is not but)

    def loaded_count(self) -> int:
        return sum(1 for m in self.models.values() if m.loaded)

    def unload_candidates(self, keep: CachedModel) -> list[CachedModel]:
        """Loaded models no invocation uses, least recently used first."""
        found = [m for m in self.models.values() if m.loaded and not m.in_use and m is not keep]
        return sorted(found, key=lambda m: m.last_used)

    def delete_candidates(self, keep: CachedModel) -> list[CachedModel]:
        """Models on disk that are not loaded and not being loaded, least recently used first."""
        found = [
            m
            for m in self.models.values()
            if m.on_disk and not m.loaded and m.task is None and not m.in_use and m is not keep
        ]
        return sorted(found, key=lambda m: m.last_used)
