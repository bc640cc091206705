"""emulator.model.scaling: resource IDs, names, ARNs and the pure scaling decisions."""

from __future__ import annotations

from datetime import UTC, datetime

from emulator.model import scaling as sc
from emulator.model.scaling import (
    Alarm,
    NotScaledReason,
    StepAdjustment,
    StepScaling,
    TargetKey,
    TargetTracking,
    TrackingVerdict,
    VariantRef,
)

RID = "endpoint/ep/variant/AllTraffic"
KEY = TargetKey(sc.SERVICE_NAMESPACE, RID, sc.VARIANT_DIMENSION)
HIGH = Alarm("high", "arn:high")
LOW = Alarm("low", "arn:low")
ALARMS = (HIGH, LOW)
TRACK = TargetTracking(target_value=10.0, predefined_metric=sc.INVOCATIONS_PER_INSTANCE)


def target(lo: int = 1, hi: int = 4) -> sc.ScalableTarget:
    return sc.ScalableTarget(KEY, "arn:t", lo, hi, "arn:role", datetime(2024, 1, 1, tzinfo=UTC))


# ---------------------------------------------------------------------- resources and names


def test_parse_resource_id() -> None:
    assert sc.parse_resource_id(RID) == VariantRef("ep", "AllTraffic")
    for bad in (
        "",
        "endpoint/ep",
        "endpoint/ep/variant",
        "endpoint//variant/v",
        "endpoint/ep/variant/",
        "endpoints/ep/variant/v",
        "endpoint/ep/variants/v",
        "endpoint/ep/variant/v/extra",
        "/endpoint/ep/variant/v",
    ):
        assert sc.parse_resource_id(bad) is None, bad


def test_target_key_describe() -> None:
    assert KEY.describe() == (
        "service namespace: sagemaker, resource ID: endpoint/ep/variant/AllTraffic, "
        "scalable dimension: sagemaker:variant:DesiredInstanceCount"
    )


def test_alarm_names() -> None:
    assert sc.alarm_names(RID, "abc-123") == (
        "TargetTracking-endpoint/ep/variant/AllTraffic-AlarmHigh-abc-123",
        "TargetTracking-endpoint/ep/variant/AllTraffic-AlarmLow-abc-123",
    )


def test_arns() -> None:
    arns = sc.ScalingArns("eu-west-1", "111122223333")
    assert arns.scalable_target("abc") == (
        "arn:aws:application-autoscaling:eu-west-1:111122223333:scalable-target/abc"
    )
    assert arns.policy("pid", KEY, "my-policy") == (
        "arn:aws:autoscaling:eu-west-1:111122223333:scalingPolicy:pid:"
        "resource/sagemaker/endpoint/ep/variant/AllTraffic:policyName/my-policy"
    )
    assert arns.alarm("n") == "arn:aws:cloudwatch:eu-west-1:111122223333:alarm:n"
    assert arns.service_linked_role() == (
        "arn:aws:iam::111122223333:role/aws-service-role/sagemaker.application-autoscaling."
        "amazonaws.com/AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint"
    )


def test_effective_cooldowns() -> None:
    assert TRACK.effective_scale_out_cooldown == 300
    assert TRACK.effective_scale_in_cooldown == 300
    zero = TargetTracking(10.0, scale_out_cooldown=0, scale_in_cooldown=0)
    assert (zero.effective_scale_out_cooldown, zero.effective_scale_in_cooldown) == (0, 0)
    custom = TargetTracking(10.0, scale_out_cooldown=60, scale_in_cooldown=600)
    assert (custom.effective_scale_out_cooldown, custom.effective_scale_in_cooldown) == (60, 600)


# ---------------------------------------------------------------------- small decisions


def test_clamp() -> None:
    t = target(2, 5)
    assert [sc.clamp(c, t) for c in (0, 1, 2, 3, 5, 6, 100)] == [2, 2, 2, 3, 5, 5, 5]


def test_breaching() -> None:
    assert sc.breaching([11, 11, 11], 3, above=10, below=None) is True
    assert sc.breaching([1, 11, 11, 11], 3, above=10, below=None) is True  # only the last 3 count
    assert sc.breaching([11, 11, 10], 3, above=10, below=None) is False  # strictly above
    assert sc.breaching([11, 11], 3, above=10, below=None) is False  # too few
    assert sc.breaching([11, None, 11], 3, above=10, below=None) is False  # missing: no breach
    assert sc.breaching([None, 11, 11, 11], 3, above=10, below=None) is True  # outside the window
    assert sc.breaching([8.9] * 15, 15, above=None, below=9.0) is True
    assert sc.breaching([9.0] * 15, 15, above=None, below=9.0) is False  # strictly below
    assert sc.breaching([], 3, above=10, below=None) is False


