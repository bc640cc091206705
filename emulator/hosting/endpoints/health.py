"""Instance health while an endpoint is InService: an instance whose container exits or fails its
`/ping` (or refuses a connection) leaves rotation at once and is replaced; the endpoint keeps serving
on the others (docs/api-coverage.md, "Instance health").

The checks (`ping`, `first_exit`, `unhealthy`) are plain functions over instances; `InstanceHealth`,
a part of HostingService, owns the watching task and the replacements."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import aiohttp

from emulator.errors import DeploymentFailed, EngineError
from emulator.hosting.endpoints.base import ServiceBase
from emulator.hosting.fleet.variants import Instance, VariantFleet
from emulator.model.resources import EndpointStatus

log = logging.getLogger(__name__)

# [U] UpdateRollbackFailed: a mixed fleet still serves (spec §6.3), so its instances stay watched
_SERVING = (EndpointStatus.IN_SERVICE, EndpointStatus.UPDATE_ROLLBACK_FAILED)


# How often an InService endpoint's instances are pinged: ServerConfig.health_check_interval_s
# (SageMaker's interval is unpublished [U]); an exited container is noticed at once, independently.

_in_flight: set[asyncio.Task[bool]] = set()


async def ping(session: aiohttp.ClientSession, base_url: str, timeout_s: float) -> bool:
    """One GET /ping attempt: healthy only on HTTP 200 within the contract's attempt timeout (a
    redirect is not followed, so a 3xx is unhealthy).

    A caller's cancellation (an update or deletion stops the watching) does not cut the attempt
    short: aiohttp can drop a half-open socket unclosed when cancelled mid-connect. The attempt is
    bounded by timeout_s, and closing the session ends it anyway."""
    attempt = asyncio.ensure_future(_ping(session, base_url, timeout_s))
    _in_flight.add(attempt)
    attempt.add_done_callback(_in_flight.discard)
    return await asyncio.shield(attempt)


async def _ping(session: aiohttp.ClientSession, base_url: str, timeout_s: float) -> bool:
    try:
        async with session.get(
            f"{base_url}/ping", timeout=aiohttp.ClientTimeout(total=timeout_s), allow_redirects=False
        ) as resp:
            await resp.read()
            return resp.status == 200
    except (aiohttp.ClientError, TimeoutError):
        return False


async def ping_instance(session: aiohttp.ClientSession, instance: Instance, timeout_s: float) -> bool:
    """Healthy when every container of the instance answers its /ping with 200."""
    results = await asyncio.gather(*(ping(session, url, timeout_s) for url in instance.base_urls))
    return all(results)


async def first_exit(instances: Sequence[Instance], timeout_s: float) -> None:
    """Return when any of the instances has exited, or after timeout_s."""
    if any(i.exited.is_set() for i in instances):
        return
    waiters = [asyncio.ensure_future(i.exited.wait()) for i in instances]
    try:
        await asyncio.wait(waiters, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


async def unhealthy(
    session: aiohttp.ClientSession, instances: Sequence[Instance], timeout_s: float, do_ping: bool
) -> list[Instance]:
    """The instances that exited, plus (when do_ping) those whose /ping failed."""
    dead = [i for i in instances if i.exited.is_set()]
    if do_ping:
        alive = [i for i in instances if not i.exited.is_set()]
        results = await asyncio.gather(*(ping_instance(session, i, timeout_s) for i in alive))
        dead.extend(i for i, ok in zip(alive, results, strict=True) if not ok)
    return dead


class InstanceHealth(ServiceBase):
    def _watch(self, name: str) -> None:
        """Start watching an InService endpoint's instances (no-op if already watched)."""
        task = self._monitors.get(name)
        if task is None or task.done():
            self._monitors[name] = asyncio.ensure_future(self._monitor(name))

    def _quiesce(self, name: str, cancel_replacements: bool = False) -> list[asyncio.Task[None]]:
        """Stop watching (before an update or deletion changes the fleet). Replacements under way
        finish their start (cancelling one mid-ping can leak its socket) and then stop what they
        started, since the endpoint is no longer watched; shutdown cancels them."""
        replacements = list(self._replacements.pop(name, set()))
        tasks = list(replacements)
        monitor = self._monitors.pop(name, None)
        if monitor is not None:
            tasks.append(monitor)
            monitor.cancel()
        for task in replacements:
            if cancel_replacements:
                task.cancel()
        for suspect in self._suspects.pop(name, []):  # their verdict is cancelled: stop them
            self._stop_in_background(name, suspect)
        return tasks

    def _stop_in_background(self, name: str, instance: Instance) -> None:
        """Stop (SIGTERM, grace, SIGKILL) and remove a dead instance's container in a task of its
        own; its outcome is always retrieved: a failure is one log line, never an unretrieved task
        exception with a traceback."""
        stopping = asyncio.ensure_future(self.deployer.stop_instances([instance]))
        self._stopping.add(stopping)

        def done(task: asyncio.Task[None]) -> None:
            self._stopping.discard(task)
            if task.cancelled() or task.exception() is None:
                return
            line = f"{instance.variant_name}/{instance.instance_id}: could not stop its container: "
            line += str(task.exception())
            log.warning("%s: %s", name, line)
            self.deployer.platform_log(name, line)

        stopping.add_done_callback(done)

    async def _monitor(self, name: str) -> None:
        loop = asyncio.get_running_loop()
        interval = self.health_check_interval_s
        next_ping = loop.time() + interval
        while True:
            fleet = self._fleets.get(name)
            endpoint = self.endpoints.get(name)
            if fleet is None or endpoint is None or endpoint.status not in _SERVING:
                return
            serving = [(v, i) for v in fleet.variants.values() for i in v.instances]
            await first_exit([i for _, i in serving], max(0.0, next_ping - loop.time()))
            do_ping = loop.time() >= next_ping
            dead = await unhealthy(
                self.ping_session, [i for _, i in serving], self.config.limits.ping_timeout_s, do_ping
            )
            if do_ping:
                next_ping = loop.time() + interval
            for variant, instance in serving:
                if instance in dead and instance in variant.instances:
                    if not instance.exited.is_set():
                        self._take_out(name, variant, instance, "failed its ping health check")
                        continue
                    why = await self._exit_reason(variant, instance)
                    if instance in variant.instances and name in self._monitors:  # still ours after the look
                        self._take_out(name, variant, instance, why)

    async def _exit_reason(self, variant: VariantFleet, instance: Instance) -> str:
        """'exited'; for a container the engine no longer knows, 'was removed from the engine'; for
        one the kernel killed at its memory limit, 'was killed by the engine: out of memory at ...'
        (any container of a multi-container instance)."""
        handles = [c.handle for c in instance.containers] or [instance.handle]
        try:
            states = [await asyncio.to_thread(self.runtime.state, h.id) for h in handles]
        except EngineError:
            return "exited"
        if any(s.oom_killed for s in states) and variant.plan is not None:
            line = self.deployer.limits(variant.plan).out_of_memory() or "out of memory"
            return f"was killed by the engine: {line}"
        gone = states[0].status in ("removed", "removing")
        return "was removed from the engine (docker rm?)" if gone else "exited"

    def _take_out(self, name: str, variant: VariantFleet, instance: Instance, why: str) -> None:
        """Out of rotation at once and stopped; a replacement joins the rotation when healthy."""
        variant.remove([instance])
        suspects = self._suspects.get(name, [])
        if instance in suspects:
            suspects.remove(instance)
        serverless = variant.variant.serverless
        if serverless is not None and not serverless.provisioned_concurrency:
            # capacity on demand (hosting/serverless/): the next request starts a new container
            self.deployer.platform_log(
                name, f"{variant.variant.variant_name}/{instance.instance_id} {why}; stopped"
            )
            self._stop_in_background(name, instance)
            return
        self.deployer.platform_log(
            name, f"{variant.variant.variant_name}/{instance.instance_id} {why}; replacing it"
        )
        # The dead container stops (SIGTERM, grace, SIGKILL) while its replacement starts; this task
        # is not cancelled with the replacement, so the container never outlives its endpoint.
        self._stop_in_background(name, instance)
        self._track(name, asyncio.ensure_future(self._replace(name, variant, instance)))

    def _track(self, name: str, task: asyncio.Task[None]) -> None:
        pending = self._replacements.setdefault(name, set())
        pending.add(task)
        task.add_done_callback(pending.discard)

    def _suspect(self, name: str, variant: VariantFleet, instance: Instance) -> None:
        """An instance's connection failed: out of rotation now; replaced unless a ping clears it.
        Until then it is a suspect, which DeleteEndpoint and shutdown stop with the fleet."""
        if name not in self._monitors or instance not in variant.instances:
            return  # not InService (an update owns the fleet), or already handled
        if variant.component is not None:
            return  # a component's copy: its exit or failed ping is the component's task's
        variant.remove([instance])
        self._suspects.setdefault(name, []).append(instance)

        async def check() -> None:
            # A crashing container's exit event usually follows within milliseconds: wait for it
            # briefly rather than ping a dying container.
            await first_exit([instance], 0.5)
            if not instance.exited.is_set() and await ping_instance(
                self.ping_session, instance, self.config.limits.ping_timeout_s
            ):
                self._suspects.get(name, []).remove(instance)
                variant.add([instance])
                return
            why = "refused or dropped a connection"
            if instance.exited.is_set():  # e.g. killed for memory by the request it was serving
                why = f"{why} and {await self._exit_reason(variant, instance)}"
            if instance in self._suspects.get(name, []):
                self._take_out(name, variant, instance, why)

        self._track(name, asyncio.ensure_future(check()))

    def _wanted(self, name: str, variant: VariantFleet) -> bool:
        fleet = self._fleets.get(name)
        return name in self._monitors and fleet is not None and variant in fleet.variants.values()

    async def _replace(self, name: str, variant: VariantFleet, dead: Instance) -> None:
        """Start a new instance, add it to rotation once healthy (retrying after a failure)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert variant.plan is not None
        while True:
            if not self._wanted(name, variant):
                return
            try:
                new = await self.deployer.start_healthy(variant.plan, 1)
            except (DeploymentFailed, EngineError) as exc:
                self.deployer.platform_log(name, f"{variant.variant.variant_name}: replacement failed: {exc}")
                await asyncio.sleep(self.health_check_interval_s)  # back-off before the next try
                continue
            if not self._wanted(name, variant):  # deleted or updated meanwhile
                await self.deployer.stop_instances(new)
                return
            variant.add(new)
            self.deployer.platform_log(
                name,
                f"{variant.variant.variant_name}/{new[0].instance_id} replaced {dead.instance_id} "
                f"in {loop.time() - started:.2f} s",
            )
            return
