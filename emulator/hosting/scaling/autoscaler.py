"""Application Auto Scaling for endpoint variants and inference components: the facade the wire, the
app and the alarms use.

Targets and policies are records in `ScalingRegistry`; this module registers targets against live
endpoints, persists autoscaling.json, and runs the alarm clock: a background task wakes just after each
metric period closes and evaluates each target's target tracking policies (tracking.py); a CloudWatch
alarm invokes step scaling policies (step.py); either scales through UpdateEndpointWeightsAndCapacities,
recording a scaling activity for each change (actuator.py, target_state.py; shared/spec/
hosting-contract.md §9; decisions in emulator.model.scaling; docs/autoscaling.md).

Policy time (metric periods, alarm windows, cooldowns) runs `ServerConfig.time_scale` times faster
than the wall clock; timestamps shown to clients are wall-clock times.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime

from emulator.config import ServerConfig
from emulator.errors import ValidationFailed
from emulator.hosting.endpoints.service import HostingService
from emulator.hosting.monitoring.store import Metrics
from emulator.hosting.scaling import store as scaling_store
from emulator.hosting.scaling.actuator import Actuator
from emulator.hosting.scaling.registry import ScalingRegistry, resource_of, variant_of
from emulator.hosting.scaling.step import StepScaler
from emulator.hosting.scaling.target_state import TargetStates
from emulator.hosting.scaling.tracking import TargetTracker
from emulator.model import alarms as al
from emulator.model import messages
from emulator.model import scaling as sc
from emulator.model.resources import EndpointConfig

log = logging.getLogger(__name__)


def _now() -> datetime:
    return datetime.now(UTC)


class AutoScaler:
    def __init__(
        self,
        config: ServerConfig,
        service: HostingService,
        metrics: Metrics,
        wall: Callable[[], datetime] = _now,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.service = service
        self.metrics = metrics
        self.registry = ScalingRegistry(
            sc.ScalingArns(config.region, config.account_id), wall, metrics.period_index, self._persist
        )
        self._states = TargetStates(wall, self._persist)
        self._actuator = Actuator(config, service, metrics, self._states, wall, monotonic)
        self._tracker = TargetTracker(config, self.registry, metrics, self._actuator)
        self._steps = StepScaler(self.registry, self._actuator)
        self._task: asyncio.Task[None] | None = None
        self._path = config.state_dir / "autoscaling.json"
        service.deletion_listeners.append(self._endpoint_deleted)
        service.component_deletion_listeners.append(self._component_deleted)
        service.update_guards.append(self._guard_update)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        snapshot = scaling_store.load(self._path)
        self.registry.load(snapshot.targets, snapshot.policies)
        self._states.load(snapshot.activities)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="autoscaler")

    async def close(self) -> None:
        tasks = self._states.actions()
        if self._task is not None:
            tasks.append(self._task)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task = None

    def _persist(self) -> None:
        activities = self._states.persisted()
        scaling_store.save(
            self._path,
            scaling_store.Snapshot(
                list(self.registry.targets.values()), list(self.registry.policies.values()), activities
            ),
        )

    # ------------------------------------------------------------------ targets on live endpoints

    def register_scalable_target(
        self,
        key: sc.TargetKey,
        min_capacity: int | None,
        max_capacity: int | None,
        role_arn: str | None,
        suspended: sc.Suspended | None,
        tags: tuple[tuple[str, str], ...],
    ) -> sc.ScalableTarget:
        """Register (or change) a target; a capacity outside the new range is brought inside at once."""
        ref = resource_of(key)
        current = self._actuator.capacity(key, registering=True)
        if key.dimension == sc.PROVISIONED_CONCURRENCY_DIMENSION:
            self._check_provisioned_range(key, variant_of(key), min_capacity, max_capacity)
        target = self.registry.put_target(key, min_capacity, max_capacity, role_arn, suspended, tags)
        self._states.of(key).range_changed = True
        self._actuator.enforce_range(target, ref, current)
        return target

    def _check_provisioned_range(
        self, key: sc.TargetKey, ref: sc.VariantRef, min_capacity: int | None, max_capacity: int | None
    ) -> None:
        """A ProvisionedConcurrency stays within 1..MaxConcurrency (spec §7) [U: refused at
        registration rather than failing each scaling activity]."""
        existing = self.registry.targets.get(key)
        low = min_capacity if min_capacity is not None else existing.min_capacity if existing else None
        high = max_capacity if max_capacity is not None else existing.max_capacity if existing else None
        if low is None or high is None:
            return  # the registry asks for both
        limit = self._actuator.max_concurrency(key)
        if low < 1 or high > limit:
            raise ValidationFailed(messages.provisioned_capacity_range(ref.variant, limit, low, high))

    def deregister_scalable_target(self, key: sc.TargetKey) -> None:
        self.registry.target(key)
        self._drop(key)

    def _drop(self, key: sc.TargetKey) -> None:
        """An activity under way finishes and is recorded (only shutdown cancels one)."""
        self.registry.drop(key)

    def _guard_update(self, endpoint: str, current: EndpointConfig | None, new: EndpointConfig) -> None:
        """UpdateEndpoint may change an autoscaled variant's model, not remove it or change its
        instance type, until the variant is deregistered (spec §6.4)."""
        old_types = {v.variant_name: v.instance_type for v in current.production_variants} if current else {}
        new_types = {v.variant_name: v.instance_type for v in new.production_variants}
        for key in self.registry.keys_of_endpoint(endpoint):
            variant = variant_of(key).variant
            if variant not in new_types or (
                variant in old_types and old_types[variant] != new_types[variant]
            ):
                raise ValidationFailed(messages.autoscaled_variant_update(variant, endpoint))

    def _endpoint_deleted(self, endpoint: str) -> None:
        """DeleteEndpoint deregisters the endpoint's targets (spec §9)."""
        for key in self.registry.keys_of_endpoint(endpoint):
            self._drop(key)

    def _component_deleted(self, component: str) -> None:
        """DeleteInferenceComponent deregisters the component's targets (as DeleteEndpoint does a
        variant's)."""
        for key in self.registry.keys_of_component(component):
            self._drop(key)

    def managed_alarms(self) -> list[tuple[al.AlarmSpec, str]]:
        """The two alarms of each target tracking policy as CloudWatch would show them (spec, ARN)."""
        return self._tracker.managed_alarms()

    # ------------------------------------------------------------------ activities

    def describe_scaling_activities(
        self, namespace: str, resource_id: str | None, dimension: str | None, include_not_scaled: bool
    ) -> list[sc.ScalingActivity]:
        """Newest first, as Application Auto Scaling lists them."""
        return self._states.describe(namespace, resource_id, dimension, include_not_scaled)

    # ------------------------------------------------------------------ the alarm clock

    async def _run(self) -> None:
        await self.metrics.after_each_period(self.evaluate, "autoscaling evaluation")

    def evaluate(self) -> None:
        """Evaluate every target's tracking policies on the periods closed so far (once per period)."""
        last = self.metrics.period_index() - 1
        for key, target in list(self.registry.targets.items()):
            try:
                live = self._actuator.live(key, target)
                if live is not None:
                    self._tracker.evaluate(target, *live, last)
            except Exception:  # noqa: BLE001 - one target's failure must not stop the others
                log.exception("autoscaling evaluation of %s failed", key.resource_id)

    def alarm_fired(
        self, policy_arn: str, alarm_name: str, metric: float, threshold: float, alarm_state: str = "ALARM"
    ) -> bool:
        """A CloudWatch alarm in ALARM invokes a step scaling policy (StepScaler.alarm_fired). False
        when the ARN names no step scaling policy."""
        return self._steps.alarm_fired(policy_arn, alarm_name, metric, threshold, alarm_state)
