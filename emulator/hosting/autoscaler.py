"""Application Auto Scaling for endpoint variants: targets, policies, activities and the alarm clock.

The control-plane calls (Register/Deregister/Describe targets, Put/Delete/Describe policies,
Describe activities) change registries here. A background task wakes just after each metric period
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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from emulator.config import ServerConfig
from emulator.errors import ObjectNotFound, ResourceNotFound, SmlocalError, ValidationFailed
from emulator.hosting import scaling_store
from emulator.hosting.metrics import COUNT_METRICS, METRICS, Metrics
from emulator.hosting.service import HostingService
from emulator.model import messages
from emulator.model import scaling as sc
from emulator.model.resources import EndpointStatus

log = logging.getLogger(__name__)

ACTIVITIES_KEPT = 1000  # per target
SUPPORTED_PREDEFINED = (sc.INVOCATIONS_PER_INSTANCE,)


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
        self.arns = sc.ScalingArns(config.region, config.account_id)
        self._wall = wall
        self._monotonic = monotonic
        self.targets: dict[sc.TargetKey, sc.ScalableTarget] = {}
        self.policies: dict[tuple[sc.TargetKey, str], sc.ScalingPolicy] = {}
        #: the first metric period each policy's alarms read (the first full period after it was put)
        self._first_period: dict[tuple[sc.TargetKey, str], int] = {}
        self._state: dict[sc.TargetKey, _TargetState] = {}
        self._task: asyncio.Task[None] | None = None
        self._path = config.state_dir / "autoscaling.json"
        service.deletion_listeners.append(self._endpoint_deleted)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        snapshot = scaling_store.load(self._path)
        index = self.metrics.period_index()
        for target in snapshot.targets:
            self.targets[target.key] = target
        for policy in snapshot.policies:
            self.policies[(policy.key, policy.name)] = policy
            self._first_period[(policy.key, policy.name)] = index + 1
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
            scaling_store.Snapshot(list(self.targets.values()), list(self.policies.values()), activities),
        )

    def _target_state(self, key: sc.TargetKey) -> _TargetState:
        state = self._state.get(key)
        if state is None:
            state = self._state[key] = _TargetState()
        return state

    # ------------------------------------------------------------------ scalable targets

    def _variant(self, key: sc.TargetKey) -> sc.VariantRef:
        ref = sc.parse_resource_id(key.resource_id)
        if key.namespace != sc.SERVICE_NAMESPACE or key.dimension != sc.VARIANT_DIMENSION or ref is None:
            raise ValidationFailed(messages.unsupported_scalable_target())
        return ref

    def register_scalable_target(
        self,
        key: sc.TargetKey,
        min_capacity: int | None,
        max_capacity: int | None,
        role_arn: str | None,
        suspended: sc.Suspended | None,
        tags: tuple[tuple[str, str], ...],
    ) -> sc.ScalableTarget:
        ref = self._variant(key)
        current = self._capacity(ref, registering=True)
        existing = self.targets.get(key)
        if existing is None:
            if min_capacity is None or max_capacity is None:
                raise ValidationFailed(messages.capacities_required())
            target = sc.ScalableTarget(
                key=key,
                arn=self.arns.scalable_target(uuid.uuid4().hex),
                min_capacity=min_capacity,
                max_capacity=max_capacity,
                role_arn=role_arn or self.arns.service_linked_role(),
                creation_time=self._wall(),
                suspended=suspended or sc.Suspended(),
                tags=tags,
            )
        else:
            target = dataclasses.replace(
                existing,
                min_capacity=existing.min_capacity if min_capacity is None else min_capacity,
                max_capacity=existing.max_capacity if max_capacity is None else max_capacity,
                suspended=existing.suspended if suspended is None else suspended,
            )
        if target.min_capacity > target.max_capacity:
            raise ValidationFailed(messages.min_above_max())
        self.targets[key] = target
        self._persist()
        self._enforce_range(target, ref, current)
        return target

    def deregister_scalable_target(self, key: sc.TargetKey) -> None:
        if key not in self.targets:
            raise ObjectNotFound(messages.no_scalable_target(key.describe()))
        self._drop(key)
        self._persist()

    def _drop(self, key: sc.TargetKey) -> None:
        self.targets.pop(key, None)
        for policy_key in [k for k in self.policies if k[0] == key]:
            self.policies.pop(policy_key)
            self._first_period.pop(policy_key, None)
        state = self._state.get(key)
        if state is not None and state.action is not None:
            state.action.cancel()

    def _endpoint_deleted(self, endpoint: str) -> None:
        """DeleteEndpoint deregisters the endpoint's targets (spec §9)."""
        gone = [
            k
            for k in self.targets
            if (r := sc.parse_resource_id(k.resource_id)) and r.endpoint.lower() == endpoint.lower()
        ]
        for key in gone:
            self._drop(key)
        if gone:
            self._persist()

    def describe_scalable_targets(
        self, namespace: str, resource_ids: Iterable[str] | None, dimension: str | None
    ) -> list[sc.ScalableTarget]:
        wanted = set(resource_ids) if resource_ids else None
        return sorted(
            (
                t
                for t in self.targets.values()
                if t.key.namespace == namespace
                and (wanted is None or t.key.resource_id in wanted)
                and (dimension is None or t.key.dimension == dimension)
            ),
            key=lambda t: t.creation_time,
        )

    # ------------------------------------------------------------------ policies

    def put_scaling_policy(
        self,
        name: str,
        key: sc.TargetKey,
        policy_type: sc.PolicyType,
        target_tracking: sc.TargetTracking | None,
        step_scaling: sc.StepScaling | None,
    ) -> sc.ScalingPolicy:
        self._variant(key)
        if key not in self.targets:
            raise ObjectNotFound(messages.no_scalable_target(key.describe()))
        if policy_type is sc.PolicyType.TARGET_TRACKING:
            if target_tracking is None:
                raise ValidationFailed(
                    messages.policy_configuration_required(
                        policy_type, "TargetTrackingScalingPolicyConfiguration"
                    )
                )
            self._check_tracking(key, target_tracking)
            step_scaling = None
        else:
            if step_scaling is None:
                raise ValidationFailed(
                    messages.policy_configuration_required(policy_type, "StepScalingPolicyConfiguration")
                )
            target_tracking = None
        existing = self.policies.get((key, name))
        if existing is not None and existing.policy_type is policy_type:
            policy = dataclasses.replace(existing, target_tracking=target_tracking, step_scaling=step_scaling)
        else:
            policy_id = str(uuid.uuid4())
            alarms: tuple[sc.Alarm, ...] = ()
            if policy_type is sc.PolicyType.TARGET_TRACKING:
                alarms = tuple(
                    sc.Alarm(n, self.arns.alarm(n)) for n in sc.alarm_names(key.resource_id, policy_id)
                )
            policy = sc.ScalingPolicy(
                name=name,
                arn=self.arns.policy(policy_id, key, name),
                key=key,
                policy_type=policy_type,
                creation_time=self._wall(),
                target_tracking=target_tracking,
                step_scaling=step_scaling,
                alarms=alarms,
            )
        self.policies[(key, name)] = policy
        self._first_period[(key, name)] = self.metrics.period_index() + 1
        self._persist()
        return policy

    def _check_tracking(self, key: sc.TargetKey, config: sc.TargetTracking) -> None:
        if config.predefined_metric is None and config.customized_metric is None:
            raise ValidationFailed(
                "TargetTrackingScalingPolicyConfiguration needs a PredefinedMetricSpecification or a "
                "CustomizedMetricSpecification."
            )
        if config.predefined_metric is not None and config.predefined_metric not in SUPPORTED_PREDEFINED:
            raise ValidationFailed(
                messages.predefined_metric_unsupported(key.dimension, ", ".join(SUPPORTED_PREDEFINED))
            )
        custom = config.customized_metric
        if custom is not None:
            problem = custom_metric_problem(custom)
            if problem:
                raise ValidationFailed(problem)

    def delete_scaling_policy(self, name: str, key: sc.TargetKey) -> None:
        if (key, name) not in self.policies:
            raise ObjectNotFound(messages.no_scaling_policy(key.describe(), name))
        self.policies.pop((key, name))
        self._first_period.pop((key, name), None)
        self._persist()

    def describe_scaling_policies(
        self,
        namespace: str,
        names: Iterable[str] | None,
        resource_id: str | None,
        dimension: str | None,
    ) -> list[sc.ScalingPolicy]:
        wanted = set(names) if names else None
        return sorted(
            (
                p
                for p in self.policies.values()
                if p.key.namespace == namespace
                and (wanted is None or p.name in wanted)
                and (resource_id is None or p.key.resource_id == resource_id)
                and (dimension is None or p.key.dimension == dimension)
            ),
            key=lambda p: p.creation_time,
        )

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
        period = self.metrics.period_s
        while True:
            now = time.time()
            # just after the period closes, as CloudWatch evaluates a complete datapoint
            await asyncio.sleep((int(now // period) + 1) * period - now + min(0.05 * period, 1.0))
            try:
                self.evaluate()
            except Exception:  # noqa: BLE001 - one bad evaluation must not stop scaling
                log.exception("autoscaling evaluation failed")

    def evaluate(self) -> None:
        """Evaluate every target's policies on the periods closed so far (one call per period)."""
        last = self.metrics.period_index() - 1
        for key, target in list(self.targets.items()):
            state = self._target_state(key)
            if state.action is not None and not state.action.done():
                continue  # one scaling activity at a time per target
            ref = sc.parse_resource_id(key.resource_id)
            assert ref is not None
            try:
                current = self._capacity(ref)
            except (ResourceNotFound, ValidationFailed):
                continue  # not InService now (an update or a deletion under way)
            if self._enforce_range(target, ref, current):
                continue
            self._evaluate_policies(target, ref, state, current, last)

    def _evaluate_policies(
        self, target: sc.ScalableTarget, ref: sc.VariantRef, state: _TargetState, current: int, last: int
    ) -> None:
        verdicts: list[tuple[sc.ScalingPolicy, sc.TrackingVerdict]] = []
        for (key, name), policy in self.policies.items():
            if key != target.key or policy.target_tracking is None:
                continue
            first = self._first_period.get((key, name), last + 1)
            needed = sc.SCALE_IN_DATAPOINTS
            indexes = range(max(first, last - needed + 1), last + 1)
            points = [self._datapoint(ref, policy.target_tracking, i) for i in indexes]
            verdicts.append(
                (policy, sc.evaluate_tracking(policy.target_tracking, policy.alarms, points, current))
            )
        if not verdicts:
            return
        now = self._monotonic()
        outs = [(p, v) for p, v in verdicts if v.direction == "out"]
        if outs:
            if target.suspended.scale_out:
                return
            policy, verdict = max(outs, key=lambda pv: pv[1].capacity)
            assert policy.target_tracking is not None and verdict.metric is not None
            in_cooldown = (
                state.scale_out_at is not None and now < state.scale_out_at + state.scale_out_cooldown_s
            )
            # During the scale-out cooldown the capacity the last scale-out added counts: scale out
            # again only if the metric asks for more than that, reckoned from the capacity before it.
            if in_cooldown:
                wanted = sc.tracking_capacity(
                    state.scale_out_from, verdict.metric, policy.target_tracking.target_value
                )
                if wanted <= current:
                    return
            self._decide(target, ref, state, current, verdict.capacity, policy, verdict, "out")
            return
        ins = [(p, v) for p, v in verdicts if v.direction == "in"]
        tracking_that_may_scale_in = [
            p for p, _ in verdicts if p.target_tracking is not None and not p.target_tracking.disable_scale_in
        ]
        if not ins or len(ins) != len(tracking_that_may_scale_in) or target.suspended.scale_in:
            return  # scale in only when every policy that may scale in agrees
        if state.scale_in_at is not None and now < state.scale_in_at + state.scale_in_cooldown_s:
            return
        policy, verdict = max(ins, key=lambda pv: pv[1].capacity)
        self._decide(target, ref, state, current, verdict.capacity, policy, verdict, "in")

    def _decide(
        self,
        target: sc.ScalableTarget,
        ref: sc.VariantRef,
        state: _TargetState,
        current: int,
        wanted: int,
        policy: sc.ScalingPolicy,
        verdict: sc.TrackingVerdict,
        direction: str,
    ) -> None:
        alarm = verdict.alarm.name if verdict.alarm is not None else "(none)"
        cause = f"monitor alarm {alarm} in state ALARM triggered policy {policy.name}"
        capacity = self._bounded(target, wanted)
        if capacity == current:
            reason = sc.not_scaled(wanted, current, target)
            if reason is not None and state.last_not_scaled != reason.code:
                state.last_not_scaled = reason.code
                self._record_not_scaled(target.key, wanted, cause, reason)
            return
        assert policy.target_tracking is not None
        cooldown = (
            policy.target_tracking.effective_scale_out_cooldown
            if direction == "out"
            else policy.target_tracking.effective_scale_in_cooldown
        )
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
        """A capacity outside [MinCapacity, MaxCapacity] is brought inside at once."""
        state = self._target_state(target.key)
        if state.action is not None and not state.action.done():
            return False
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


def custom_metric_problem(custom: sc.CustomizedMetric) -> str | None:
    """Why smlocal cannot track a customized metric, or None. smlocal publishes the metrics of
    docs/metrics.md per EndpointName and VariantName."""
    known = {(m.namespace, m.name) for m in METRICS}
    if (custom.namespace, custom.metric_name) not in known:
        names = ", ".join(f"{ns}/{n}" for ns, n in sorted(known))
        return f"smlocal publishes no metric {custom.namespace}/{custom.metric_name}; it publishes {names}."
    dims = dict(custom.dimensions)
    if set(dims) != {"EndpointName", "VariantName"}:
        return "smlocal's metrics have exactly the dimensions EndpointName and VariantName."
    if custom.metric_name in COUNT_METRICS and custom.statistic not in ("Sum", "SampleCount", "Average"):
        return f"smlocal supports the statistics Sum, SampleCount and Average for {custom.metric_name}."
    return None
