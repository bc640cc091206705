"""A serverless variant's capacity on demand (spec §7; docs/serverless.md).

smlocal runs at most one container per serverless variant [U]: it serves up to MaxConcurrency
requests at once (one more is refused with ThrottlingException, never queued), runs with a memory
limit of MemorySizeInMB and a CPU share that grows with it, and exists only while wanted:

* none at CreateEndpoint (the endpoint is InService at once), unless ProvisionedConcurrency is set:
  then one is started with the endpoint and kept whatever the traffic;
* a request that finds no container starts one (a cold start: the request, and any arriving
  meanwhile, wait for its first 200 on /ping within the 3-minute startup limit) and the time it
  took is ModelSetupTime;
* a container without requests for `ServerConfig.serverless_idle_s` (policy seconds, scaled by
  --time-scale) is stopped; the next request is a cold start again.

`ServerlessHost.admitted` is the invoke path's one hook: the throttle, the cold start and the
request's count (hosting/endpoints/invoke.py)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import weakref
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from emulator.config import ServerConfig
from emulator.errors import DeploymentFailed, EngineError, ModelFault, ModelUnreachable, Throttled
from emulator.hosting.fleet.deployer import Deployer
from emulator.hosting.fleet.invoker import FaultContext
from emulator.hosting.fleet.variants import Instance, VariantFleet
from emulator.model import messages
from emulator.model.resources import ServerlessConfig

log = logging.getLogger(__name__)

#: How long a failed call waits for its container's exit before asking whether it was OOMKilled.
_EXIT_WAIT_S = 2.0


@dataclass(frozen=True)
class ColdStart:
    """One cold start's parts, seconds: the engine's create and start, then the wait for /ping 200."""

    container_start_s: float
    first_ping_s: float

    @property
    def total_s(self) -> float:
        return self.container_start_s + self.first_ping_s


@dataclass(eq=False)
class VariantCapacity:
    """One serverless variant's live state: requests in flight, the cold start under way, the idle
    timer."""

    config: ServerlessConfig
    in_flight: int = 0
    starting: asyncio.Future[None] | None = None
    idle: asyncio.TimerHandle | None = None
    #: the latest cold start's parts (its platform log line has them all)
    last_cold_start: ColdStart | None = None
    #: the container the latest request was sent to (a failed call asks the engine about it)
    serving: Instance | None = None

    def cancel_idle(self) -> None:
        if self.idle is not None:
            self.idle.cancel()
            self.idle = None


class ServerlessHost:
    def __init__(self, config: ServerConfig, deployer: Deployer) -> None:
        self._config = config
        self._deployer = deployer
        #: each serverless variant's capacity, forgotten with its fleet (an update makes new ones)
        self._capacity: weakref.WeakKeyDictionary[VariantFleet, VariantCapacity] = weakref.WeakKeyDictionary()
        #: Set by app.py to the metric store's `record_model_metric` (endpoint, variant, metric
        #: name, value): ModelSetupTime and the concurrency metrics. None: not recorded.
        self.record: Callable[[str, str, str, float], None] | None = None
        #: cold starts and idle stops under way (close waits for them)
        self._tasks: set[asyncio.Future[None]] = set()

    def capacity(self, variant: VariantFleet) -> VariantCapacity:
        assert variant.variant.serverless is not None
        cap = self._capacity.get(variant)
        if cap is None:
            cap = self._capacity[variant] = VariantCapacity(variant.variant.serverless)
        return cap

    @contextlib.asynccontextmanager
    async def admitted(
        self,
        endpoint_name: str,
        variant: VariantFleet,
        context: FaultContext,
        wanted: Callable[[], bool],
    ) -> AsyncIterator[VariantCapacity]:
        """A request on a serverless variant: refused over MaxConcurrency (Throttled); with no warm
        container, one is started first (a failed start: a ModelFault); counted until it ends, and
        the idle clock starts when the last one ends. `wanted`: whether the variant still serves
        (a container started after a deletion is stopped)."""
        cap = self.capacity(variant)
        if cap.in_flight >= cap.config.max_concurrency:
            raise Throttled(messages.serverless_throttled(endpoint_name, cap.config.max_concurrency))
        cap.in_flight += 1
        cap.cancel_idle()
        if self.record is not None:
            self._record_admission(endpoint_name, variant.variant.variant_name, cap)
        try:
            if not variant.instances:
                if cap.starting is None or cap.starting.done():
                    starting = asyncio.ensure_future(
                        self._cold_start(endpoint_name, variant, cap, context, wanted)
                    )
                    # its outcome is retrieved even when every request waiting for it has gone
                    starting.add_done_callback(lambda t: t.cancelled() or t.exception())
                    self._track(starting)
                    cap.starting = starting
                # shielded: a caller that gives up does not cancel the start the others wait for
                await asyncio.shield(cap.starting)
            cap.serving = variant.instances[0] if variant.instances else None
            yield cap
        finally:
            cap.in_flight -= 1
            if cap.in_flight == 0:
                self._arm_idle(endpoint_name, variant, cap, wanted)

    def _record_admission(self, endpoint_name: str, variant_name: str, cap: VariantCapacity) -> None:
        """The concurrency metrics of one admitted request (its own count included)."""
        assert self.record is not None
        record = functools.partial(self.record, endpoint_name, variant_name)
        record("ServerlessConcurrentExecutionsUtilization", cap.in_flight / cap.config.max_concurrency)
        provisioned = cap.config.provisioned_concurrency
        if not provisioned:
            return
        executions = min(cap.in_flight, provisioned)
        spilled = cap.in_flight > provisioned
        record("ServerlessProvisionedConcurrencyExecutions", float(executions))
        record("ServerlessProvisionedConcurrencyUtilization", executions / provisioned)
        record("ServerlessProvisionedConcurrencyInvocations", 0.0 if spilled else 1.0)
        record("ServerlessProvisionedConcurrencySpilloverInvocations", 1.0 if spilled else 0.0)

    async def _cold_start(
        self,
        endpoint_name: str,
        variant: VariantFleet,
        cap: VariantCapacity,
        context: FaultContext,
        wanted: Callable[[], bool],
    ) -> None:
        plan = variant.plan
        assert plan is not None
        name = variant.variant.variant_name
        began = time.perf_counter()
        instance: Instance | None = None
        try:
            instance = await self._deployer.start_instance(plan)
            started = time.perf_counter()
            await self._deployer.wait_healthy(plan, instance)
        except (DeploymentFailed, EngineError) as exc:
            if instance is not None:
                await self._deployer.stop_instances([instance])
            self._deployer.platform_log(endpoint_name, f"{name}: cold start failed: {exc.message}")
            raise context.fault(ModelFault, 0, messages.serverless_cold_start_failed(exc.message)) from exc
        except BaseException:
            if instance is not None:
                await asyncio.shield(self._deployer.stop_instances([instance]))
            raise
        ready = time.perf_counter()
        if not wanted():  # deleted or replaced while it started
            await self._deployer.stop_instances([instance])
            raise context.fault(ModelFault, 0, messages.container_unreachable("the endpoint was deleted"))
        cold = ColdStart(started - began, ready - started)
        cap.last_cold_start = cold
        variant.add([instance])
        self._deployer.platform_log(
            endpoint_name,
            f"{name}/{instance.instance_id}: cold start in {cold.total_s:.2f} s (container start "
            f"{cold.container_start_s:.2f} s, first /ping 200 after {cold.first_ping_s:.2f} s)",
        )
        if self.record is not None:
            self.record(endpoint_name, name, "ModelSetupTime", cold.total_s)

    async def explain(self, cap: VariantCapacity, context: FaultContext, fault: ModelFault) -> ModelFault:
        """A call whose connection broke because the engine killed the container over its memory
        limit (OOMKilled): a ModelError that says so; any other fault as it is."""
        instance = cap.serving
        if instance is None or not isinstance(fault, ModelUnreachable):
            return fault
        with contextlib.suppress(TimeoutError):  # the exit follows the broken connection at once
            await asyncio.wait_for(instance.exited.wait(), _EXIT_WAIT_S)
        try:
            state = await self._deployer.executors.engine(self._deployer.runtime.state, instance.handle.id)
        except EngineError:
            return fault
        if not state.oom_killed:
            return fault
        self._deployer.platform_log(
            context.endpoint_name,
            f"{instance.variant_name}/{instance.instance_id}: killed by the engine: over its memory "
            f"limit of {cap.config.memory_size_mb} MB",
        )
        oom = context.fault(ModelFault, 0, messages.serverless_out_of_memory(cap.config.memory_size_mb))
        oom.model_latency_s = fault.model_latency_s
        return oom

    def _arm_idle(
        self, endpoint_name: str, variant: VariantFleet, cap: VariantCapacity, wanted: Callable[[], bool]
    ) -> None:
        """After the last request: the container is stopped once idle for serverless_idle_s (never
        with ProvisionedConcurrency)."""
        if cap.config.provisioned_concurrency:
            return
        cap.cancel_idle()
        loop = asyncio.get_running_loop()
        delay = self._config.real_seconds(self._config.serverless_idle_s)
        cap.idle = loop.call_later(delay, self._idle_stop, endpoint_name, variant, cap, wanted)

    def _idle_stop(
        self, endpoint_name: str, variant: VariantFleet, cap: VariantCapacity, wanted: Callable[[], bool]
    ) -> None:
        cap.idle = None
        if cap.in_flight or not variant.instances or not wanted():
            return
        idle = list(variant.instances)
        variant.remove(idle)
        for instance in idle:
            self._deployer.platform_log(
                endpoint_name,
                f"{variant.variant.variant_name}/{instance.instance_id}: idle for "
                f"{self._config.serverless_idle_s:g} s; stopped (the next request starts a new one)",
            )
        self._track(asyncio.ensure_future(self._deployer.stop_instances(idle)))

    def _track(self, task: asyncio.Future[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def reconfigure(self, variant: VariantFleet) -> None:
        """The variant's ServerlessConfig changed (ServerlessUpdateConfig): its capacity follows it
        from the next request on; with ProvisionedConcurrency its container is no longer idle-stopped."""
        cap = self._capacity.get(variant)
        if cap is None or variant.variant.serverless is None:
            return
        cap.config = variant.variant.serverless
        if cap.config.provisioned_concurrency:
            cap.cancel_idle()

    def forget(self, variant: VariantFleet) -> None:
        """The variant no longer serves (deleted, replaced by an update): its idle timer goes."""
        cap = self._capacity.pop(variant, None)
        if cap is not None:
            cap.cancel_idle()

    async def close(self) -> None:
        """Idle timers cancelled; cold starts cancelled (each stops what it started); idle stops
        finish."""
        for cap in list(self._capacity.values()):
            cap.cancel_idle()
            if cap.starting is not None:
                cap.starting.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
