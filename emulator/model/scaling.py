"""Application Auto Scaling for endpoint variants and inference components: resources and decisions,
no IO and no clocks.

shared/spec/hosting-contract.md §9. A scalable target is a variant's DesiredInstanceCount (or an
inference component's DesiredCopyCount) with a [MinCapacity, MaxCapacity] range; policies attached
to it decide new capacities from metric datapoints (one per metric period, oldest first). Times here
are in *policy seconds*: the hosting layer converts them to wall time with `smlocal serve --time-scale`.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

SERVICE_NAMESPACE = "sagemaker"
VARIANT_DIMENSION = "sagemaker:variant:DesiredInstanceCount"
#: A serverless variant's ProvisionedConcurrency (spec §7): 1 at least, MaxConcurrency at most.
PROVISIONED_CONCURRENCY_DIMENSION = "sagemaker:variant:DesiredProvisionedConcurrency"
#: An inference component's DesiredCopyCount (MinCapacity 0 allowed: scale to zero).
COMPONENT_DIMENSION = "sagemaker:inference-component:DesiredCopyCount"
INVOCATIONS_PER_INSTANCE = "SageMakerVariantInvocationsPerInstance"
PROVISIONED_CONCURRENCY_UTILIZATION = "SageMakerVariantProvisionedConcurrencyUtilization"
INVOCATIONS_PER_COPY = "SageMakerInferenceComponentInvocationsPerCopy"
CONCURRENT_REQUESTS_PER_COPY = "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"
#: The predefined metric types each dimension's target tracking policies may track.
PREDEFINED_METRICS: dict[str, tuple[str, ...]] = {
    VARIANT_DIMENSION: (INVOCATIONS_PER_INSTANCE,),
    PROVISIONED_CONCURRENCY_DIMENSION: (PROVISIONED_CONCURRENCY_UTILIZATION,),
    COMPONENT_DIMENSION: (INVOCATIONS_PER_COPY, CONCURRENT_REQUESTS_PER_COPY),
}
#: The dimensions of endpoint/{EndpointName}/variant/{VariantName} resources.
VARIANT_DIMENSIONS = frozenset({VARIANT_DIMENSION, PROVISIONED_CONCURRENCY_DIMENSION})
#: The CloudWatch metric (AWS/SageMaker; EndpointName and VariantName, or InferenceComponentName for a
#: component's) and statistic a predefined metric type tracks [U: the statistic of the
#: provisioned-concurrency one].
PREDEFINED_SOURCES: dict[str, tuple[str, str]] = {
    INVOCATIONS_PER_INSTANCE: ("InvocationsPerInstance", "Sum"),
    PROVISIONED_CONCURRENCY_UTILIZATION: ("ServerlessProvisionedConcurrencyUtilization", "Average"),
    INVOCATIONS_PER_COPY: ("InvocationsPerCopy", "Sum"),
    CONCURRENT_REQUESTS_PER_COPY: ("ConcurrentRequestsPerCopy", "Average"),
}


def capacity_noun(dimension: str) -> str:
    """What a dimension's capacity is called in scaling activities' texts."""
    if dimension == COMPONENT_DIMENSION:
        return "copy count"  # [U] the text of a component's scaling activities
    return "provisioned concurrency" if dimension == PROVISIONED_CONCURRENCY_DIMENSION else "instance count"


#: Target tracking's managed alarms as observed on SageMaker endpoints (spec §9).
SCALE_OUT_DATAPOINTS = 3  # metric > target for 3 of 3 one-minute datapoints
SCALE_IN_DATAPOINTS = 15  # metric < 90 % of target for 15 of 15
SCALE_IN_RATIO = 0.9
DEFAULT_COOLDOWN_S = 300  # SageMaker variants: scale-in and scale-out, and step scaling's Cooldown
PERIOD_S = 60  # CloudWatch's one-minute period, in policy seconds
SERVICE_LINKED_ROLE = (
    "role/aws-service-role/sagemaker.application-autoscaling.amazonaws.com/"
    "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint"
)


class PolicyType(enum.StrEnum):
    TARGET_TRACKING = "TargetTrackingScaling"
    STEP = "StepScaling"


class ActivityStatus(enum.StrEnum):
    PENDING = "Pending"
    IN_PROGRESS = "InProgress"
    SUCCESSFUL = "Successful"
    OVERRIDDEN = "Overridden"
    UNFULFILLED = "Unfulfilled"
    FAILED = "Failed"


@dataclass(frozen=True)
class TargetKey:
    """What identifies a scalable target (and, with a name, a policy)."""

    namespace: str
    resource_id: str
    dimension: str

    def describe(self) -> str:
        return (
            f"service namespace: {self.namespace}, resource ID: {self.resource_id}, "
            f"scalable dimension: {self.dimension}"
        )


@dataclass(frozen=True)
class VariantRef:
    endpoint: str
    variant: str


def parse_resource_id(resource_id: str) -> VariantRef | None:
    """`endpoint/{EndpointName}/variant/{VariantName}` -> its parts; None for any other shape."""
    parts = resource_id.split("/")
    if len(parts) != 4 or parts[0] != "endpoint" or parts[2] != "variant" or not parts[1] or not parts[3]:
        return None
    return VariantRef(parts[1], parts[3])


@dataclass(frozen=True)
class ComponentRef:
    """An inference component a scalable target names (`inference-component/{Name}`)."""

    component: str


#: What a scalable target scales: an endpoint variant or an inference component.
ScalableRef = VariantRef | ComponentRef

COMPONENT_PREFIX = "inference-component/"


def parse_component_id(resource_id: str) -> ComponentRef | None:
    """`inference-component/{InferenceComponentName}` -> its name; None for any other shape."""
    if not resource_id.startswith(COMPONENT_PREFIX):
        return None
    name = resource_id[len(COMPONENT_PREFIX) :]
    if not name or "/" in name:
        return None
    return ComponentRef(name)


def scalable_ref(key: TargetKey) -> ScalableRef | None:
    """What a target's resource ID names, if smlocal can scale it in the target's dimension: a
    variant in the variant dimensions, a component in its DesiredCopyCount; None otherwise."""
    if key.namespace != SERVICE_NAMESPACE:
        return None
    if key.dimension in VARIANT_DIMENSIONS:
        return parse_resource_id(key.resource_id)
    if key.dimension == COMPONENT_DIMENSION:
        return parse_component_id(key.resource_id)
    return None


def names_component(key: TargetKey) -> bool:
    """Whether a target's resource ID or dimension is an inference component's (its refusal's text
    then names components)."""
    return key.dimension == COMPONENT_DIMENSION or key.resource_id.startswith(COMPONENT_PREFIX)


@dataclass(frozen=True)
class Suspended:
    scale_in: bool = False
    scale_out: bool = False
    scheduled: bool = False


@dataclass(frozen=True)
class ScalableTarget:
    key: TargetKey
    arn: str
    min_capacity: int
    max_capacity: int
    role_arn: str
    creation_time: datetime
    suspended: Suspended = Suspended()
    tags: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class CustomizedMetric:
    """One CloudWatch metric of those smlocal publishes (metric math is not supported)."""

    metric_name: str
    namespace: str
    dimensions: tuple[tuple[str, str], ...]
    statistic: str
    unit: str | None = None


@dataclass(frozen=True)
class TargetTracking:
    target_value: float
    predefined_metric: str | None = None
    resource_label: str | None = None
    customized_metric: CustomizedMetric | None = None
    scale_out_cooldown: int | None = None  # policy seconds; None: DEFAULT_COOLDOWN_S
    scale_in_cooldown: int | None = None
    disable_scale_in: bool | None = None

    @property
    def effective_scale_out_cooldown(self) -> int:
        return DEFAULT_COOLDOWN_S if self.scale_out_cooldown is None else self.scale_out_cooldown

    @property
    def effective_scale_in_cooldown(self) -> int:
        return DEFAULT_COOLDOWN_S if self.scale_in_cooldown is None else self.scale_in_cooldown


@dataclass(frozen=True)
class StepAdjustment:
    lower_bound: float | None
    upper_bound: float | None
    scaling_adjustment: int


@dataclass(frozen=True)
class StepScaling:
    adjustment_type: str | None = None  # ChangeInCapacity | PercentChangeInCapacity | ExactCapacity
    step_adjustments: tuple[StepAdjustment, ...] = ()
    min_adjustment_magnitude: int | None = None
    cooldown: int | None = None
    metric_aggregation_type: str | None = None


@dataclass(frozen=True)
class Alarm:
    name: str
    arn: str


@dataclass(frozen=True)
class ScalingPolicy:
    name: str
    arn: str
    key: TargetKey
    policy_type: PolicyType
    creation_time: datetime
    target_tracking: TargetTracking | None = None
    step_scaling: StepScaling | None = None
    alarms: tuple[Alarm, ...] = ()


@dataclass(frozen=True)
class NotScaledReason:
    code: str  # AlreadyAtMaxCapacity | AlreadyAtMinCapacity | AlreadyAtDesiredCapacity
    max_capacity: int | None = None
    min_capacity: int | None = None
    current_capacity: int | None = None


@dataclass(frozen=True)
class ScalingActivity:
    activity_id: str
    key: TargetKey
    description: str
    cause: str
    start_time: datetime
    status: ActivityStatus
    status_message: str | None = None
    end_time: datetime | None = None
    details: str | None = None
    not_scaled_reasons: tuple[NotScaledReason, ...] = ()


# ---------------------------------------------------------------------- ARNs and names


@dataclass(frozen=True)
class ScalingArns:
    region: str
    account_id: str

    def scalable_target(self, target_id: str) -> str:
        return f"arn:aws:application-autoscaling:{self.region}:{self.account_id}:scalable-target/{target_id}"

    def policy(self, policy_id: str, key: TargetKey, name: str) -> str:
        return (
            f"arn:aws:autoscaling:{self.region}:{self.account_id}:scalingPolicy:{policy_id}:"
            f"resource/{key.namespace}/{key.resource_id}:policyName/{name}"
        )

    def alarm(self, name: str) -> str:
        return f"arn:aws:cloudwatch:{self.region}:{self.account_id}:alarm:{name}"

    def service_linked_role(self) -> str:
        return f"arn:aws:iam::{self.account_id}:{SERVICE_LINKED_ROLE}"


def alarm_names(resource_id: str, suffix: str) -> tuple[str, str]:
    """Target tracking's managed alarms [U: the naming observed in the console]."""
    return (
        f"TargetTracking-{resource_id}-AlarmHigh-{suffix}",
        f"TargetTracking-{resource_id}-AlarmLow-{suffix}",
    )


