"""The models of multi-model instances (spec §5): a TargetModel is downloaded to its instance's disk,
safely extracted (the model data layer's limits), loaded with the container's `POST /models`, and
invoked with `POST /models/{name}/invoke`; loaded models stay while the instance's memory budget holds
them and are unloaded least recently used first when it does not, or when the container answers 507.

Choices where SageMaker's behaviour is not documented [U], in one place (docs/multi-model.md):

- a model's memory is estimated as its extracted size; the budget is the instance type's memory
  (the instance type table's: fleet/instance_limits.py), the disk budget its volume
  (VolumeSizeInGB or the type's);
- after a 507, smlocal unloads the least recently used idle model and tries the load again; with
  none idle, it waits for one (or another load's end) up to the load window (container.py);
- a load answered 409 (already loaded: after a restart of smlocal the container may still have it)
  counts as loaded;
- the artifact is fetched through the multi-model store's content-addressed cache (a host budget,
  least recently used evicted) and linked into the instance's folder (hard links: one copy of the
  bytes on the host, one folder per instance, as each SageMaker instance has its own; folders.py);
- a stop cancels the instance's loads and waits for their threads before its folder goes; a call
  that waited tries another instance once.

Concurrent first requests for one model on one instance share one download and one load (the task on
its CachedModel). A request waits `ServerConfig.model_load_window_s` for it; past that it answers 429
ModelNotReadyException and the task goes on (up to MODEL_LOAD_LIMIT_S), so a retry finds the model.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import shutil
import time
import weakref
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import aiohttp

from emulator.config import MODEL_LOAD_LIMIT_S, ServerConfig, instance_volume_bytes
from emulator.errors import (
    ModelDataError,
    ModelDataNotFound,
    ModelNotReady,
    ValidationFailed,
)
from emulator.hosting.executors import Executors
from emulator.hosting.fleet.instance_limits import instance_memory_bytes
from emulator.hosting.fleet.invoker import FaultContext
from emulator.hosting.fleet.plan import VariantPlan
from emulator.hosting.fleet.variants import Instance
from emulator.hosting.multi_model.cache import CachedModel, InstanceModels
from emulator.hosting.multi_model.container import ContainerModels
from emulator.hosting.multi_model.folders import complete, link_tree
from emulator.model import messages
from emulator.model.resources import ModelDataSource
from emulator.model_data.port import ModelDataStore

log = logging.getLogger(__name__)
T = TypeVar("T")

#: The header that tells the container the TargetModel of an invocation (for its logs; spec §5).
TARGET_MODEL_HEADER = "X-Amzn-SageMaker-Target-Model"
#: In-flight requests from which an instance that has the model counts as busy (choose) [U].
BUSY_OUTSTANDING = 4
#: Why a call whose instance stopped while its model loaded (and had no other to go to) failed [U]
STOPPED_WHILE_LOADING = "its instance was stopped while the model was being loaded"


class InstanceStopped(Exception):
    """The instance stopped (was retired or deleted) while the call waited for its model's load:
    the call may go to another instance of the variant."""


class MultiModelHost:
    def __init__(
        self,
        config: ServerConfig,
        artifacts: ModelDataStore,
        executors: Executors,
        session: Callable[[], aiohttp.ClientSession],
    ) -> None:
        """`session`: returns the aiohttp session calls into containers use (the Invoker's)."""
        self._config = config
        self._artifacts = artifacts
        self._executors = executors
        self._instances: weakref.WeakKeyDictionary[Instance, InstanceModels] = weakref.WeakKeyDictionary()
        self._background: set[asyncio.Task[None]] = set()
        #: Where the multi-model metrics go: (endpoint, variant, metric, value; times in seconds).
        #: Set by app.py to the metric store's `record_model_metric`; None: not recorded.
        self.record: Callable[[str, str, str, float], None] | None = None
        self._api = ContainerModels(config.model_load_window_s, session, self._metric)

    def _metric(self, models: InstanceModels, name: str, value: float) -> None:
        if self.record is not None:
            self.record(models.endpoint, models.variant, name, value)

    def loaded_counts(self) -> list[tuple[str, str, int]]:
        """(endpoint, variant, models loaded) of every multi-model instance (LoadedModelCount)."""
        return [(m.endpoint, m.variant, m.loaded_count()) for m in list(self._instances.values())]

    def tracked_models(self) -> int:
        """How many models the instances keep an entry for (a test's view of the bound)."""
        return sum(len(m.models) for m in list(self._instances.values()))

    def models_of(self, plan: VariantPlan, instance: Instance) -> InstanceModels:
        found = self._instances.get(instance)
        if found is None:
            assert instance.models_dir is not None, "not a multi-model instance"
            variant = plan.variant
            found = self._instances[instance] = InstanceModels(
                plan.endpoint_name,
                variant.variant_name,
                instance.models_dir,
                instance_memory_bytes(self._config, variant.instance_type),
                instance_volume_bytes(self._config, variant.instance_type, variant.volume_size_gb),
            )
            instance.on_stop.append(functools.partial(self._stop_loads, found))
        return found

    def choose(self, instances: list[Instance], target: str) -> Instance | None:
        """An instance that has the model loaded (the least busy of them), else None (the variant's
        pick). When even that one has BUSY_OUTSTANDING requests in flight and another instance has
        fewer, the other: a hot model gets loaded on more instances, as SageMaker's are [U]."""
        warm = [
            i
            for i in instances
            if (models := self._instances.get(i)) is not None
            and (m := models.models.get(target)) is not None
            and m.loaded
            and m.task is None
        ]
        if not warm:
            return None
        best = min(warm, key=lambda i: i.outstanding)
        if best.outstanding < BUSY_OUTSTANDING:
            return best
        idle = min(instances, key=lambda i: i.outstanding)
        return idle if idle.outstanding < best.outstanding else best

    async def ready(
        self, plan: VariantPlan, instance: Instance, target: str, context: FaultContext
    ) -> CachedModel:
        """The model, loaded in the instance's container, held for one invocation (`release` it)."""
        models = self.models_of(plan, instance)
        if models.stopped:
            raise InstanceStopped(instance.instance_id)
        model = models.get(target)
        model.in_use += 1
        if model.loaded and model.task is None:
            model.last_used = time.monotonic()
            self._metric(models, "ModelCacheHit", 1.0)
            return model
        self._metric(models, "ModelCacheHit", 0.0)
        waiting = time.perf_counter()
        if model.task is None:
            model.task = asyncio.get_running_loop().create_task(
                self._fetch_and_load(plan, instance, models, model, context), name=f"load {target}"
            )
            model.task.add_done_callback(lambda task: _settled(models, model, task))
            self._background.add(model.task)  # cancelled by close(), like the discards
            model.task.add_done_callback(self._background.discard)
        try:
            await asyncio.wait_for(asyncio.shield(model.task), self._config.model_load_window_s)
        except TimeoutError:
            model.in_use -= 1
            self._metric(models, "ModelLoadingWaitTime", time.perf_counter() - waiting)
            raise ModelNotReady(messages.model_not_ready(target)) from None
        except asyncio.CancelledError:
            model.in_use -= 1
            models.forget_if_idle(model)
            if models.stopped and not _cancelling():  # its load, not this call, was cancelled
                raise InstanceStopped(instance.instance_id) from None
            raise
        except BaseException:
            model.in_use -= 1
            models.forget_if_idle(model)  # a failed load: no entry stays for it
            raise
        self._metric(models, "ModelLoadingWaitTime", time.perf_counter() - waiting)
        model.last_used = time.monotonic()
        return model

    def release(self, plan: VariantPlan, instance: Instance, model: CachedModel) -> None:
        model.in_use -= 1
        model.last_used = time.monotonic()
        if not model.in_use and (models := self._instances.get(instance)) is not None:
            models.changed()  # idle now: a load waiting for room may unload it
        if (
            plan.model.primary_container.model_cache_setting == "Disabled"
            and not model.in_use
            and model.task is None
            and model.discarding is None
        ):
            model.loaded = model.on_disk = False  # from now on a call loads it again
            models = self.models_of(plan, instance)
            model.discarding = task = asyncio.get_running_loop().create_task(
                self._discard(instance, models, model)
            )
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _stop_loads(self, models: InstanceModels) -> None:
        """The instance stops: no load starts there any more, the running ones are cancelled, and
        their blocking work (a download, a link into the folder) stops at its next chunk or file and
        is waited for, so that nothing writes into the instance's folder once it is removed."""
        models.stopped = True
        models.cancel.set()
        tasks = [t for m in models.models.values() for t in (m.task, m.discarding) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, *list(models.threads), return_exceptions=True)

    async def _blocking(self, models: InstanceModels, work: Awaitable[T]) -> T:
        """`work` (a thread pool call), tracked so that a stop can wait for it to end."""
        future = asyncio.ensure_future(work)
        models.threads.add(future)
        future.add_done_callback(models.threads.discard)
        return await asyncio.shield(future)

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)

    # ------------------------------------------------------------------ the work of one model

    async def _fetch_and_load(
        self,
        plan: VariantPlan,
        instance: Instance,
        models: InstanceModels,
        model: CachedModel,
        context: FaultContext,
    ) -> None:
        async with asyncio.timeout(MODEL_LOAD_LIMIT_S):
            if model.discarding is not None:  # the previous call's unload-and-delete first
                await asyncio.shield(model.discarding)
            if not model.on_disk:
                await self._download(plan, models, model)
            await self._api.make_room(instance, models, model)
            await self._api.load(instance, models, model, context)

    def _source(self, plan: VariantPlan, target: str) -> tuple[ModelDataSource, str, str]:
        """The artifact's source, and the (bucket or folder, key) a not-found message names."""
        data = plan.model.primary_container.model_data
        prefix = data.uri if data is not None else ""
        if prefix.startswith("s3://"):
            bucket, _, key_prefix = prefix.removeprefix("s3://").partition("/")
            if key_prefix and not key_prefix.endswith("/"):
                key_prefix += "/"
            return ModelDataSource(f"s3://{bucket}/{key_prefix}{target}"), bucket, key_prefix + target
        folder = prefix.removeprefix("file://")
        return ModelDataSource(str(Path(folder) / target)), folder, target

    async def _download(self, plan: VariantPlan, models: InstanceModels, model: CachedModel) -> None:
        present: int | None = await self._executors.engine(complete, model.folder)
        if present is not None:
            model.size = present
            model.on_disk = True  # already here (a restart of smlocal): as good as downloaded
            return
        source, where, key = self._source(plan, model.target)
        started = time.perf_counter()
        try:
            await self._executors.model_data(self._artifacts.check_exists, source)
            # linked into the instance's folder while the cache keeps the directory (pinned)
            link = functools.partial(link_tree, folder=model.folder, cancel=models.cancel)
            model.size = await self._blocking(
                models,
                self._executors.model_data(self._artifacts.materialize_into, source, link, models.cancel),
            )
        except ModelDataNotFound:
            raise ValidationFailed(messages.target_model_not_found(where, key)) from None
        except ModelDataError as exc:
            raise ValidationFailed(exc.message) from None
        model.on_disk = True
        self._metric(models, "ModelDownloadingTime", time.perf_counter() - started)
        for victim in models.delete_candidates(model):
            if models.disk_bytes(but=model) + model.size <= models.disk_budget:
                break
            await self._executors.engine(shutil.rmtree, victim.folder, True)
            victim.on_disk = False
            models.forget_if_idle(victim)

    async def _discard(self, instance: Instance, models: InstanceModels, model: CachedModel) -> None:
        """ModelCacheSetting Disabled: unload after the invocation and delete from disk (a load that
        starts meanwhile waits for this first)."""
        try:
            await self._api.unload(instance, models, model)
            await self._executors.engine(shutil.rmtree, model.folder, True)
        finally:
            model.discarding = None
            models.forget_if_idle(model)


def _cancelling() -> bool:
    """Whether the running task itself is being cancelled (not only what it awaited)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _settled(models: InstanceModels, model: CachedModel, task: asyncio.Task[None]) -> None:
    model.task = None
    models.changed()  # a load ended: the loads waiting for room look again
    models.forget_if_idle(model)  # failed, and every call that waited for it has gone
    if not task.cancelled() and task.exception() is not None:
        log.info("loading %s failed: %s", model.target, task.exception())
