"""Scalable targets and their scaling policies: the control plane's records, validated.

Nothing scales here; emulator.hosting.scaling.autoscaler reads these records and acts. Every change calls
`on_change` (the autoscaler persists autoscaling.json).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime

from emulator.errors import ArnNotFound, ObjectNotFound, TooManyTags, ValidationFailed
from emulator.hosting.monitoring.catalogue import COUNT_METRICS, METRICS, locate
from emulator.model import messages
from emulator.model import scaling as sc

MAX_TAGS = 50
STATISTICS = ("Average", "Minimum", "Maximum", "SampleCount", "Sum")


def resource_of(key: sc.TargetKey) -> sc.ScalableRef:
    """The endpoint variant or inference component a target names; ValidationFailed for anything
    smlocal cannot scale (a refusal naming components when the target looks like one's)."""
    ref = sc.scalable_ref(key)
    if ref is None:
        if key.namespace == sc.SERVICE_NAMESPACE and sc.names_component(key):
            raise ValidationFailed(messages.unsupported_component_target())
        raise ValidationFailed(messages.unsupported_scalable_target())
    return ref


def variant_of(key: sc.TargetKey) -> sc.VariantRef:
    """The endpoint variant a target names; ValidationFailed for anything else."""
    ref = resource_of(key)
    if not isinstance(ref, sc.VariantRef):
        raise ValidationFailed(messages.unsupported_scalable_target())
    return ref


class ScalingRegistry:
    def __init__(
        self,
        arns: sc.ScalingArns,
        wall: Callable[[], datetime],
        period_index: Callable[[], int],
        on_change: Callable[[], None],
    ) -> None:
        self.arns = arns
        self._wall = wall
        self._period_index = period_index
        self._on_change = on_change
        #: (name, ARN) of the CloudWatch alarms whose actions name a policy ARN (set when alarms
        #: are served): a step policy's Alarms in DescribeScalingPolicies.
        self.alarms_targeting: Callable[[str], list[tuple[str, str]]] | None = None
        self.targets: dict[sc.TargetKey, sc.ScalableTarget] = {}
        self.policies: dict[tuple[sc.TargetKey, str], sc.ScalingPolicy] = {}
        #: the first metric period each policy's alarms read: the first full one after it was put
        self._first_period: dict[tuple[sc.TargetKey, str], int] = {}

    def load(self, targets: Iterable[sc.ScalableTarget], policies: Iterable[sc.ScalingPolicy]) -> None:
        first = self._period_index() + 1
        for target in targets:
            self.targets[target.key] = target
        for policy in policies:
            self.policies[(policy.key, policy.name)] = policy
            self._first_period[(policy.key, policy.name)] = first

    # ------------------------------------------------------------------ scalable targets

    def put_target(
        self,
        key: sc.TargetKey,
        min_capacity: int | None,
        max_capacity: int | None,
        role_arn: str | None,
        suspended: sc.Suspended | None,
        tags: tuple[tuple[str, str], ...],
    ) -> sc.ScalableTarget:
        """Register a new target or change an existing one (the fields given)."""
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
        self._on_change()
        return target

    def target(self, key: sc.TargetKey) -> sc.ScalableTarget:
        target = self.targets.get(key)
        if target is None:
            raise ObjectNotFound(messages.no_scalable_target(key.describe()))
        return target

    def drop(self, key: sc.TargetKey) -> None:
        """Forget a target and its policies (DeregisterScalableTarget, DeleteEndpoint)."""
        self.targets.pop(key, None)
        for policy_key in [k for k in self.policies if k[0] == key]:
            self.policies.pop(policy_key)
            self._first_period.pop(policy_key, None)
        self._on_change()

    # ------------------------------------------------------------------ tags (scalable targets)

    def _by_arn(self, arn: str) -> sc.ScalableTarget:
        target = next((t for t in self.targets.values() if t.arn == arn), None)
        if target is None:
            raise ArnNotFound(messages.no_tagged_resource(arn))
        return target

    def tags_of(self, arn: str) -> dict[str, str]:
        return dict(self._by_arn(arn).tags)

    def tag(self, arn: str, tags: dict[str, str]) -> None:
        target = self._by_arn(arn)
        merged = {**dict(target.tags), **tags}
        if len(merged) > MAX_TAGS:
            raise TooManyTags(messages.too_many_tags(arn, MAX_TAGS))
        self.targets[target.key] = dataclasses.replace(target, tags=tuple(sorted(merged.items())))
        self._on_change()

    def untag(self, arn: str, keys: Iterable[str]) -> None:
        target = self._by_arn(arn)
        gone = set(keys)
        kept = tuple((k, v) for k, v in target.tags if k not in gone)
        self.targets[target.key] = dataclasses.replace(target, tags=kept)
        self._on_change()

    def keys_of_component(self, component: str) -> list[sc.TargetKey]:
        """The targets naming an inference component (its name matched as SageMaker does, ignoring case)."""
        return [
            k
            for k in self.targets
            if (r := sc.parse_component_id(k.resource_id)) is not None
            and r.component.lower() == component.lower()
        ]

    def keys_of_endpoint(self, endpoint: str) -> list[sc.TargetKey]:
        return [
            k
            for k in self.targets
            if (r := sc.parse_resource_id(k.resource_id)) is not None
            and r.endpoint.lower() == endpoint.lower()
        ]

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
        resource_of(key)
        self.target(key)
        if policy_type is sc.PolicyType.TARGET_TRACKING:
            if target_tracking is None:
                raise ValidationFailed(
                    messages.policy_configuration_required(
                        policy_type, "TargetTrackingScalingPolicyConfiguration"
                    )
                )
            _check_tracking(key, target_tracking)
            step_scaling = None
        else:
            if step_scaling is None:
                raise ValidationFailed(
                    messages.policy_configuration_required(policy_type, "StepScalingPolicyConfiguration")
                )
            _check_steps(step_scaling)
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
        self._first_period[(key, name)] = self._period_index() + 1
        self._on_change()
        return policy

    def delete_scaling_policy(self, name: str, key: sc.TargetKey) -> None:
        if (key, name) not in self.policies:
            raise ObjectNotFound(messages.no_scaling_policy(key.describe(), name))
        self.policies.pop((key, name))
        self._first_period.pop((key, name), None)
        self._on_change()

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
                self._with_alarms(p)
                for p in self.policies.values()
                if p.key.namespace == namespace
                and (wanted is None or p.name in wanted)
                and (resource_id is None or p.key.resource_id == resource_id)
                and (dimension is None or p.key.dimension == dimension)
            ),
            key=lambda p: p.creation_time,
        )

    def _with_alarms(self, policy: sc.ScalingPolicy) -> sc.ScalingPolicy:
        """A step policy's alarms are the CloudWatch alarms that name it in their actions."""
        if policy.step_scaling is None or self.alarms_targeting is None:
            return policy
        alarms = tuple(sc.Alarm(name, arn) for name, arn in self.alarms_targeting(policy.arn))
        return dataclasses.replace(policy, alarms=alarms)

    def policies_of(self, key: sc.TargetKey) -> list[tuple[sc.ScalingPolicy, int]]:
        """A target's policies, each with the first metric period its alarms read."""
        return [(p, self._first_period.get((k, n), 0)) for (k, n), p in self.policies.items() if k == key]

    def policy_by_arn(self, arn: str) -> sc.ScalingPolicy | None:
        return next((p for p in self.policies.values() if p.arn == arn), None)


