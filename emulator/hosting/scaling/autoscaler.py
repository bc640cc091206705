"""Application Auto Scaling for endpoint variants: targets, policies, activities and the alarm clock.

Targets and policies are records in `ScalingRegistry`; this module registers targets against live
endpoints, keeps the scaling activities, and scales. A background task wakes just after each metric period
closes, reads the period's datapoints from `Metrics` as CloudWatch alarms would, and scales through
UpdateEndpointWeightsAndCapacities, recording a scaling activity for each change (shared/spec/
hosting-contract.md §9; decisions in emulator.model.scaling; docs/autoscaling.md).

Policy time (metric periods, alarm windows, cooldowns) runs `ServerConfig.time_scale` times faster
than the wall clock; timestamps shown to clients are wall-clock times.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from emulator.config import ServerConfig
from emulator.errors import ResourceNotFound, SmlocalError, ValidationFailed
from emulator.hosting.endpoints.service import HostingService
from emulator.hosting.monitoring.store import Metrics
from emulator.hosting.scaling import store as scaling_store
from emulator.hosting.scaling.registry import ScalingRegistry, variant_of
from emulator.model import alarms as al
from emulator.model import messages
from emulator.model import scaling as sc
from emulator.model.resources import EndpointConfig, EndpointStatus

log = logging.getLogger(__name__)

ACTIVITIES_KEPT = 1000  # per target, in memory (the newest 100 are persisted)


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class _TargetState:
    """Clocks of one target (monotonic wall seconds), not shown to clients."""

    scale_out_at: float | None = None  # when the last scale-out activity ended
    scale_out_cooldown_s: float = 0.0
    scale_out_from: int = 0  # the capacity before the last scale-out
    scale_in_at: float | None = None
    scale_in_cooldown_s: float = 0.0
    action: asyncio.Task[None] | None = None
    last_not_scaled: str | None = None  # the reason code of the newest not-scaled activity
    range_changed: bool = False  # registered (again): the capacity is to be brought into range
    activities: list[sc.ScalingActivity] = field(default_factory=list)  # oldest first


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
        self._wall = wall
        self._monotonic = monotonic
        self.registry = ScalingRegistry(
            sc.ScalingArns(config.region, config.account_id), wall, metrics.period_index, self._persist
        )
        self._state: dict[sc.TargetKey, _TargetState] = {}
        self._task: asyncio.Task[None] | None = None
        self._path = config.state_dir / "autoscaling.json"
        service.deletion_listeners.append(self._endpoint_deleted)
        service.update_guards.append(self._guard_update)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        snapshot = scaling_store.load(self._path)
        self.registry.load(snapshot.targets, snapshot.policies)
        for activity in snapshot.activities:
            self._target_state(activity.key).activities.append(activity)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="autoscaler")

    async def close(self) -> None:
        tasks = [s.action for s in self._state.values() if s.action is not None]
        if self._task is not None:
            tasks.append(self._task)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task = None

    def _persist(self) -> None:
        activities = [a for s in self._state.values() for a in s.activities[-100:]]
        scaling_store.save(
            self._path,
            scaling_store.Snapshot(
                list(self.registry.targets.values()), list(self.registry.policies.values()), activities
            ),
        )

    def _target_state(self, key: sc.TargetKey) -> _TargetState:
        state = self._state.get(key)
        if state is None:
            state = self._state[key] = _TargetState()
        return state

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
        ref = variant_of(key)
        current = self._capacity(ref, registering=True)
        target = self.registry.put_target(key, min_capacity, max_capacity, role_arn, suspended, tags)
        self._target_state(key).range_changed = True
        self._enforce_range(target, ref, current)
        return target

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

    def managed_alarms(self) -> list[tuple[al.AlarmSpec, str]]:
        """The two alarms of each target tracking policy as CloudWatch would show them (spec, ARN):
        metric > target for 3 of 3 periods, metric < 90 % of target for 15 of 15."""
        out: list[tuple[al.AlarmSpec, str]] = []
        for policy in self.registry.policies.values():
            config = policy.target_tracking
            if config is None or len(policy.alarms) < 2:
                continue
            ref = variant_of(policy.key)
            custom = config.customized_metric
            if custom is None:
                dims = (("EndpointName", ref.endpoint), ("VariantName", ref.variant))
                metric, statistic, unit = (
                    al.Metric("AWS/SageMaker", "InvocationsPerInstance", dims),
                    "Sum",
                    None,
                )
            else:
                metric = al.Metric(custom.namespace, custom.metric_name, custom.dimensions)
                statistic, unit = custom.statistic, custom.unit
            description = f"DO NOT EDIT OR DELETE. For TargetTrackingScaling policy {policy.arn}."
            high, low = policy.alarms[0], policy.alarms[1]
            for alarm, periods, threshold, comparison in (
                (high, sc.SCALE_OUT_DATAPOINTS, config.target_value, al.Comparison.GT),
                (low, sc.SCALE_IN_DATAPOINTS, config.target_value * sc.SCALE_IN_RATIO, al.Comparison.LT),
            ):
                spec = al.AlarmSpec(
                    name=alarm.name,
                    metric=metric,
                    statistic=statistic,
                    period=int(self.config.metrics_period_s),
                    evaluation_periods=periods,
                    threshold=threshold,
                    comparison=comparison,
                    datapoints_to_alarm=periods,
                    unit=unit,
                    description=description,
                    alarm_actions=(policy.arn,),
                )
                out.append((spec, alarm.arn))
        return out

    # ------------------------------------------------------------------ activities

    def describe_scaling_activities(
        self, namespace: str, resource_id: str | None, dimension: str | None, include_not_scaled: bool
    ) -> list[sc.ScalingActivity]:
        """Newest first, as Application Auto Scaling lists them."""
        found = [
            a
            for key, state in self._state.items()
            if key.namespace == namespace
            and (resource_id is None or key.resource_id == resource_id)
            and (dimension is None or key.dimension == dimension)
            for a in state.activities
            if include_not_scaled or not a.not_scaled_reasons
        ]
        return sorted(found, key=lambda a: a.start_time, reverse=True)

    # ------------------------------------------------------------------ the alarm clock

    async def _run(self) -> None:
        await self.metrics.after_each_period(self.evaluate, "autoscaling evaluation")

    def evaluate(self) -> None:
        """Evaluate every target's tracking policies on the periods closed so far (once per period)."""
        last = self.metrics.period_index() - 1
        for key, target in list(self.registry.targets.items()):
            try:
                live = self._live(key, target)
                if live is not None:
                    self._evaluate_tracking(target, *live, last)
            except Exception:  # noqa: BLE001 - one target's failure must not stop the others
                log.exception("autoscaling evaluation of %s failed", key.resource_id)

    def _live(
        self, key: sc.TargetKey, target: sc.ScalableTarget
    ) -> tuple[sc.VariantRef, _TargetState, int] | None:
        """The target's variant, state and capacity when it may scale now (no activity running, the
        endpoint InService, the capacity within range), else None."""
        state = self._target_state(key)
        if state.action is not None and not state.action.done():
            return None  # one scaling activity at a time per target
        ref = variant_of(key)
        try:
            current = self._capacity(ref)
        except (ResourceNotFound, ValidationFailed):
            return None  # not InService now (an update or a deletion under way)
        if self._enforce_range(target, ref, current):
            return None
        return ref, state, current

    def _evaluate_tracking(
        self, target: sc.ScalableTarget, ref: sc.VariantRef, state: _TargetState, current: int, last: int
    ) -> None:
        verdicts: list[tuple[sc.ScalingPolicy, sc.TargetTracking, sc.TrackingVerdict]] = []
        for policy, first in self.registry.policies_of(target.key):
            config = policy.target_tracking
            if config is None:
                continue
            indexes = range(max(first, last - sc.SCALE_IN_DATAPOINTS + 1), last + 1)
            points = [self._datapoint(ref, config, i) for i in indexes]
            verdicts.append((policy, config, sc.evaluate_tracking(config, policy.alarms, points, current)))
        outs = [v for v in verdicts if v[2].direction == "out"]
        if outs:
            if target.suspended.scale_out:
                return
            policy, config, verdict = max(outs, key=lambda v: v[2].capacity)
            assert verdict.metric is not None
            # During the scale-out cooldown the capacity the last scale-out added counts: scale out
            # again only if the metric asks for more than that, reckoned from the capacity before it.
            if self._cooling(state, "out") and (
                sc.tracking_capacity(state.scale_out_from, verdict.metric, config.target_value) <= current
            ):
                return
            self._decide(
                target,
                ref,
                state,
                current,
                verdict.capacity,
                _cause(verdict.alarm, policy),
                config.effective_scale_out_cooldown,
            )
            return
        ins = [v for v in verdicts if v[2].direction == "in"]
        may_scale_in = [v for v in verdicts if not v[1].disable_scale_in]
        if (
            not ins
            or len(ins) != len(may_scale_in)
            or target.suspended.scale_in
            or self._cooling(state, "in")
        ):
            return  # scale in only when every policy that may scale in agrees, outside the cooldown
        policy, config, verdict = max(ins, key=lambda v: v[2].capacity)
        self._decide(
            target,
            ref,
            state,
            current,
            verdict.capacity,
            _cause(verdict.alarm, policy),
            config.effective_scale_in_cooldown,
        )

    def alarm_fired(
        self, policy_arn: str, alarm_name: str, metric: float, threshold: float, alarm_state: str = "ALARM"
    ) -> bool:
        """A CloudWatch alarm in ALARM invokes a step scaling policy (once per evaluation period while
        it stays in ALARM, as alarms with Application Auto Scaling actions do). The step whose
        interval, relative to the threshold, holds the metric sets the capacity. False when the ARN
        names no step scaling policy."""
        policy = self.registry.policy_by_arn(policy_arn)
        if policy is None or policy.step_scaling is None:
            return False
        target = self.registry.targets.get(policy.key)
        live = None if target is None else self._live(policy.key, target)
        if target is None or live is None:
            return True
        ref, state, current = live
        config = policy.step_scaling
        wanted = sc.step_capacity(config, current, metric, threshold)
        if wanted is None or wanted == current:
            return True
        direction = "out" if wanted > current else "in"
        if target.suspended.scale_out if direction == "out" else target.suspended.scale_in:
            return True
        if self._cooling(state, direction):
            if direction == "in":
                return True
            # a scale-out in the cooldown only adds what exceeds the last scale-out's capacity
            from_before = sc.step_capacity(config, state.scale_out_from, metric, threshold)
            if from_before is None or from_before <= current:
                return True
            wanted = from_before
        cooldown = sc.DEFAULT_COOLDOWN_S if config.cooldown is None else config.cooldown
        cause = f"monitor alarm {alarm_name} in state {alarm_state} triggered policy {policy.name}"
        self._decide(target, ref, state, current, wanted, cause, cooldown)
        return True

    def _cooling(self, state: _TargetState, direction: str) -> bool:
        now = self._monotonic()
        if direction == "out":
            return state.scale_out_at is not None and now < state.scale_out_at + state.scale_out_cooldown_s
        return state.scale_in_at is not None and now < state.scale_in_at + state.scale_in_cooldown_s

    def _decide(
        self,
        target: sc.ScalableTarget,
        ref: sc.VariantRef,
        state: _TargetState,
        current: int,
        wanted: int,
        cause: str,
        cooldown: int,
    ) -> None:
        """Scale to `wanted` within the target's range, or record why not (once per reason)."""
        capacity = self._bounded(target, wanted)
        if capacity == current:
            reason = sc.not_scaled(wanted, current, target)
            if reason is not None and state.last_not_scaled != reason.code:
                state.last_not_scaled = reason.code
                self._record_not_scaled(target.key, wanted, cause, reason)
            return
        direction = "out" if capacity > current else "in"
        if direction == "out":
            state.scale_out_from = current
        self._act(target.key, ref, capacity, cause, direction, self.config.real_seconds(cooldown))

    def _bounded(self, target: sc.ScalableTarget, capacity: int) -> int:
        # [U] smlocal keeps at least one instance per variant (no scale-to-zero yet)
        return max(sc.clamp(capacity, target), 1)

    def _datapoint(self, ref: sc.VariantRef, config: sc.TargetTracking, index: int) -> float | None:
        custom = config.customized_metric
        if custom is None:
            return self.metrics.datapoint(ref.endpoint, ref.variant, "InvocationsPerInstance", "Sum", index)
        dims = dict(custom.dimensions)
        return self.metrics.datapoint(
            dims["EndpointName"], dims["VariantName"], custom.metric_name, custom.statistic, index
        )

    def _capacity(self, ref: sc.VariantRef, registering: bool = False) -> int:
        """The variant's desired instance count; ValidationFailed unless the endpoint is InService."""
        try:
            endpoint = self.service.describe_endpoint(ref.endpoint)
        except ResourceNotFound as exc:
            raise ValidationFailed(messages.scaling_endpoint_not_found(ref.endpoint)) from exc
        if endpoint.name != ref.endpoint:
            raise ValidationFailed(messages.scaling_endpoint_not_found(ref.endpoint))
        variant = next((v for v in endpoint.production_variants if v.variant_name == ref.variant), None)
        if variant is None:
            raise ValidationFailed(messages.scaling_variant_not_found(ref.variant, ref.endpoint))
        if endpoint.status is not EndpointStatus.IN_SERVICE:
            if registering:
                raise ValidationFailed(messages.endpoint_not_in_service(ref.endpoint, endpoint.status.value))
            raise ValidationFailed("not InService")
        count = variant.desired_instance_count
        return variant.current_instance_count if count is None else count

    def _enforce_range(self, target: sc.ScalableTarget, ref: sc.VariantRef, current: int) -> bool:
        """After RegisterScalableTarget, a capacity outside [MinCapacity, MaxCapacity] is brought
        inside at once (or as soon as the running activity ends). Manual changes later are left
        alone until a policy acts [U]."""
        state = self._target_state(target.key)
        if not state.range_changed or (state.action is not None and not state.action.done()):
            return False
        state.range_changed = False
        capacity = self._bounded(target, current)
        if capacity == current:
            return False
        if capacity > current:
            cause = f"minimum capacity was set to {target.min_capacity}"
        else:
            cause = f"maximum capacity was set to {target.max_capacity}"
        self._act(target.key, ref, capacity, cause, None, 0.0)
        return True

    # ------------------------------------------------------------------ scaling activities

    def _record_not_scaled(
        self, key: sc.TargetKey, wanted: int, cause: str, reason: sc.NotScaledReason
    ) -> None:
        now = self._wall()
        self._append(
            sc.ScalingActivity(
                activity_id=str(uuid.uuid4()),
                key=key,
                description=f"Setting desired instance count to {wanted}.",
                cause=cause,
                start_time=now,
                end_time=now,
                status=sc.ActivityStatus.FAILED,
                status_message=f"Failed to set desired instance count to {wanted}",
                not_scaled_reasons=(reason,),
            )
        )

    def _append(self, activity: sc.ScalingActivity) -> None:
        activities = self._target_state(activity.key).activities
        activities.append(activity)
        del activities[:-ACTIVITIES_KEPT]
        self._persist()

    def _replace_activity(self, activity: sc.ScalingActivity) -> None:
        activities = self._target_state(activity.key).activities
        for i, a in enumerate(activities):
            if a.activity_id == activity.activity_id:
                activities[i] = activity
        self._persist()

    def _act(
        self,
        key: sc.TargetKey,
        ref: sc.VariantRef,
        capacity: int,
        cause: str,
        direction: str | None,
        cooldown_s: float,
    ) -> None:
        state = self._target_state(key)
        state.last_not_scaled = None
        activity = sc.ScalingActivity(
            activity_id=str(uuid.uuid4()),
            key=key,
            description=f"Setting desired instance count to {capacity}.",
            cause=cause,
            start_time=self._wall(),
            status=sc.ActivityStatus.IN_PROGRESS,
        )
        self._append(activity)
        self.service.deployer.platform_log(
            ref.endpoint, f"autoscaling: {ref.variant}: {activity.description} ({cause})"
        )
        state.action = asyncio.ensure_future(self._scale(activity, ref, capacity, direction, cooldown_s))

    async def _scale(
        self,
        activity: sc.ScalingActivity,
        ref: sc.VariantRef,
        capacity: int,
        direction: str | None,
        cooldown_s: float,
    ) -> None:
        state = self._target_state(activity.key)
        failure: str | None = None
        try:
            self.service.update_endpoint_weights_and_capacities(
                ref.endpoint, ((ref.variant, None, capacity),)
            )
            await self.service.settled(ref.endpoint)
            endpoint = self.service.describe_endpoint(ref.endpoint)
            failure = endpoint.failure_reason
        except SmlocalError as exc:
            failure = exc.message
        if failure is None:
            status = sc.ActivityStatus.SUCCESSFUL
            message = (
                f"Successfully set desired instance count to {capacity}. "
                "Change successfully fulfilled by sagemaker."
            )
            self.metrics.set_instances(ref.endpoint, ref.variant, capacity)
        else:
            status = sc.ActivityStatus.FAILED
            message = f"Failed to set desired instance count to {capacity}. Reason: {failure}"
        self._replace_activity(
            dataclasses.replace(activity, status=status, status_message=message, end_time=self._wall())
        )
        now = self._monotonic()
        if direction == "out":
            state.scale_out_at, state.scale_out_cooldown_s = now, cooldown_s
            state.scale_in_at = None  # a scale-out ends the scale-in cooldown
        elif direction == "in":
            state.scale_in_at, state.scale_in_cooldown_s = now, cooldown_s


def _cause(alarm: sc.Alarm | None, policy: sc.ScalingPolicy) -> str:
    name = alarm.name if alarm is not None else "(none)"
    return f"monitor alarm {name} in state ALARM triggered policy {policy.name}"
