"""UpdateEndpoint's deployments: blue/green with traffic shifting and baking, and rolling batches,
with automatic rollback on an alarm or the execution timeout (shared/spec/hosting-contract.md §6.4;
the plan in emulator.model.deployment).

The hosting service owns the endpoint; it hands a deployment a `FleetHost` (itself) and maps the
`Outcome` to the endpoint's status. Waits are policy time (`ServerConfig.time_scale` applies).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from emulator.config import ServerConfig
from emulator.hosting.fleet.deployer import Deployer
from emulator.hosting.fleet.plan import VariantPlan
from emulator.hosting.fleet.variants import EndpointFleet, Instance, TrafficShift, VariantFleet
from emulator.model import deployment as dp
from emulator.model.resources import (
    EndpointConfig,
    PendingDeployment,
    ProductionVariant,
    VariantStatus,
    VariantSummary,
)

ALARM_CHECK_S = 0.5  # how often alarms are read while a deployment waits


class FleetHost(Protocol):
    config: ServerConfig
    deployer: Deployer

    async def launch(self, name: str, variant: ProductionVariant) -> VariantFleet: ...

    async def plan(self, name: str, variant: ProductionVariant) -> VariantPlan: ...

    def serving(self, name: str) -> EndpointFleet | None: ...

    def route(self, name: str, fleet: EndpointFleet) -> None: ...

    async def retire(self, instances: list[Instance]) -> None: ...

    def deployment_stage(self, name: str, status: str, message: str) -> None: ...

    def rolling_back(self, name: str) -> None: ...

    def firing(self, alarms: Sequence[str]) -> list[str]: ...


@dataclass(frozen=True)
class Outcome:
    """How a deployment ended when it did not raise: the new config serves (`reason` None), or it was
    rolled back (the old one serves) or the rollback failed too (a mixed fleet serves)."""

    reason: str | None = None
    rollback_failed: bool = False


class Watch:
    """The deployment's clock: waits that end early when a rollback alarm fires or time runs out."""

    def __init__(
        self, host: FleetHost, deployment: dp.DeploymentConfig | None, timeout_s: int | None
    ) -> None:
        self._host = host
        self._alarms = deployment.rollback_alarms if deployment else ()
        loop = asyncio.get_running_loop()
        self._deadline = None if timeout_s is None else loop.time() + host.config.real_seconds(timeout_s)
        self._timeout_s = timeout_s

    def problem(self) -> str | None:
        firing = self._host.firing(self._alarms) if self._alarms else []
        if firing:
            return f"alarm {firing[0]} went into ALARM state"
        if self._deadline is not None and asyncio.get_running_loop().time() > self._deadline:
            return f"the deployment exceeded MaximumExecutionTimeoutInSeconds ({self._timeout_s} s)"
        return None

    async def wait(self, policy_seconds: int | None) -> str | None:
        """Wait (policy time), checking alarms and the deadline; the reason to roll back, if any."""
        loop = asyncio.get_running_loop()
        end = loop.time() + self._host.config.real_seconds(policy_seconds or 0)
        while True:
            problem = self.problem()
            if problem is not None or loop.time() >= end:
                return problem
            await asyncio.sleep(min(ALARM_CHECK_S, end - loop.time()))


async def launch_all(
    launch: Callable[[ProductionVariant], Coroutine[Any, Any, VariantFleet]],
    deployer: Deployer,
    variants: Sequence[ProductionVariant],
) -> list[VariantFleet]:
    """Launch every variant at once. When one fails (or the caller is cancelled) the others are
    cancelled, and the variants that had already become healthy are stopped too: a failed launch
    leaves no container behind. Raises the TaskGroup's exception group."""
    tasks: list[asyncio.Task[VariantFleet]] = []
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(launch(v)) for v in variants]
    except BaseException:
        launched = [t.result() for t in tasks if t.done() and not t.cancelled() and t.exception() is None]
        await asyncio.shield(deployer.stop_instances([i for f in launched for i in f.instances]))
        raise
    return [t.result() for t in tasks]