def _check_steps(config: sc.StepScaling) -> None:
    """Step adjustments must be given, and their intervals must neither overlap nor leave a gap
    (Application Auto Scaling's rule) [U: texts]."""
    steps = config.step_adjustments
    if not steps:
        raise ValidationFailed("StepScalingPolicyConfiguration needs at least one StepAdjustment.")
    inf = float("inf")
    spans = sorted(
        (-inf if s.lower_bound is None else s.lower_bound, inf if s.upper_bound is None else s.upper_bound)
        for s in steps
    )
    for lower, upper in spans:
        if lower >= upper:
            raise ValidationFailed(
                "A StepAdjustment's MetricIntervalLowerBound must be below its upper bound."
            )
    for (_, upper), (lower, _) in zip(spans, spans[1:], strict=False):
        if upper != lower:
            raise ValidationFailed("The intervals of the StepAdjustments must not overlap or leave a gap.")


def _check_tracking(key: sc.TargetKey, config: sc.TargetTracking) -> None:
    if not config.target_value > 0:
        raise ValidationFailed(f"TargetValue must be greater than 0, not {config.target_value}.")
    if config.predefined_metric is None and config.customized_metric is None:
        raise ValidationFailed(
            "TargetTrackingScalingPolicyConfiguration needs a PredefinedMetricSpecification or a "
            "CustomizedMetricSpecification."
        )
    supported = sc.PREDEFINED_METRICS[key.dimension]
    if config.predefined_metric is not None and config.predefined_metric not in supported:
        raise ValidationFailed(messages.predefined_metric_unsupported(key.dimension, ", ".join(supported)))
    if config.customized_metric is not None:
        problem = custom_metric_problem(config.customized_metric)
        if problem:
            raise ValidationFailed(problem)


def custom_metric_problem(custom: sc.CustomizedMetric) -> str | None:
    """Why smlocal cannot track a customized metric, or None. smlocal publishes the metrics of
    docs/metrics.md per EndpointName and VariantName, and on multi-container endpoints some per
    ContainerName too."""
    known = {(m.namespace, m.name) for m in METRICS}
    if (custom.namespace, custom.metric_name) not in known:
        names = ", ".join(f"{ns}/{n}" for ns, n in sorted(known))
        return f"smlocal publishes no metric {custom.namespace}/{custom.metric_name}; it publishes {names}."
    if locate(custom.namespace, custom.metric_name, custom.dimensions) is None:
        return (
            "smlocal's metrics have exactly the dimensions EndpointName and VariantName (and "
            "ContainerName for a container's Invocations, Invocation4XXErrors, Invocation5XXErrors, "
            "ContainerLatency, OverheadLatency, CPUUtilization and MemoryUtilization; ContainerLatency "
            "has no other); an asynchronous endpoint's ApproximateBacklogSize, "
            "ApproximateBacklogSizePerInstance, ApproximateAgeOfOldestRequest and HasBacklogWithoutCapacity "
            "have EndpointName alone."
        )
    if custom.statistic not in STATISTICS:
        return f"Statistic must be one of {', '.join(STATISTICS)}, not {custom.statistic}."
    if custom.metric_name in COUNT_METRICS and custom.statistic not in ("Sum", "SampleCount", "Average"):
        return f"smlocal supports the statistics Sum, SampleCount and Average for {custom.metric_name}."
    return None
