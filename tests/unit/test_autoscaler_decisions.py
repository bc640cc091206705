"""AutoScaler's decisions through its public entry points (register_scalable_target,
registry.put_scaling_policy, evaluate, alarm_fired) on a real Metrics with a fake clock and a stub
HostingService (tests/unit/autoscaler_rig.py): target tracking's 3 and 15 period alarms, cooldowns,
several policies, suspension, not-scaled activities, range enforcement, failures, step scaling and
deregistration (docs/autoscaling.md). No Docker, no sleeps: each period is one `tick`."""

from __future__ import annotations

import pytest

from emulator.errors import ObjectNotFound, ResourceInProgress
from emulator.model import scaling as sc
from emulator.model.resources import EndpointStatus
from tests.unit.autoscaler_rig import EP, KEY, VARIANT, Rig, alarm_cause, ok

IN_PROGRESS, SUCCESSFUL, FAILED = (
    sc.ActivityStatus.IN_PROGRESS,
    sc.ActivityStatus.SUCCESSFUL,
    sc.ActivityStatus.FAILED,
)
INVOCATIONS = sc.CustomizedMetric(
    "Invocations", "AWS/SageMaker", (("EndpointName", EP), ("VariantName", VARIANT)), "Sum"
)


def setting(n: int) -> str:
    return f"Setting desired instance count to {n}."


def texts(activity: sc.ScalingActivity) -> tuple[str, str, sc.ActivityStatus, str | None]:
    return activity.description, activity.cause, activity.status, activity.status_message


async def scaled_out_to_two(rig: Rig, **options: object) -> sc.ScalingPolicy:
    """1 -> 2 on 20 invocations per instance against a target of 10 (finished)."""
    rig.register(1, 10)
    policy = rig.tracking(**options)
    await rig.tick(20, periods=4)  # the period the policy was put in, then 3 above target
    assert rig.counts() == [2]
    await rig.finish()
    return policy


# ---------------------------------------------------------------------- target tracking


@pytest.mark.parametrize("requests, expected", [(25, 3), (11, 2), (60, 4)])
async def test_scale_out_after_three_periods_above_target(tmp_path, requests, expected):
    rig = Rig(tmp_path, count=1)
    rig.register(1, 4)
    await rig.tick(requests, periods=2)  # above target before the policy exists: never read
    policy = rig.tracking(target=10.0)
    await rig.tick(requests)  # the period the policy was put in: not a full one, ignored
    await rig.tick(requests, periods=2)
    assert rig.service.calls == [] and rig.activities(True) == []
    await rig.tick(requests)  # the third full period above target: ceil(1 x metric / 10), within [1, 4]
    assert rig.service.calls == [(EP, ((VARIANT, None, expected),))]
    [activity] = rig.activities()
    assert texts(activity) == (setting(expected), alarm_cause(policy), IN_PROGRESS, None)
    assert rig.service.deployer.lines == [
        (EP, f"autoscaling: {VARIANT}: {setting(expected)} ({alarm_cause(policy)})")
    ]
    await rig.tick(requests)  # Updating: one activity at a time
    await rig.finish()
    [activity] = rig.activities()
    assert texts(activity) == (setting(expected), alarm_cause(policy), SUCCESSFUL, ok(expected))
    assert activity.end_time is not None and activity.end_time > activity.start_time
    assert rig.counts() == [expected] and rig.metrics.series(EP)[0].instances == expected


async def test_scale_in_after_fifteen_periods_below_ninety_percent(tmp_path):
    rig = Rig(tmp_path, count=4)  # a share of 1/4 sums exactly
    rig.register(1, 4)
    policy = rig.tracking(target=10.0)
    await rig.tick(0)  # the period the policy was put in
    await rig.tick(36, periods=20)  # 9.0 per instance: not below 90 % of the target
    await rig.tick(16, periods=14)  # 4.0 per instance, 14 periods
    assert rig.service.calls == []
    await rig.tick(16)  # the 15th: ceil(4 x 4 / 10) = 2
    assert rig.counts() == [2]
    await rig.finish()
    [activity] = rig.activities()
    assert texts(activity) == (setting(2), alarm_cause(policy, high=False), SUCCESSFUL, ok(2))


async def test_idle_scales_in_to_min_capacity(tmp_path):
    rig = Rig(tmp_path, count=4)
    rig.register(2, 8)
    rig.tracking()
    await rig.tick(0, periods=15)  # the policy's own period and 14 idle ones
    assert rig.service.calls == []
    await rig.tick(0)
    assert rig.counts() == [2]


async def test_disable_scale_in_never_scales_in(tmp_path):
    rig = Rig(tmp_path, count=3)
    rig.register(1, 4)
    rig.tracking(disable_scale_in=True)
    await rig.tick(0, periods=40)
    assert rig.service.calls == [] and rig.activities(True) == []