def test_tracking_capacity() -> None:
    assert sc.tracking_capacity(2, 10.0, 10.0) == 2  # 2 * 10.0 / 10.0 is not 2.0000000000000004 + 1
    assert sc.tracking_capacity(2, 20.0, 10.0) == 4
    assert sc.tracking_capacity(2, 10.5, 10.0) == 3  # ceil(2.1)
    assert sc.tracking_capacity(3, 0.1, 0.3) == 1  # 3 * 0.1 / 0.3 in float is 1.0000000000000002
    assert sc.tracking_capacity(4, 0.0, 10.0) == 0
    assert sc.tracking_capacity(5, 3.0, 10.0) == 2  # ceil(1.5)


def test_not_scaled() -> None:
    t = target(1, 4)
    assert sc.not_scaled(6, 4, t) == NotScaledReason(
        "AlreadyAtMaxCapacity", max_capacity=4, min_capacity=None, current_capacity=4
    )
    assert sc.not_scaled(0, 1, t) == NotScaledReason(
        "AlreadyAtMinCapacity", max_capacity=None, min_capacity=1, current_capacity=1
    )
    assert sc.not_scaled(6, 3, t) is None  # room to scale out, if not as far as wanted
    assert sc.not_scaled(0, 2, t) is None
    assert sc.not_scaled(2, 2, t) is None


# ---------------------------------------------------------------------- target tracking


def test_scale_out_after_three_datapoints_above_target() -> None:
    v = sc.evaluate_tracking(TRACK, ALARMS, [1.0, 12.0, 15.0, 25.0], current=2)
    assert v == TrackingVerdict("out", 5, HIGH, 25.0)  # ceil(2 * 25 / 10)
    v = sc.evaluate_tracking(TRACK, ALARMS, [11.0, 11.0, 10.5], current=2)
    assert v == TrackingVerdict("out", 3, HIGH, 10.5)  # ceil(2.1)


def test_scale_out_adds_at_least_one() -> None:
    v = sc.evaluate_tracking(TRACK, ALARMS, [10.000000001] * 3, current=1)
    assert sc.tracking_capacity(1, 10.000000001, 10.0) == 1
    assert v == TrackingVerdict("out", 2, HIGH, 10.000000001)


def test_no_scale_out_on_two_datapoints_or_a_missing_one() -> None:
    assert sc.evaluate_tracking(TRACK, ALARMS, [5.0, 20.0, 20.0], 2) == TrackingVerdict(None, 2, None, 20.0)
    assert sc.evaluate_tracking(TRACK, ALARMS, [20.0, 20.0], 2) == TrackingVerdict(None, 2, None, 20.0)
    assert sc.evaluate_tracking(TRACK, ALARMS, [20.0, None, 20.0], 2) == TrackingVerdict(None, 2, None, 20.0)
    assert sc.evaluate_tracking(TRACK, ALARMS, [20.0, 20.0, None], 2) == TrackingVerdict(None, 2, None, None)
    assert sc.evaluate_tracking(TRACK, ALARMS, [10.0] * 3, 2).direction is None  # at target: not above
    assert sc.evaluate_tracking(TRACK, ALARMS, [], 2) == TrackingVerdict(None, 2, None, None)


def test_scale_in_after_fifteen_datapoints_below_ninety_percent() -> None:
    v = sc.evaluate_tracking(TRACK, ALARMS, [8.0] * 14 + [4.0], current=4)
    assert v == TrackingVerdict("in", 2, LOW, 4.0)  # ceil(4 * 4 / 10)
    v = sc.evaluate_tracking(TRACK, ALARMS, [8.9] * 15, current=2)
    assert v == TrackingVerdict("in", 1, LOW, 8.9)  # ceil(1.78) = 2, but at least one less
    v = sc.evaluate_tracking(TRACK, ALARMS, [0.0] * 15, current=3)
    assert v == TrackingVerdict("in", 0, LOW, 0.0)  # the caller clamps