# ---------------------------------------------------------------------- decisions


def clamp(capacity: int, target: ScalableTarget) -> int:
    return max(target.min_capacity, min(target.max_capacity, capacity))


def breaching(
    datapoints: Sequence[float | None], needed: int, above: float | None, below: float | None
) -> bool:
    """True when the last `needed` datapoints all exist and are all > `above` (or all < `below`)."""
    if len(datapoints) < needed:
        return False
    window = datapoints[-needed:]
    if any(v is None for v in window):
        return False
    if above is not None:
        return all(v is not None and v > above for v in window)
    assert below is not None
    return all(v is not None and v < below for v in window)


def tracking_capacity(current: int, metric: float, target_value: float) -> int:
    """The capacity that brings the metric back to the target: ceil(current x metric / target).
    A tiny tolerance keeps float noise (2 x 10.0 / 10.0 = 2.0000000000000004) from adding one."""
    return max(0, math.ceil(current * metric / target_value - 1e-9))


@dataclass(frozen=True)
class TrackingVerdict:
    """What one target tracking policy wants after a datapoint: "out", "in" or None."""

    direction: str | None
    capacity: int
    alarm: Alarm | None
    metric: float | None


def evaluate_tracking(
    config: TargetTracking, alarms: tuple[Alarm, ...], datapoints: Sequence[float | None], current: int
) -> TrackingVerdict:
    """The high alarm (3 datapoints > target) asks for more capacity; the low alarm (15 < 90 % of
    target) for less, unless scale-in is disabled. The capacity asked for tracks the last datapoint."""
    target = config.target_value
    last = datapoints[-1] if datapoints else None
    high = alarms[0] if alarms else None
    low = alarms[1] if len(alarms) > 1 else None
    if last is not None and breaching(datapoints, SCALE_OUT_DATAPOINTS, above=target, below=None):
        return TrackingVerdict("out", max(tracking_capacity(current, last, target), current + 1), high, last)
    if not config.disable_scale_in and breaching(
        datapoints, SCALE_IN_DATAPOINTS, above=None, below=target * SCALE_IN_RATIO
    ):
        assert last is not None
        return TrackingVerdict("in", min(tracking_capacity(current, last, target), current - 1), low, last)
    return TrackingVerdict(None, current, None, last)


