"""UpdateEndpoint's deployment plan: capacity sizes, traffic steps, rolling batches, validation."""

from __future__ import annotations

import pytest

from emulator.errors import ValidationFailed
from emulator.model import deployment as dp

COUNT, PERCENT = dp.INSTANCE_COUNT, dp.CAPACITY_PERCENT


@pytest.mark.parametrize(
    ("size", "total", "instances", "share"),
    [
        (dp.CapacitySize(COUNT, 1), 4, 1, 0.25),
        (dp.CapacitySize(COUNT, 9), 4, 4, 2.25),
        (dp.CapacitySize(PERCENT, 25), 4, 1, 0.25),
        (dp.CapacitySize(PERCENT, 10), 4, 1, 0.10),  # at least one instance
        (dp.CapacitySize(PERCENT, 50), 3, 2, 0.5),  # rounded up
    ],
)
def test_capacity_size(size: dp.CapacitySize, total: int, instances: int, share: float) -> None:
    assert size.instances(total) == instances
    assert size.share(total) == pytest.approx(share)


def routing(
    kind: str, canary: dp.CapacitySize | None = None, step: dp.CapacitySize | None = None
) -> dp.TrafficRouting:
    return dp.TrafficRouting(kind, 10, canary, step)


def test_all_at_once_is_one_step() -> None:
    assert dp.traffic_steps(routing(dp.ALL_AT_ONCE), 3) == [(1.0, 3)]


def test_canary_then_the_rest() -> None:
    assert dp.traffic_steps(routing(dp.CANARY, canary=dp.CapacitySize(COUNT, 1)), 4) == [(0.25, 1), (1.0, 4)]
    assert dp.traffic_steps(routing(dp.CANARY, canary=dp.CapacitySize(PERCENT, 20)), 10) == [
        (0.2, 2),
        (1.0, 10),
    ]
    # a canary as big as the fleet is all at once
    assert dp.traffic_steps(routing(dp.CANARY, canary=dp.CapacitySize(COUNT, 2)), 2) == [(1.0, 2)]


def test_linear_steps_until_everything_moved() -> None:
    steps = dp.traffic_steps(routing(dp.LINEAR, step=dp.CapacitySize(PERCENT, 25)), 4)
    assert steps == [(0.25, 1), (0.5, 2), (0.75, 3), (1.0, 4)]
    steps = dp.traffic_steps(routing(dp.LINEAR, step=dp.CapacitySize(COUNT, 2)), 5)
    assert steps == [(0.4, 2), (0.8, 4), (1.0, 5)]


def test_rolling_batches_start_and_retire() -> None:
    assert dp.rolling_batches(4, 4, dp.CapacitySize(COUNT, 2)) == [(2, 2), (2, 2)]
    assert dp.rolling_batches(3, 3, dp.CapacitySize(PERCENT, 50)) == [(2, 2), (1, 1)]
    assert dp.rolling_batches(2, 3, dp.CapacitySize(COUNT, 1)) == [(1, 1), (1, 1), (1, 0)]
    assert dp.rolling_batches(3, 1, dp.CapacitySize(COUNT, 1)) == [(1, 1), (0, 1), (0, 1)]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (dp.DeploymentConfig(), "DeploymentConfig needs exactly one of"),
        (
            dp.DeploymentConfig(dp.BlueGreenPolicy(routing(dp.CANARY))),
            "CanarySize is required for a CANARY TrafficRoutingConfiguration.",
        ),
        (
            dp.DeploymentConfig(dp.BlueGreenPolicy(routing(dp.CANARY, canary=dp.CapacitySize(PERCENT, 60)))),
            "CanarySize must be at most 50% of the variant's instance count.",
        ),
        (
            dp.DeploymentConfig(dp.BlueGreenPolicy(routing(dp.LINEAR, step=dp.CapacitySize(PERCENT, 5)))),
            "LinearStepSize must be between 10% and 50% of the variant's instance count.",
        ),
        (
            dp.DeploymentConfig(rolling=dp.RollingPolicy(dp.CapacitySize(PERCENT, 60), 0)),
            "MaximumBatchSize must be between 5% and 50% of the variant's instance count.",
        ),
    ],
)
def test_invalid_plans_are_refused(config: dp.DeploymentConfig, message: str) -> None:
    with pytest.raises(ValidationFailed) as exc:
        dp.validate(config)
    assert exc.value.message.startswith(message)


def test_valid_plans_pass() -> None:
    dp.validate(dp.DeploymentConfig(dp.BlueGreenPolicy(routing(dp.CANARY, canary=dp.CapacitySize(COUNT, 1)))))
    dp.validate(dp.DeploymentConfig(rolling=dp.RollingPolicy(dp.CapacitySize(COUNT, 1), 0)))