# ---------------------------------------------------------------------- cooldowns


async def test_scale_out_cooldown_holds_what_the_last_scale_out_added(tmp_path):
    rig = Rig(tmp_path, count=1)
    await scaled_out_to_two(rig)
    # 15 per instance on 2 asks for 3, but reckoned from the 1 before the scale-out only for 2
    await rig.tick(30, periods=4)
    assert rig.counts() == [2]
    await rig.tick(30)  # 300 s after the scale-out ended
    assert rig.counts() == [2, 3]


async def test_scale_out_cooldown_lets_a_larger_scale_out_through(tmp_path):
    rig = Rig(tmp_path, count=1)
    await scaled_out_to_two(rig)
    await rig.tick(30)
    await rig.tick(50)  # 25 per instance: ceil(1 x 25 / 10) = 3 > 2, so at once to ceil(2 x 25 / 10)
    assert rig.counts() == [2, 5]


async def test_scale_in_cooldown_blocks_scale_in(tmp_path):
    rig = Rig(tmp_path, count=4)
    rig.register(1, 10)
    rig.tracking(scale_in_cooldown=600)
    await rig.tick(0)
    await rig.tick(20, periods=15)  # 5 per instance: ceil(4 x 5 / 10) = 2
    assert rig.counts() == [2]
    await rig.finish()
    await rig.tick(0, periods=9)  # idle asks for 1, inside the cooldown
    assert rig.counts() == [2]
    await rig.tick(0)  # 600 s after the scale-in ended
    assert rig.counts() == [2, 1]


async def test_a_scale_out_ends_the_scale_in_cooldown(tmp_path):
    rig = Rig(tmp_path, count=4)
    rig.register(1, 10)
    rig.tracking(scale_in_cooldown=3600)
    await rig.tick(0)
    await rig.tick(20, periods=15)
    assert rig.counts() == [2]
    await rig.finish()
    await rig.tick(60, periods=3)  # 30 per instance: ceil(2 x 30 / 10) = 6
    assert rig.counts() == [2, 6]
    await rig.finish()
    await rig.tick(0, periods=14)
    assert rig.counts() == [2, 6]
    await rig.tick(0)  # 15 idle periods, well inside the 3600 s the scale-in started
    assert rig.counts() == [2, 6, 1]


# ---------------------------------------------------------------------- several policies, suspension


async def test_two_policies_the_larger_scale_out_wins(tmp_path):
    rig = Rig(tmp_path, count=1)
    rig.register(1, 10)
    rig.tracking("per-instance", target=10.0)  # asks for 2
    invocations = rig.tracking("invocations", target=5.0, customized_metric=INVOCATIONS)  # asks for 4
    await rig.tick(20, periods=4)
    assert rig.counts() == [4]
    assert rig.activities()[0].cause == alarm_cause(invocations)


async def test_two_policies_scale_in_only_when_both_agree(tmp_path):
    rig = Rig(tmp_path, count=4)
    rig.register(1, 10)
    per_instance = rig.tracking("per-instance", target=10.0)
    rig.tracking("invocations", target=100.0, customized_metric=INVOCATIONS)
    await rig.tick(40, periods=20)  # 10 per instance (not low), 40 invocations (low): no
    await rig.tick(20, periods=14)
    assert rig.service.calls == []
    await rig.tick(20)  # both low: per-instance asks for ceil(4 x 5 / 10) = 2, invocations for 1
    assert rig.counts() == [2]
    assert rig.activities()[0].cause == alarm_cause(per_instance, high=False)


async def test_dynamic_scaling_out_suspended(tmp_path):
    rig = Rig(tmp_path, count=1)
    rig.register(1, 4, sc.Suspended(scale_out=True))
    rig.tracking()
    step = rig.step("step", (0.0, None, 1))
    await rig.tick(25, periods=8)
    assert await rig.fire(step, "high", 150.0, 100.0) is True
    assert rig.service.calls == [] and rig.activities(True) == []
    rig.register(1, 4, sc.Suspended())
    await rig.tick(25)
    assert rig.counts() == [3]


async def test_dynamic_scaling_in_suspended(tmp_path):
    rig = Rig(tmp_path, count=3)
    rig.register(1, 4, sc.Suspended(scale_in=True))
    rig.tracking()
    await rig.tick(0, periods=30)
    assert rig.service.calls == [] and rig.activities(True) == []
    await rig.tick(60, periods=3)  # scaling out still works: 20 per instance, ceil(6) within max 4
    assert rig.counts() == [4]


# ---------------------------------------------------------------------- not scaled


