"""UpdateEndpoint's deployment guardrails (shared/spec/hosting-contract.md §6.4): the plan, no IO.

Blue/green shifts traffic to the new (green) fleet all at once, in a canary step, or in linear steps,
each followed by a wait; then the old (blue) fleet is terminated after TerminationWaitInSeconds.
Rolling replaces a variant's instances in batches. An alarm of AutoRollbackConfiguration in ALARM
during a wait (or the execution timeout) rolls the deployment back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from emulator.errors import ValidationFailed

ALL_AT_ONCE = "ALL_AT_ONCE"
CANARY = "CANARY"
LINEAR = "LINEAR"
INSTANCE_COUNT = "INSTANCE_COUNT"
CAPACITY_PERCENT = "CAPACITY_PERCENT"


@dataclass(frozen=True)
class CapacitySize:
    type: str  # INSTANCE_COUNT | CAPACITY_PERCENT
    value: int

    def instances(self, total: int) -> int:
        """This size of a fleet of `total` instances: at least 1, at most the fleet."""
        if self.type == INSTANCE_COUNT:
            count = self.value
        else:
            count = math.ceil(total * self.value / 100)
        return max(1, min(count, total))

    def share(self, total: int) -> float:
        """The fraction of a fleet of `total` this size is."""
        if self.type == CAPACITY_PERCENT:
            return self.value / 100
        return self.value / total if total else 1.0


@dataclass(frozen=True)
class TrafficRouting:
    type: str  # ALL_AT_ONCE | CANARY | LINEAR
    wait_interval_s: int
    canary_size: CapacitySize | None = None
    linear_step_size: CapacitySize | None = None


@dataclass(frozen=True)
class BlueGreenPolicy:
    traffic_routing: TrafficRouting
    termination_wait_s: int | None = None
    maximum_execution_timeout_s: int | None = None


@dataclass(frozen=True)
class RollingPolicy:
    maximum_batch_size: CapacitySize
    wait_interval_s: int
    maximum_execution_timeout_s: int | None = None
    rollback_maximum_batch_size: CapacitySize | None = None


@dataclass(frozen=True)
class DeploymentConfig:
    blue_green: BlueGreenPolicy | None = None
    rolling: RollingPolicy | None = None
    rollback_alarms: tuple[str, ...] = ()


def validate(config: DeploymentConfig) -> None:
    """The limits the API documents that botocore's model does not carry [U: texts]."""
    if (config.blue_green is None) == (config.rolling is None):
        raise ValidationFailed(
            "DeploymentConfig needs exactly one of BlueGreenUpdatePolicy and RollingUpdatePolicy."
        )
    if config.blue_green is not None:
        routing = config.blue_green.traffic_routing
        if routing.type == CANARY:
            size = routing.canary_size
            if size is None:
                raise ValidationFailed("CanarySize is required for a CANARY TrafficRoutingConfiguration.")
            if size.type == CAPACITY_PERCENT and size.value > 50:
                raise ValidationFailed("CanarySize must be at most 50% of the variant's instance count.")
        if routing.type == LINEAR:
            size = routing.linear_step_size
            if size is None:
                raise ValidationFailed("LinearStepSize is required for a LINEAR TrafficRoutingConfiguration.")
            if size.type == CAPACITY_PERCENT and not 10 <= size.value <= 50:
                raise ValidationFailed(
                    "LinearStepSize must be between 10% and 50% of the variant's instance count."
                )
    if config.rolling is not None:
        size = config.rolling.maximum_batch_size
        if size.type == CAPACITY_PERCENT and not 5 <= size.value <= 50:
            raise ValidationFailed(
                "MaximumBatchSize must be between 5% and 50% of the variant's instance count."
            )


def traffic_steps(routing: TrafficRouting, green_instances: int) -> list[tuple[float, int]]:
    """The green fleet's share of traffic after each step, with the instances it stands for; the
    last step is (1.0, all). ALL_AT_ONCE: one step; CANARY: the canary, then the rest; LINEAR:
    equal steps until everything has moved."""
    total = max(green_instances, 1)
    if routing.type == CANARY and routing.canary_size is not None:
        canary = routing.canary_size.instances(total)
        share = min(routing.canary_size.share(total), 1.0)
        if canary < total and share < 1.0:
            return [(share, canary), (1.0, total)]
    if routing.type == LINEAR and routing.linear_step_size is not None:
        step = routing.linear_step_size.instances(total)
        share = min(routing.linear_step_size.share(total), 1.0)
        steps: list[tuple[float, int]] = []
        k = 1
        while k * share < 1.0 - 1e-9 and k * step < total:
            steps.append((k * share, k * step))
            k += 1
        return [*steps, (1.0, total)]
    return [(1.0, total)]


def rolling_batches(old: int, new: int, batch: CapacitySize) -> list[tuple[int, int]]:
    """(instances to start, instances to retire) per batch: batches of the new fleet's size until
    both the new count is reached and every old instance is gone."""
    size = batch.instances(max(old, new, 1))
    batches: list[tuple[int, int]] = []
    started = retired = 0
    while started < new or retired < old:
        start = min(size, new - started)
        retire = min(size, old - retired)
        batches.append((start, retire))
        started += start
        retired += retire
    return batches
