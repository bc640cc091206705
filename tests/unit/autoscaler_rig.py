"""A rig for AutoScaler's decisions: a real Metrics on a fake clock, a stub HostingService with one
endpoint variant whose capacity updates finish when the test says so, and fake wall/monotonic clocks
(both read the same fake epoch seconds, so cooldowns count in the test's time)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import cast

from emulator.config import ServerConfig
from emulator.errors import ResourceNotFound, SmlocalError
from emulator.hosting.endpoints.service import HostingService
from emulator.hosting.monitoring.store import OK, Metrics
from emulator.hosting.scaling.autoscaler import AutoScaler
from emulator.model import scaling as sc
from emulator.model.resources import Endpoint, EndpointStatus, VariantSummary

T0 = 1_800_000_000.0  # a period boundary (30_000_000 x 60)
EP, VARIANT = "ep", "AllTraffic"
KEY = sc.TargetKey(sc.SERVICE_NAMESPACE, f"endpoint/{EP}/variant/{VARIANT}", sc.VARIANT_DIMENSION)


class StubDeployer:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def platform_log(self, name: str, line: str) -> None:
        self.lines.append((name, line))


class StubAsync:
    """HostingService.async_inference as the autoscaler asks it: is the endpoint asynchronous?"""

    def __init__(self) -> None:
        self.asynchronous = False

    def is_async(self, name: str) -> bool:
        return self.asynchronous


class StubService:
    """What AutoScaler uses of HostingService, for one endpoint with one variant."""

    def __init__(self, count: int) -> None:
        self.status = EndpointStatus.IN_SERVICE
        self.current = count
        self.desired: int | None = None
        self.failure_reason: str | None = None
        self.raise_on_update: SmlocalError | None = None
        self.calls: list[tuple[str, tuple[tuple[str, float | None, int | None], ...]]] = []
        self.deployer = StubDeployer()
        self.async_inference = StubAsync()
        self.deletion_listeners: list = []
        self.component_deletion_listeners: list = []
        self.update_guards: list = []
        self._done = asyncio.Event()  # set: no update under way
        self._done.set()

    def describe_endpoint(self, name: str) -> Endpoint:
        if name.lower() != EP:
            raise ResourceNotFound(f"Could not find endpoint {name}.")
        desired = self.current if self.desired is None else self.desired
        summary = VariantSummary(VARIANT, 1.0, 1.0, self.current, desired)
        when = datetime.fromtimestamp(T0, UTC)
        return Endpoint(
            EP, f"arn:aws:sagemaker:us-east-1:123456789012:endpoint/{EP}", "cfg", self.status, when, when,
            failure_reason=self.failure_reason, production_variants=(summary,),
        )  # fmt: skip

    def update_endpoint_weights_and_capacities(
        self, name: str, desired: tuple[tuple[str, float | None, int | None], ...]
    ) -> None:
        self.calls.append((name, desired))
        if self.raise_on_update is not None:
            raise self.raise_on_update
        self.desired = desired[0][2]
        self.status, self.failure_reason = EndpointStatus.UPDATING, None
        self._done = asyncio.Event()

    async def settled(self, name: str) -> None:
        await self._done.wait()

    def finish(self, failure: str | None = None) -> None:
        """The running update ends: InService again, at the desired count unless it failed."""
        assert not self._done.is_set(), "no update under way"
        if failure is None and self.desired is not None:
            self.current = self.desired
        self.desired = None
        self.status, self.failure_reason = EndpointStatus.IN_SERVICE, failure
        self._done.set()


class Rig:
    def __init__(self, state_dir: Path, count: int = 1) -> None:
        self.now = T0 + 1.0
        self._stamps = 0
        self.service = StubService(count)
        self.metrics = Metrics(period_s=60.0, clock=lambda: self.now)
        self.metrics.set_instances(EP, VARIANT, count)
        config = ServerConfig(state_dir=state_dir, time_scale=1.0)
        self.scaler = AutoScaler(
            config,
            cast(HostingService, self.service),
            self.metrics,
            wall=self._wall,
            monotonic=lambda: self.now,
        )

    def _wall(self) -> datetime:
        self._stamps += 1  # strictly increasing, so activities of one instant keep their order
        return datetime.fromtimestamp(self.now, UTC) + timedelta(microseconds=self._stamps)

    def register(self, lo: int, hi: int, suspended: sc.Suspended | None = None) -> sc.ScalableTarget:
        return self.scaler.register_scalable_target(KEY, lo, hi, None, suspended, ())

    def tracking(self, name: str = "track", target: float = 10.0, **options: object) -> sc.ScalingPolicy:
        metric = None if "customized_metric" in options else sc.INVOCATIONS_PER_INSTANCE
        config = sc.TargetTracking(target, predefined_metric=metric, **options)  # type: ignore[arg-type]
        return self.scaler.registry.put_scaling_policy(name, KEY, sc.PolicyType.TARGET_TRACKING, config, None)

    def step(
        self, name: str, *steps: tuple[float | None, float | None, int], **options: object
    ) -> sc.ScalingPolicy:
        adjustments = tuple(sc.StepAdjustment(*s) for s in steps)
        config = sc.StepScaling(step_adjustments=adjustments, **options)  # type: ignore[arg-type]
        return self.scaler.registry.put_scaling_policy(name, KEY, sc.PolicyType.STEP, None, config)

    async def tick(self, requests: int = 0, periods: int = 1) -> None:
        """`requests` requests in each of `periods` periods, evaluating just after each one closes."""
        for _ in range(periods):
            for _ in range(requests):
                self.metrics.record(EP, VARIANT, OK, 0.01, 0.02)
            self.now = (self.metrics.period_index() + 1) * 60.0 + 1.0
            self.scaler.evaluate()
            await self.settle()

    async def fire(self, policy: sc.ScalingPolicy, alarm: str, metric: float, threshold: float) -> bool:
        fired = self.scaler.alarm_fired(policy.arn, alarm, metric, threshold)
        await self.settle()
        return fired

    @staticmethod
    async def settle() -> None:
        """Let a scaling activity just started call UpdateEndpointWeightsAndCapacities (no time passes)."""
        for _ in range(3):
            await asyncio.sleep(0)

    async def finish(self, failure: str | None = None) -> None:
        """End the running update and let the scaling activity record its outcome."""
        self.service.finish(failure)
        await self.drain()

    async def drain(self) -> None:
        others = asyncio.all_tasks() - {asyncio.current_task()}
        await asyncio.gather(*others)

    def activities(self, include_not_scaled: bool = False) -> list[sc.ScalingActivity]:
        """Oldest first."""
        found = self.scaler.describe_scaling_activities(sc.SERVICE_NAMESPACE, None, None, include_not_scaled)
        return found[::-1]

    def descriptions(self) -> list[str]:
        return [a.description for a in self.activities(True)]

    def counts(self) -> list[int | None]:
        """The instance counts AutoScaler asked for, in order."""
        return [desired[0][2] for _, desired in self.service.calls]


def ok(n: int) -> str:
    return f"Successfully set desired instance count to {n}. Change successfully fulfilled by sagemaker."


def alarm_cause(policy: sc.ScalingPolicy, high: bool = True, state: str = "ALARM") -> str:
    name = policy.alarms[0 if high else 1].name
    return f"monitor alarm {name} in state {state} triggered policy {policy.name}"