def step_capacity(config: StepScaling, current: int, metric: float, threshold: float) -> int | None:
    """The capacity a step policy sets for a metric value when its alarm (at `threshold`) fires:
    the step whose interval, relative to the threshold, holds the metric. At or above the threshold
    an interval is [lower, upper); below it, (lower, upper] (as StepAdjustment documents); at the
    threshold itself, a bound of 0 on either side matches."""
    delta = metric - threshold
    for step in config.step_adjustments:
        lower = -math.inf if step.lower_bound is None else step.lower_bound
        upper = math.inf if step.upper_bound is None else step.upper_bound
        if delta > 0:
            inside = lower <= delta < upper
        elif delta < 0:
            inside = lower < delta <= upper
        else:  # at the threshold: a step ending or starting there (scale-in or scale-out policies)
            inside = lower <= 0 <= upper
        if inside:
            return apply_adjustment(config, current, step.scaling_adjustment)
    return None


def apply_adjustment(config: StepScaling, current: int, adjustment: int) -> int:
    kind = config.adjustment_type or "ChangeInCapacity"
    if kind == "ExactCapacity":
        return adjustment
    if kind == "PercentChangeInCapacity":
        change = current * adjustment / 100.0
        # Application Auto Scaling rounds toward zero for |change| >= 1, away from zero below 1.
        rounded = int(change) if abs(change) >= 1 else (int(math.copysign(1, change)) if change else 0)
        if config.min_adjustment_magnitude and abs(rounded) < config.min_adjustment_magnitude:
            rounded = int(math.copysign(config.min_adjustment_magnitude, rounded or adjustment))
        return current + rounded
    return current + adjustment


def not_scaled(desired: int, current: int, target: ScalableTarget) -> NotScaledReason | None:
    """Why a wanted change (desired, before clamping) leaves the capacity as it is."""
    if desired > current and current >= target.max_capacity:
        return NotScaledReason(
            "AlreadyAtMaxCapacity", max_capacity=target.max_capacity, current_capacity=current
        )
    if desired < current and current <= target.min_capacity:
        return NotScaledReason(
            "AlreadyAtMinCapacity", min_capacity=target.min_capacity, current_capacity=current
        )
    return None
