"""Starting and stopping the containers of a variant, exactly as SageMaker does.

`docker run IMAGE serve` with the model's Environment, /opt/ml/model read-only, port 8080 published
on 127.0.0.1; healthy on the first HTTP 200 from GET /ping; stopped with SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
import shutil
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import aiohttp

from emulator.config import ServerConfig
from emulator.errors import EngineError, first_error
from emulator.hosting.executors import Executors
from emulator.hosting.fleet import instance_limits, logs, multi_container
from emulator.hosting.fleet.cold_start import ColdStarts, InstanceClock, PlanSetup
from emulator.hosting.fleet.instance_limits import InstanceLimits
from emulator.hosting.fleet.plan import VariantPlan
from emulator.hosting.fleet.startup import InstanceStartup
from emulator.hosting.fleet.variants import Instance, InstanceContainer, VariantFleet, new_instance_id
from emulator.model import platform_env
from emulator.model.resources import DeployedImage
from emulator.model.routing import InstancePicker
from emulator.runtime import labels
from emulator.runtime.base import ContainerHandle, ContainerRuntime, ContainerSpec, HostResources

log = logging.getLogger(__name__)


def _container_name(endpoint: str, variant: str, instance_id: str) -> str:
    safe = re.sub(r"[^a-zA-Z0-9_.-]", "-", f"{endpoint}-{variant}")
    return f"smlocal-{safe}-{instance_id}"[:200]


class Deployer:
    def __init__(
        self,
        config: ServerConfig,
        runtime: ContainerRuntime,
        ping_session: Callable[[], aiohttp.ClientSession],
        executors: Executors | None = None,
    ) -> None:
        self._config = config
        self._runtime = runtime
        #: the service's thread pools (a Deployer of its own otherwise: tests)
        self.executors = executors or Executors()
        self._ping_session = ping_session
        self._owner = labels.owner_id(config.state_dir)
        #: every instance start's profile (fleet/cold_start.py)
        self.cold_starts = ColdStarts(config.logs_dir)
        self._host: HostResources | None = None  # the engine's machine, asked once (host_resources)

    @property
    def owner(self) -> str:
        return self._owner

    @property
    def config(self) -> ServerConfig:
        return self._config

    @property
    def runtime(self) -> ContainerRuntime:
        return self._runtime

    def ping_session(self) -> aiohttp.ClientSession:
        return self._ping_session()

    async def host_resources(self) -> HostResources | None:
        """The engine machine's memory, cores and NVIDIA runtime (None: the engine could not say)."""
        if self._host is None:
            try:
                self._host = await self.executors.engine(self._runtime.host_resources)
            except EngineError as exc:
                log.warning("the Docker engine did not describe its machine: %s", exc)
        return self._host

    def limits(self, plan: VariantPlan) -> InstanceLimits:
        """What each container of one of the plan's instances gets of its instance type."""
        if plan.component is not None:
            return instance_limits.component_limits(self._config, plan, self._host)
        return instance_limits.variant_limits(self._config, plan.variant, plan.model, self._host)

    def _digest(self, plan: VariantPlan) -> str:
        return instance_limits.spec_digest(self._config, plan)

    def _labels(self, plan: VariantPlan, instance_id: str) -> dict[str, str]:
        found = {
            labels.MANAGED: "true",
            labels.OWNER: self._owner,
            labels.ROLE: "endpoint",
            labels.ENDPOINT: plan.endpoint_name,
            labels.VARIANT: plan.variant.variant_name,
            labels.INSTANCE: instance_id,
            labels.SPEC_DIGEST: self._digest(plan),
        }
        if plan.component is not None:  # an inference component's copy, and where it is placed
            found[labels.COMPONENT] = plan.component
            found[labels.HOST] = plan.host_id or ""
        return found

    def _spec(self, plan: VariantPlan, instance_id: str) -> ContainerSpec:
        port = self._config.limits.container_port
        return ContainerSpec(
            image=plan.image.image_id,
            name=_container_name(
                plan.endpoint_name, plan.component or plan.variant.variant_name, instance_id
            ),
            labels={**self._labels(plan, instance_id), labels.CONTAINER_PORT: str(port)},
            environment=plan.environment(),
            model_dir=plan.model_dir,
            models_dir=self.models_dir(plan, instance_id, create=True),
            read_only_mounts=plan.channel_dirs,
            container_port=port,
            hostname=platform_env.HOSTNAME,
            network_isolation=plan.model.enable_network_isolation,
            **self.limits(plan).spec_fields(),
        )

    def models_dir(self, plan: VariantPlan, instance_id: str, create: bool = False) -> Path | None:
        """A multi-model instance's host folder of models (None for any other): one per instance, as
        each SageMaker instance downloads to its own volume; removed with the instance."""
        if not plan.model.multi_model:
            return None
        path = self._config.state_dir / "multi-model" / plan.endpoint_name / instance_id
        if create:
            path.mkdir(parents=True, exist_ok=True)
        return path

    def _attach(self, plan: VariantPlan, instance_id: str, handle: ContainerHandle) -> Instance:
        instance = Instance(
            instance_id=instance_id,
            variant_name=plan.variant.variant_name,
            handle=handle,
            models_dir=self.models_dir(plan, instance_id),
        )
        # an inference component's copy logs under its component (`component/instance-id`)
        instance.log_path = logs.stream_path(
            self._config.logs_dir,
            plan.endpoint_name,
            plan.component or plan.variant.variant_name,
            instance_id,
        )
        loop = asyncio.get_running_loop()

        def exited() -> bool:  # on the watcher's thread; the code is read after `exited` is set
            state = self._runtime.state(handle.id)
            if not state.running:
                instance.exit_code = state.exit_code
                return True
            code = self._runtime.wait_exit(handle.id, 3600.0)
            instance.exit_code = code
            return code is not None

        logs.ExitWatcher(exited, lambda: _call_soon(loop, instance.exited.set), instance_id).start()
        return instance

    def _attach_containers(
        self,
        plan: VariantPlan,
        instance_id: str,
        network: ContainerHandle,
        handles: Sequence[ContainerHandle],
    ) -> Instance:
        """A multi-container instance: any of its containers exiting sets its `exited`."""
        stream = functools.partial(
            logs.stream_path, self._config.logs_dir, plan.endpoint_name, plan.variant.variant_name
        )
        containers = tuple(
            InstanceContainer(c.hostname, h, stream(f"{instance_id}/{c.hostname}"))
            for c, h in zip(plan.containers, handles, strict=True)
        )
        instance = Instance(
            instance_id=instance_id,
            variant_name=plan.variant.variant_name,
            handle=handles[0],
            containers=containers,
            network=network,
            log_path=containers[0].log_path,
        )
        loop = asyncio.get_running_loop()
        for handle in (network, *handles):
            self._watch_exit(handle, loop, instance, instance_id)
        return instance

    def _watch_exit(
        self, handle: ContainerHandle, loop: asyncio.AbstractEventLoop, instance: Instance, name: str
    ) -> None:
        def exited() -> bool:
            state = self._runtime.state(handle.id)
            if not state.running:
                return True
            return self._runtime.wait_exit(handle.id, 3600.0) is not None

        logs.ExitWatcher(exited, lambda: _call_soon(loop, instance.exited.set), name).start()

    async def _start_containers(self, plan: VariantPlan, instance_id: str) -> Instance:
        """The network container, then every model container joining it (at once); on any failure
        every one started is stopped before the error goes on."""
        base = _container_name(plan.endpoint_name, plan.variant.variant_name, instance_id)
        instance_labels = self._labels(plan, instance_id)
        network = await self.executors.engine(
            self._runtime.start, multi_container.network_spec(plan, base, instance_labels)
        )
        specs = multi_container.container_specs(plan, base, instance_labels, network.id, self.limits(plan))
        results = await asyncio.gather(
            *(self.executors.engine(self._runtime.start, spec) for spec in specs), return_exceptions=True
        )
        started = [r for r in results if isinstance(r, ContainerHandle)]
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            grace = self._config.limits.stop_grace_s
            await asyncio.gather(*(self.stop_container(h.id, grace) for h in started), return_exceptions=True)
            await asyncio.gather(self.stop_container(network.id, grace), return_exceptions=True)
            raise failed[0]
        return self._attach_containers(plan, instance_id, network, started)

    async def start_instance(self, plan: VariantPlan, setup: PlanSetup | None = None) -> Instance:
        """`setup`: the plan's phases when this launch made the plan (else PlanSetup.for_later)."""
        setup = setup or PlanSetup.for_later(plan)
        began = time.monotonic()
        instance = await self._start_instance(plan)
        instance.clock = InstanceClock(setup, began, time.monotonic())
        return instance

    async def _start_instance(self, plan: VariantPlan) -> Instance:
        instance_id = new_instance_id()
        await self.host_resources()
        if plan.containers:
            instance = await self._start_containers(plan, instance_id)
            log.info(
                "%s/%s: started %s (%d containers)",
                plan.endpoint_name,
                plan.variant.variant_name,
                instance_id,
                len(instance.containers),
            )
            return instance
        handle = await self.executors.engine(self._runtime.start, self._spec(plan, instance_id))
        log.info(
            "%s/%s: started %s (%s) on %s",
            plan.endpoint_name,
            plan.variant.variant_name,
            instance_id,
            handle.name,
            handle.base_url,
        )
        return self._attach(plan, instance_id, handle)

    def adopt_instance(self, plan: VariantPlan, handles: Sequence[ContainerHandle]) -> Instance:
        """`handles`: one matching instance's (matching_instances)."""
        handle = handles[0]
        instance_id = handle.labels.get(labels.INSTANCE) or new_instance_id()
        if plan.containers:
            log.info(
                "%s/%s: adopting running instance %s",
                plan.endpoint_name,
                plan.variant.variant_name,
                instance_id,
            )
            return self._attach_containers(plan, instance_id, handle, handles[1:])
        log.info(
            "%s/%s: adopting running container %s", plan.endpoint_name, plan.variant.variant_name, handle.name
        )
        return self._attach(plan, instance_id, handle)

    def adoptable(self, plan: VariantPlan, candidates: Sequence[ContainerHandle]) -> bool:
        digest = self._digest(plan)
        return bool(candidates) and all(h.labels.get(labels.SPEC_DIGEST) == digest for h in candidates)

    def matching(self, plan: VariantPlan, candidates: Sequence[ContainerHandle]) -> list[ContainerHandle]:
        """The candidates started from exactly this plan (image, environment, model data, port) that
        can be reached (an isolated one whose forwarder is gone has no port: it is replaced)."""
        digest = self._digest(plan)
        return [h for h in candidates if h.labels.get(labels.SPEC_DIGEST) == digest and h.host_port]

    def matching_instances(
        self, plan: VariantPlan, candidates: Sequence[ContainerHandle]
    ) -> list[tuple[ContainerHandle, ...]]:
        """The candidates' instances started from exactly this plan, each as its containers (one,
        or a multi-container instance's network container and then its model containers)."""
        if plan.containers:
            digest = self._digest(plan)
            return multi_container.matching_instances(plan, candidates, digest)
        return [(h,) for h in self.matching(plan, candidates)]

    async def start_healthy(self, plan: VariantPlan, count: int) -> list[Instance]:
        """Start `count` more instances of a running variant and wait until each is healthy;
        on any failure (or cancellation) stop the ones started and raise."""
        instances: list[Instance] = []
        await self._start_healthy_into(plan, count, instances)
        return instances

    async def _start_healthy_into(
        self, plan: VariantPlan, count: int, instances: list[Instance], setup: PlanSetup | None = None
    ) -> None:
        """Start `count` more instances into `instances` and wait until all of `instances` (those
        given too) are healthy; on any failure (or cancellation) stop every one of them and raise."""
        try:
            await self._start_into(plan, count, instances, setup)
            async with asyncio.TaskGroup() as group:
                for instance in instances:
                    group.create_task(self.wait_healthy(plan, instance))
        except BaseException as exc:
            await asyncio.shield(self.stop_instances(instances))
            if isinstance(exc, BaseExceptionGroup):
                raise first_error(exc) from None
            raise

    async def _start_into(
        self, plan: VariantPlan, count: int, instances: list[Instance], setup: PlanSetup | None
    ) -> None:
        """Start `count` containers of the plan at once, appending each to `instances` as it starts.
        The engine call runs in a thread that cancellation cannot stop: a cancelled start waits for
        it, so the container it creates is known (and stopped by the caller) rather than orphaned."""

        async def start_one() -> None:
            starting = asyncio.ensure_future(self.start_instance(plan, setup))
            try:
                instances.append(await asyncio.shield(starting))
            except asyncio.CancelledError:
                with contextlib.suppress(Exception):
                    instances.append(await starting)
                raise

        async with asyncio.TaskGroup() as group:
            for _ in range(count):
                group.create_task(start_one())

    async def wait_healthy(self, plan: VariantPlan, instance: Instance) -> None:
        await InstanceStartup(self).wait_healthy(plan, instance)

    def platform_log(self, endpoint_name: str, line: str) -> None:
        log.info("%s: %s", endpoint_name, line)
        logs.platform_log(self._config.logs_dir, endpoint_name, line)

    async def launch_variant(
        self,
        plan: VariantPlan,
        adopt: Sequence[Sequence[ContainerHandle]] = (),
        setup: PlanSetup | None = None,
    ) -> VariantFleet:
        """Start (or adopt: matching_instances) the variant's instances and wait until every one is
        healthy. `setup`: the plan's measured phases (the instances' cold-start profiles)."""
        instance_limits.warn(self._config, plan, await self.host_resources())
        instances: list[Instance] = [self.adopt_instance(plan, h) for h in adopt]
        count = plan.variant.initial_instance_count - len(instances)
        await self._start_healthy_into(plan, count, instances, setup)
        return self.fleet_of(plan, instances)

    def fleet_of(self, plan: VariantPlan, instances: list[Instance]) -> VariantFleet:
        """The serving side of a variant whose instances are healthy."""
        now = datetime.now(UTC)
        deployed = DeployedImage(plan.model.primary_container.image, plan.image.resolved, now)
        more = tuple(DeployedImage(c.definition.image, c.image.resolved, now) for c in plan.containers[1:])
        return VariantFleet(
            variant=plan.variant,
            instances=instances,
            deployed_image=deployed,
            more_images=more,
            weight=plan.variant.initial_variant_weight,
            picker=InstancePicker(plan.variant.routing_strategy.value),
            plan=plan,
        )

    async def stop_instances(self, instances: Sequence[Instance], grace_s: float | None = None) -> None:
        """Stop and remove the instances' containers, all at once. Never raises an engine error: a
        container the engine could not stop or remove is logged (and swept at shutdown or the next
        start), so that an update or deletion is never left half done by one failed stop."""
        grace = self._config.limits.stop_grace_s if grace_s is None else grace_s
        results = await asyncio.gather(*(self._stop(i, grace) for i in instances), return_exceptions=True)
        for instance, result in zip(instances, results, strict=True):
            if isinstance(result, asyncio.CancelledError):
                raise result
            if isinstance(result, BaseException):
                log.warning("could not stop %s (%s): %s", instance.instance_id, instance.handle.name, result)

    async def _stop(self, instance: Instance, grace_s: float) -> None:
        for hook in instance.on_stop:  # e.g. a multi-model instance's loads: cancelled, finished
            await hook()
        if instance.network is None:
            await self.stop_container(instance.handle.id, grace_s, instance.log_path)
            if instance.models_dir is not None:  # the instance's downloaded models go with it
                await self.executors.engine(shutil.rmtree, instance.models_dir, True)
            return
        # every model container (SIGTERM, grace, SIGKILL, at once), then the network they share
        results = await asyncio.gather(
            *(self.stop_container(c.handle.id, grace_s, c.log_path) for c in instance.containers),
            return_exceptions=True,
        )
        await self.stop_container(instance.network.id, grace_s)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def stop_container(self, container_id: str, grace_s: float, log_path: Path | None = None) -> None:
        """SIGTERM, grace, SIGKILL; archive the container's log (when it has a stream); remove it."""
        await self.executors.stop(self._runtime.stop, container_id, grace_s)
        if log_path is not None:
            text = await self.executors.engine(self._runtime.logs, container_id)
            await self.executors.engine(logs.archive, log_path, text)
        await self.executors.engine(self._runtime.remove, container_id)

    def owned_containers(self) -> list[ContainerHandle]:
        return self._runtime.list({labels.MANAGED: "true", labels.OWNER: self._owner})


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
    if not loop.is_closed():
        loop.call_soon_threadsafe(callback)