async def test_not_scaled_activities_once_per_reason_and_only_on_request(tmp_path):
    rig = Rig(tmp_path, count=2)
    rig.register(2, 2)
    policy = rig.tracking()
    await rig.tick(30, periods=12)  # 15 per instance asks for 3 from the 4th period on, at MaxCapacity
    await rig.tick(
        10, periods=20
    )  # 5 per instance asks for ceil(2 x 5 / 10) = 1 from the 15th, at MinCapacity
    assert rig.service.calls == [] and rig.activities() == []
    high, low = rig.activities(include_not_scaled=True)
    failed = "Failed to set desired instance count to {}"
    assert texts(high) == (setting(3), alarm_cause(policy), FAILED, failed.format(3))
    assert high.not_scaled_reasons == (
        sc.NotScaledReason("AlreadyAtMaxCapacity", max_capacity=2, current_capacity=2),
    )
    assert texts(low) == (setting(1), alarm_cause(policy, high=False), FAILED, failed.format(1))
    assert low.not_scaled_reasons == (
        sc.NotScaledReason("AlreadyAtMinCapacity", min_capacity=2, current_capacity=2),
    )
    assert high.end_time == high.start_time


# ---------------------------------------------------------------------- the registered range


async def test_register_brings_capacity_into_range_at_once_but_leaves_later_changes(tmp_path):
    rig = Rig(tmp_path, count=1)
    rig.register(2, 4)
    await rig.settle()
    assert rig.counts() == [2]
    [activity] = rig.activities()
    assert texts(activity) == (setting(2), "minimum capacity was set to 2", IN_PROGRESS, None)
    await rig.finish()
    assert texts(rig.activities()[0])[2:] == (SUCCESSFUL, ok(2))
    rig.service.current = 6  # someone calls UpdateEndpointWeightsAndCapacities by hand
    rig.metrics.set_instances(EP, VARIANT, 6)
    rig.tracking()
    await rig.tick(60, periods=6)  # 10 per instance: on target, the policy wants no change
    assert rig.counts() == [2] and len(rig.activities(True)) == 1
    rig.register(2, 5)  # registering again brings it inside the range
    await rig.settle()
    assert rig.counts() == [2, 5]
    assert rig.activities()[-1].cause == "maximum capacity was set to 5"


async def test_register_within_range_does_nothing(tmp_path):
    rig = Rig(tmp_path, count=3)
    rig.register(1, 4)
    rig.register(3, 3)
    assert rig.service.calls == [] and rig.activities(True) == []


# ---------------------------------------------------------------------- failures


async def test_failed_update_gives_a_failed_activity(tmp_path):
    rig = Rig(tmp_path, count=1)
    policy = (rig.register(1, 4), rig.tracking())[1]
    await rig.tick(25, periods=4)
    await rig.finish(failure="Instance i-1 failed its health check")
    [activity] = rig.activities()
    assert texts(activity) == (
        setting(3),
        alarm_cause(policy),
        FAILED,
        "Failed to set desired instance count to 3. Reason: Instance i-1 failed its health check",
    )
    assert rig.service.current == 1 and rig.metrics.series(EP)[0].instances == 1


async def test_refused_update_gives_a_failed_activity(tmp_path):
    rig = Rig(tmp_path, count=1)
    rig.register(1, 4)
    rig.tracking()
    rig.service.raise_on_update = ResourceInProgress("Cannot update in-progress endpoint")
    await rig.tick(25, periods=4)
    await rig.drain()
    [activity] = rig.activities()
    assert activity.status is FAILED
    assert activity.status_message == (
        "Failed to set desired instance count to 3. Reason: Cannot update in-progress endpoint"
    )


# ---------------------------------------------------------------------- step scaling (alarm_fired)

STEPS = ((0.0, 10.0, 1), (10.0, None, 0))  # the second step's adjustment is the case's


@pytest.mark.parametrize(
    "kind, adjustment, magnitude, count, metric, expected",
    [
        ("ChangeInCapacity", 3, None, 2, 105.0, 3),  # [0, 10): +1
        ("ChangeInCapacity", 3, None, 2, 110.0, 5),  # [10, inf): +3
        ("ExactCapacity", 7, None, 2, 115.0, 7),
        ("PercentChangeInCapacity", 30, None, 4, 115.0, 5),  # +1.2 rounds toward zero
        ("PercentChangeInCapacity", 10, None, 2, 115.0, 3),  # +0.2 rounds away from zero
        ("PercentChangeInCapacity", 10, 2, 2, 115.0, 4),  # MinAdjustmentMagnitude 2
    ],
)
async def test_step_policy_sets_the_capacity_of_the_step_holding_the_metric(
    tmp_path, kind, adjustment, magnitude, count, metric, expected
):
    rig = Rig(tmp_path, count=count)
    rig.register(1, 10)
    steps = (STEPS[0], (10.0, None, adjustment))
    policy = rig.step("out", *steps, adjustment_type=kind, min_adjustment_magnitude=magnitude)
    assert await rig.fire(policy, "high", metric, 100.0) is True
    assert rig.counts() == [expected]
    await rig.finish()
    [activity] = rig.activities()
    cause = "monitor alarm high in state ALARM triggered policy out"
    assert texts(activity) == (setting(expected), cause, SUCCESSFUL, ok(expected))


