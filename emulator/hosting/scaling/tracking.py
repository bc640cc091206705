"""Target tracking policies: their two alarms as CloudWatch shows them, and the evaluation of each
target's policies just after each metric period closes (decisions in emulator.model.scaling).

Scale out when any policy asks for more; scale in only when every policy that may scale in agrees,
outside the cooldowns (shared/spec/hosting-contract.md §9; docs/autoscaling.md).
"""

from __future__ import annotations

from emulator.config import ServerConfig
from emulator.hosting.monitoring.catalogue import COMPONENT_LEVEL, locate
from emulator.hosting.monitoring.store import Metrics
from emulator.hosting.scaling.actuator import Actuator
from emulator.hosting.scaling.registry import ScalingRegistry, resource_of
from emulator.hosting.scaling.target_state import TargetState
from emulator.model import alarms as al
from emulator.model import scaling as sc


class TargetTracker:
    def __init__(
        self, config: ServerConfig, registry: ScalingRegistry, metrics: Metrics, actuator: Actuator
    ) -> None:
        self.config = config
        self.registry = registry
        self.metrics = metrics
        self.actuator = actuator

    def managed_alarms(self) -> list[tuple[al.AlarmSpec, str]]:
        """The two alarms of each target tracking policy as CloudWatch would show them (spec, ARN):
        metric > target for 3 of 3 periods, metric < 90 % of target for 15 of 15."""
        out: list[tuple[al.AlarmSpec, str]] = []
        for policy in self.registry.policies.values():
            config = policy.target_tracking
            if config is None or len(policy.alarms) < 2:
                continue
            ref = resource_of(policy.key)
            custom = config.customized_metric
            if custom is None:
                dims = _dimensions(ref)
                name, statistic = sc.PREDEFINED_SOURCES[config.predefined_metric or _default_metric(ref)]
                metric, unit = al.Metric("AWS/SageMaker", name, dims), None
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

    def evaluate(
        self, target: sc.ScalableTarget, ref: sc.ScalableRef, state: TargetState, current: int, last: int
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
            if self.actuator.cooling(state, "out") and (
                sc.tracking_capacity(state.scale_out_from, verdict.metric, config.target_value) <= current
            ):
                return
            self.actuator.decide(
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
            or self.actuator.cooling(state, "in")
        ):
            return  # scale in only when every policy that may scale in agrees, outside the cooldown
        policy, config, verdict = max(ins, key=lambda v: v[2].capacity)
        self.actuator.decide(
            target,
            ref,
            state,
            current,
            verdict.capacity,
            _cause(verdict.alarm, policy),
            config.effective_scale_in_cooldown,
        )

    def _datapoint(self, ref: sc.ScalableRef, config: sc.TargetTracking, index: int) -> float | None:
        custom = config.customized_metric
        if custom is None:
            predefined = config.predefined_metric or _default_metric(ref)
            name, statistic = sc.PREDEFINED_SOURCES[predefined]
            if isinstance(ref, sc.ComponentRef):
                value = self.metrics.datapoint(ref.component, COMPONENT_LEVEL, name, statistic, index)
            else:
                value = self.metrics.datapoint(ref.endpoint, ref.variant, name, statistic, index)
            if value is None and predefined in ZERO_WHEN_MISSING:
                return 0.0  # [U] a period without requests left the capacity unused
            return value
        # the series the metric's dimensions name: a variant's, a container's, an async endpoint's
        # queue (EndpointName only) or a component's (InferenceComponentName)
        where = locate(custom.namespace, custom.metric_name, custom.dimensions)
        if where is None:
            return None
        return self.metrics.datapoint(
            where.endpoint, where.variant, custom.metric_name, custom.statistic, index, where.container
        )


#: Predefined metrics whose period without samples reads 0: the provisioned concurrency unused, no
#: request in flight on any copy.
ZERO_WHEN_MISSING = frozenset({sc.PROVISIONED_CONCURRENCY_UTILIZATION, sc.CONCURRENT_REQUESTS_PER_COPY})


def _default_metric(ref: sc.ScalableRef) -> str:
    return sc.INVOCATIONS_PER_COPY if isinstance(ref, sc.ComponentRef) else sc.INVOCATIONS_PER_INSTANCE


def _dimensions(ref: sc.ScalableRef) -> tuple[tuple[str, str], ...]:
    """A predefined metric's CloudWatch dimensions for the resource a target scales."""
    if isinstance(ref, sc.ComponentRef):
        return (("InferenceComponentName", ref.component),)
    return (("EndpointName", ref.endpoint), ("VariantName", ref.variant))


def _cause(alarm: sc.Alarm | None, policy: sc.ScalingPolicy) -> str:
    name = alarm.name if alarm is not None else "(none)"
    return f"monitor alarm {name} in state ALARM triggered policy {policy.name}"