async def blue_green(
    host: FleetHost, name: str, config: EndpointConfig, deployment: dp.DeploymentConfig | None
) -> Outcome:
    """Start the green fleet (a failure raises: the blue fleet keeps serving), shift traffic in the
    policy's steps, bake, then retire the blue fleet."""
    policy = deployment.blue_green if deployment is not None else None
    routing = policy.traffic_routing if policy is not None else dp.TrafficRouting(dp.ALL_AT_ONCE, 0)
    watch = Watch(host, deployment, policy.maximum_execution_timeout_s if policy else None)
    green = EndpointFleet(
        await launch_all(lambda v: host.launch(name, v), host.deployer, config.production_variants)
    )
    blue = host.serving(name)
    total = len(green.all_instances())

    async def roll_back(reason: str) -> Outcome:
        host.rolling_back(name)
        host.deployer.platform_log(name, f"rolling back: {reason}")
        if blue is not None:
            host.route(name, blue)
        await host.retire(green.all_instances())
        return Outcome(reason)

    for share, count in dp.traffic_steps(routing, total):
        if share < 1.0:
            message = f"Activating traffic on canary capacity of {count} instance(s)."
            host.deployment_stage(name, "ActivatingTraffic", message)
            host.deployer.platform_log(name, f"{message} ({share:.0%} of requests)")
            host.route(name, TrafficShift(blue, green, share) if blue is not None else green)
            problem = await watch.wait(routing.wait_interval_s)
            if problem is not None:
                return await roll_back(problem)
            continue
        problem = watch.problem()
        if problem is not None:
            return await roll_back(problem)
        host.route(name, green)  # one assignment: the next request uses the new fleet
        host.deployer.platform_log(name, "traffic shifted to the new fleet")
    termination_wait = policy.termination_wait_s if policy is not None else None
    if termination_wait:
        message = (
            f"Baking for {termination_wait} seconds (TerminationWaitInSeconds) with traffic enabled on "
            f"full capacity of {total} instance(s)."
        )
        host.deployment_stage(name, "Baking", message)
        host.deployer.platform_log(name, message)
        problem = await watch.wait(termination_wait)
        if problem is not None:
            return await roll_back(problem)
    if blue is not None:
        await host.retire(blue.all_instances())
    return Outcome()


async def rolling(
    host: FleetHost, name: str, config: EndpointConfig, deployment: dp.DeploymentConfig
) -> Outcome:
    """Replace each variant's instances in batches: start a batch of new instances (healthy before
    they take traffic), retire a batch of old ones, wait; roll back on an alarm, the timeout or a
    failed start."""
    policy = deployment.rolling
    assert policy is not None
    watch = Watch(host, deployment, policy.maximum_execution_timeout_s)
    blue = host.serving(name)
    assert blue is not None
    done: list[tuple[VariantFleet, list[Instance], list[Instance]]] = []  # (old fleet, new, retired)
    new_fleets: list[VariantFleet] = []
    # Every variant's image and model data are resolved before the first instance changes: a plan
    # that fails raises with the old fleet untouched (the endpoint is InService with a FailureReason).
    plans = [await host.plan(name, variant) for variant in config.production_variants]
    for variant, plan in zip(config.production_variants, plans, strict=True):
        old_fleet = blue.variants[variant.variant_name]
        fresh: list[Instance] = []
        retired: list[Instance] = []
        done.append((old_fleet, fresh, retired))
        remaining = list(old_fleet.instances)
        batches = dp.rolling_batches(
            len(remaining), variant.initial_instance_count, policy.maximum_batch_size
        )
        for start, retire in batches:
            problem: str | None = None
            if start:
                try:
                    started = await host.deployer.start_healthy(plan, start)
                except Exception as exc:  # noqa: BLE001 - a failed batch rolls the deployment back
                    problem = f"a new instance of variant {variant.variant_name} failed: {exc}"
                else:
                    old_fleet.add(started)
                    fresh.extend(started)
            if problem is None and retire:
                victims, remaining = remaining[:retire], remaining[retire:]
                old_fleet.remove(victims)
                retired.extend(victims)
                await host.retire(victims)
            message = (
                f"Rolling {variant.variant_name}: {len(fresh)} new, {len(remaining)} old instance(s) serve."
            )
            host.deployment_stage(name, "Updating", message)
            host.deployer.platform_log(name, message)
            if problem is None:
                problem = await watch.wait(policy.wait_interval_s)
            if problem is not None:
                return await _roll_back_rolling(host, name, done, problem)
        fleet = host.deployer.fleet_of(plan, fresh)
        fleet.weight = old_fleet.weight
        new_fleets.append(fleet)
    host.route(name, EndpointFleet(new_fleets))
    return Outcome()


async def _roll_back_rolling(
    host: FleetHost, name: str, done: list[tuple[VariantFleet, list[Instance], list[Instance]]], reason: str
) -> Outcome:
    """Start old-config instances for the ones retired (all at once), then retire the new ones."""
    host.rolling_back(name)
    host.deployer.platform_log(name, f"rolling back: {reason}")
    for old_fleet, fresh, retired in done:
        if retired:
            assert old_fleet.plan is not None
            try:
                restored = await host.deployer.start_healthy(old_fleet.plan, len(retired))
            except Exception as exc:  # noqa: BLE001 - the rollback failed: a mixed fleet keeps serving
                return Outcome(f"{reason}; the rollback failed too: {exc}", rollback_failed=True)
            old_fleet.add(restored)
        old_fleet.remove(fresh)
        await host.retire(fresh)
    return Outcome(reason)


def pending_summary(config: EndpointConfig, now: datetime) -> PendingDeployment:
    """DescribeEndpoint's PendingDeploymentSummary when a deployment of `config` starts."""
    return PendingDeployment(
        config.name,
        now,
        tuple(
            VariantSummary(
                variant_name=v.variant_name,
                current_weight=0.0,
                desired_weight=v.initial_variant_weight,
                current_instance_count=0,
                desired_instance_count=v.initial_instance_count,
                statuses=(
                    VariantStatus("Creating", f"Launching {v.initial_instance_count} instance(s).", now),
                ),
                instance_type=v.instance_type,
            )
            for v in config.production_variants
        ),
    )