async def test_step_scale_in_cause_and_cooldown(tmp_path):
    rig = Rig(tmp_path, count=4)
    rig.register(1, 10)
    policy = rig.step("in", (None, 0.0, -1), cooldown=120)
    assert rig.scaler.alarm_fired(policy.arn, "low", 50.0, 100.0, alarm_state="OK") is True
    await rig.settle()
    assert rig.counts() == [3]
    assert rig.activities()[0].cause == "monitor alarm low in state OK triggered policy in"
    rig.now += 45
    await rig.finish()  # the cooldown counts from here, the end of the activity
    rig.now += 119
    assert await rig.fire(policy, "low", 50.0, 100.0) is True
    assert rig.counts() == [3]
    rig.now += 1  # 120 s after the scale-in ended
    assert await rig.fire(policy, "low", 50.0, 100.0) is True
    assert rig.counts() == [3, 2]


async def test_step_scale_out_in_cooldown_adds_only_what_exceeds_the_last(tmp_path):
    rig = Rig(tmp_path, count=2)
    rig.register(1, 10)
    policy = rig.step("out", (0.0, 10.0, 2), (10.0, None, 5))
    await rig.fire(policy, "high", 105.0, 100.0)  # 2 -> 4
    await rig.finish()
    await rig.fire(policy, "high", 105.0, 100.0)  # again 2 + 2: no more than 4
    assert rig.counts() == [4]
    await rig.fire(policy, "high", 120.0, 100.0)  # 2 + 5 = 7
    assert rig.counts() == [4, 7]


async def test_alarm_fired_for_no_step_policy_returns_false(tmp_path):
    rig = Rig(tmp_path, count=1)
    rig.register(1, 4)
    tracking = rig.tracking()
    assert rig.scaler.alarm_fired("arn:aws:autoscaling:us-east-1:1:scalingPolicy:x", "a", 1.0, 0.0) is False
    assert rig.scaler.alarm_fired(tracking.arn, "a", 100.0, 0.0) is False
    assert rig.service.calls == []


# ---------------------------------------------------------------------- deregistration, busy endpoints


async def test_deregister_drops_target_and_policies_but_the_running_activity_completes(tmp_path):
    rig = Rig(tmp_path, count=1)
    rig.register(1, 4)
    rig.tracking()
    await rig.tick(25, periods=4)
    rig.scaler.deregister_scalable_target(KEY)
    assert rig.scaler.registry.targets == {} and rig.scaler.registry.policies == {}
    await rig.finish()
    [activity] = rig.activities()
    assert (activity.status, activity.status_message) == (SUCCESSFUL, ok(3))
    await rig.tick(60, periods=5)
    assert rig.counts() == [3]
    with pytest.raises(ObjectNotFound):
        rig.scaler.deregister_scalable_target(KEY)


async def test_endpoint_deletion_deregisters_its_targets(tmp_path):
    rig = Rig(tmp_path, count=1)
    rig.register(1, 4)
    policy = rig.step("out", (0.0, None, 1))
    await rig.fire(policy, "high", 150.0, 100.0)
    for listener in rig.service.deletion_listeners:
        listener(EP)
    assert rig.scaler.registry.targets == {} and rig.scaler.registry.policies == {}
    assert rig.scaler.alarm_fired(policy.arn, "high", 150.0, 100.0) is False
    await rig.finish()
    assert [(a.status, a.status_message) for a in rig.activities()] == [(SUCCESSFUL, ok(2))]


async def test_nothing_happens_while_the_endpoint_is_not_in_service(tmp_path):
    rig = Rig(tmp_path, count=1)
    rig.register(1, 4)
    rig.tracking()
    step = rig.step("step", (0.0, None, 1))
    rig.service.status = EndpointStatus.UPDATING  # an UpdateEndpoint under way
    await rig.tick(25, periods=6)
    assert await rig.fire(step, "high", 150.0, 100.0) is True
    assert rig.service.calls == [] and rig.activities(True) == []
    rig.service.status = EndpointStatus.IN_SERVICE
    await rig.tick(25)
    assert rig.counts() == [3]