def test_no_scale_in_on_fourteen_datapoints_missing_ones_or_at_ninety_percent() -> None:
    assert sc.evaluate_tracking(TRACK, ALARMS, [1.0] * 14, 3) == TrackingVerdict(None, 3, None, 1.0)
    assert sc.evaluate_tracking(TRACK, ALARMS, [1.0] * 7 + [None] + [1.0] * 7, 3).direction is None
    assert sc.evaluate_tracking(TRACK, ALARMS, [1.0] * 14 + [9.0], 3).direction is None
    assert sc.evaluate_tracking(TRACK, ALARMS, [20.0] + [1.0] * 15, 3).direction == "in"


def test_disable_scale_in() -> None:
    no_in = TargetTracking(10.0, predefined_metric=sc.INVOCATIONS_PER_INSTANCE, disable_scale_in=True)
    assert sc.evaluate_tracking(no_in, ALARMS, [0.0] * 30, 3) == TrackingVerdict(None, 3, None, 0.0)
    assert sc.evaluate_tracking(no_in, ALARMS, [30.0] * 3, 3) == TrackingVerdict("out", 9, HIGH, 30.0)
    allowed = TargetTracking(10.0, disable_scale_in=False)
    assert sc.evaluate_tracking(allowed, ALARMS, [0.0] * 15, 3).direction == "in"


def test_verdict_without_alarms() -> None:
    assert sc.evaluate_tracking(TRACK, (), [30.0] * 3, 1) == TrackingVerdict("out", 3, None, 30.0)
    assert sc.evaluate_tracking(TRACK, (HIGH,), [1.0] * 15, 2) == TrackingVerdict("in", 1, None, 1.0)


# ---------------------------------------------------------------------- step scaling


def step(
    kind: str | None, *steps: tuple[float | None, float | None, int], mam: int | None = None
) -> StepScaling:
    return StepScaling(kind, tuple(StepAdjustment(*s) for s in steps), min_adjustment_magnitude=mam)


def test_apply_adjustment() -> None:
    assert sc.apply_adjustment(step(None), 3, 2) == 5  # ChangeInCapacity by default
    assert sc.apply_adjustment(step("ChangeInCapacity"), 3, -2) == 1
    assert sc.apply_adjustment(step("ExactCapacity"), 3, 7) == 7
    pct = step("PercentChangeInCapacity")
    assert sc.apply_adjustment(pct, 10, 25) == 12  # +2.5 rounds toward zero
    assert sc.apply_adjustment(pct, 10, -25) == 8  # -2.5 rounds toward zero
    assert sc.apply_adjustment(pct, 3, 10) == 4  # +0.3 rounds away from zero
    assert sc.apply_adjustment(pct, 3, -10) == 2  # -0.3 rounds away from zero
    assert sc.apply_adjustment(pct, 0, 50) == 0  # no change at all
    assert sc.apply_adjustment(pct, 4, 100) == 8
    with_mam = step("PercentChangeInCapacity", mam=2)
    assert sc.apply_adjustment(with_mam, 10, 10) == 12  # +1 raised to the magnitude 2
    assert sc.apply_adjustment(with_mam, 10, -10) == 8
    assert sc.apply_adjustment(with_mam, 10, 50) == 15  # already larger


def test_step_capacity_above_threshold() -> None:
    config = step("ChangeInCapacity", (0, 10, 1), (10, None, 3))
    assert sc.step_capacity(config, 2, 50.0, 50.0) == 3  # lower bound inclusive
    assert sc.step_capacity(config, 2, 59.9, 50.0) == 3
    assert sc.step_capacity(config, 2, 60.0, 50.0) == 5  # upper bound exclusive
    assert sc.step_capacity(config, 2, 500.0, 50.0) == 5
    assert sc.step_capacity(config, 2, 49.0, 50.0) is None  # no step covers it
    assert sc.step_capacity(step("ExactCapacity", (0, None, 6)), 2, 70.0, 50.0) == 6


def test_step_capacity_below_threshold_inside_intervals() -> None:
    config = step("ChangeInCapacity", (-10, 0, -1), (None, -10, -2))
    assert sc.step_capacity(config, 5, 45.0, 50.0) == 4
    assert sc.step_capacity(config, 5, 30.0, 50.0) == 3


def test_step_capacity_below_threshold_bounds_as_aws() -> None:
    config = step("ChangeInCapacity", (-10, 0, -1), (None, -10, -2))
    assert sc.step_capacity(config, 5, 50.0, 50.0) == 4  # at the threshold: upper bound inclusive
    assert sc.step_capacity(config, 5, 40.0, 50.0) == 3  # lower bound exclusive
