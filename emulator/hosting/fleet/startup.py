"""Whether a started instance became healthy within its startup budget, and the FailureReason when
not: GET /ping until HTTP 200 on every container of the instance (fleet/readiness.py's wait), the
container that exited named with its exit code and last log lines, or the containers that never
passed listed."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import NoReturn, Protocol

import aiohttp

from emulator.config import ServerConfig
from emulator.errors import DeploymentFailed
from emulator.hosting.executors import Executors
from emulator.hosting.fleet.cold_start import ColdStarts
from emulator.hosting.fleet.instance_limits import InstanceLimits
from emulator.hosting.fleet.plan import VariantPlan
from emulator.hosting.fleet.readiness import (
    Outcome,
    PingPolicy,
    Readiness,
    answered,
    ping_once,
    wait_until_healthy,
)
from emulator.hosting.fleet.variants import Instance
from emulator.model import messages, platform_env
from emulator.runtime.base import ContainerRuntime

log = logging.getLogger(__name__)

_FAILURE_REASON_MAX = 1024


class StartingFleet(Protocol):
    """What the check needs of the deployer that started the instance."""

    executors: Executors
    cold_starts: ColdStarts

    @property
    def config(self) -> ServerConfig: ...

    @property
    def runtime(self) -> ContainerRuntime: ...

    def ping_session(self) -> aiohttp.ClientSession: ...

    def platform_log(self, endpoint_name: str, line: str) -> None: ...

    def limits(self, plan: VariantPlan) -> InstanceLimits: ...


class InstanceStartup:
    def __init__(self, deployer: StartingFleet) -> None:
        self._deployer = deployer

    async def wait_healthy(self, plan: VariantPlan, instance: Instance) -> None:
        variant = plan.variant
        deadline = float(
            variant.startup_health_check_timeout_s or self._deployer.config.limits.startup_timeout_s
        )
        if variant.serverless is not None:  # model download and first ping within 3 minutes (§7)
            deadline = self._deployer.config.limits.serverless_startup_timeout_s
        policy = PingPolicy(
            deadline, self._deployer.config.limits.ping_timeout_s, self._deployer.config.ping_interval_s
        )
        if instance.containers:
            results = await self._wait_containers_healthy(plan, instance, policy)
            self._cold_started(plan, instance, results, deadline)
            return
        if instance.handle.host_port == 0:
            instance.exited.set()  # the engine published no port: the container is already gone
            readiness = None
        else:
            readiness = await wait_until_healthy(
                self._deployer.ping_session(), instance.base_url, policy, instance.exited
            )
            if readiness.outcome is Outcome.HEALTHY:
                log.info(
                    "%s/%s: %s healthy after %.2f s (%d pings)",
                    plan.endpoint_name,
                    variant.variant_name,
                    instance.instance_id,
                    readiness.elapsed_s,
                    readiness.attempts,
                )
                self._cold_started(plan, instance, [readiness], deadline)
                return
        if readiness is None or readiness.outcome is Outcome.EXITED:
            state = await self._deployer.executors.engine(self._deployer.runtime.state, instance.handle.id)
            if state.oom_killed:
                self._out_of_memory(plan, instance.instance_id)
            text = await self._deployer.executors.engine(self._deployer.runtime.logs, instance.handle.id, 10)
            tail = text.rstrip("\n").splitlines() if text.strip() else []
            reason = messages.cannot_start_container(variant.variant_name)
            detail = f". The container exited with code {state.exit_code}" + (
                "; last log lines:\n" + "\n".join(tail) if tail else "; it wrote no log lines."
            )
            self._deployer.platform_log(
                plan.endpoint_name, f"{variant.variant_name}/{instance.instance_id}: {reason}{detail}"
            )
            raise DeploymentFailed(_clip(reason + detail))
        self._deployer.platform_log(
            plan.endpoint_name,
            f"{variant.variant_name}/{instance.instance_id}: no HTTP 200 from /ping within {deadline:g} s "
            f"({readiness.attempts} attempts); last: {readiness.last_observation}",
        )
        raise DeploymentFailed(messages.ping_health_check_failed(variant.variant_name))

    def _cold_started(
        self, plan: VariantPlan, instance: Instance, results: list[Readiness], budget_s: float
    ) -> None:
        """The instance's cold-start profile (every container healthy: the last one's times), and
        its first invocation armed (Instance.first_call)."""
        clock = instance.clock
        if clock is None:
            return
        answers = [r.first_answer for r in results if r.first_answer is not None]
        healthy = max(r.ended for r in results)
        endpoint, iid = plan.endpoint_name, instance.instance_id
        profile = clock.profile(
            endpoint, plan.variant.variant_name, iid, max(answers, default=None), healthy, budget_s
        )
        cold_starts = self._deployer.cold_starts
        cold_starts.record(profile)

        def first_call() -> None:
            instance.first_call = None
            cold_starts.first_invocation(endpoint, iid, time.monotonic() - healthy)

        instance.first_call = first_call

    async def _wait_containers_healthy(
        self, plan: VariantPlan, instance: Instance, policy: PingPolicy
    ) -> list[Readiness]:
        """Healthy when every container's /ping answers 200; else the endpoint's FailureReason
        names the container that exited, or every container that did not pass its pings."""
        variant = plan.variant.variant_name
        results = await asyncio.gather(
            *(
                wait_until_healthy(self._deployer.ping_session(), c.base_url, policy, instance.exited)
                if c.handle.host_port
                else _no_port(instance)
                for c in instance.containers
            )
        )
        if all(r is not None and r.outcome is Outcome.HEALTHY for r in results):
            log.info(
                "%s/%s: %s healthy (%d containers)",
                plan.endpoint_name,
                variant,
                instance.instance_id,
                len(results),
            )
            return [r for r in results if r is not None]
        where = f"{variant}/{instance.instance_id}"
        for c in instance.containers:
            state = await self._deployer.executors.engine(self._deployer.runtime.state, c.handle.id)
            if state.running:
                continue
            if state.oom_killed:
                self._out_of_memory(plan, where, c.hostname)
            text = await self._deployer.executors.engine(self._deployer.runtime.logs, c.handle.id, 10)
            tail = text.rstrip("\n").splitlines() if text.strip() else []
            reason = messages.cannot_start_container(variant)
            detail = f". The container {c.hostname} exited with code {state.exit_code}" + (
                "; last log lines:\n" + "\n".join(tail) if tail else "; it wrote no log lines."
            )
            self._deployer.platform_log(plan.endpoint_name, f"{where}: {reason}{detail}")
            raise DeploymentFailed(_clip(reason + detail))
        failing = [
            c.hostname
            for c, r in zip(instance.containers, results, strict=True)
            if r is None or r.outcome is not Outcome.HEALTHY
        ]
        for c, r in zip(instance.containers, results, strict=True):
            if r is not None and r.outcome is not Outcome.HEALTHY:
                self._deployer.platform_log(
                    plan.endpoint_name,
                    f"{where}: {c.hostname}: no HTTP 200 from /ping within {policy.deadline_s:g} s "
                    f"({r.attempts} attempts); last: {r.last_observation}",
                )
        silent = [
            (c.hostname, p.port)
            for c, p, r in zip(instance.containers, plan.containers, results, strict=True)
            if r is not None and r.outcome is not Outcome.HEALTHY and not r.http_answered
        ]
        reason = messages.containers_failed_ping(variant, ", ".join(failing))
        if silent:
            reason += messages.silent_on_bind_port(silent, await self._default_port_answers(instance))
        raise DeploymentFailed(_clip(reason))

    def _out_of_memory(self, plan: VariantPlan, where: str, container: str | None = None) -> NoReturn:
        """A container the kernel killed at its memory limit: the endpoint's log line, and the
        FailureReason (SageMaker's CannotStartContainerError, then smlocal's words) [U]."""
        limits = self._deployer.limits(plan)
        variant = plan.variant.variant_name
        line = limits.out_of_memory() or "out of memory"
        who = f"{variant}/{where}" if container is None else f"{where}: {container}"
        self._deployer.platform_log(plan.endpoint_name, f"{who}: killed by the engine: {line}")
        raise DeploymentFailed(_clip(messages.out_of_memory_at_start(variant, line)))

    async def _default_port_answers(self, instance: Instance) -> bool:
        """Whether any HTTP server answers on 8080 inside the instance (no container was told it: the
        network container publishes it for this question only)."""
        network = instance.network
        host_port = network.published_ports.get(platform_env.DEFAULT_PORT) if network else None
        if not host_port:
            return False
        timeout_s = self._deployer.config.limits.ping_timeout_s
        url = f"http://127.0.0.1:{host_port}/ping"
        return answered(await ping_once(self._deployer.ping_session(), url, timeout_s))


async def _no_port(instance: Instance) -> None:
    """A container the engine published no port for is already gone."""
    instance.exited.set()


def _clip(text: str) -> str:
    return text if len(text) <= _FAILURE_REASON_MAX else text[: _FAILURE_REASON_MAX - 3] + "..."
