"""Step scaling policies: a CloudWatch alarm in ALARM invokes one, and the step whose interval holds
the metric sets the capacity (decisions in emulator.model.scaling; acting in actuator.py).
"""

from __future__ import annotations

from emulator.hosting.scaling.actuator import Actuator
from emulator.hosting.scaling.registry import ScalingRegistry
from emulator.model import scaling as sc


class StepScaler:
    def __init__(self, registry: ScalingRegistry, actuator: Actuator) -> None:
        self.registry = registry
        self.actuator = actuator

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
        live = None if target is None else self.actuator.live(policy.key, target)
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
        if self.actuator.cooling(state, direction):
            if direction == "in":
                return True
            # a scale-out in the cooldown only adds what exceeds the last scale-out's capacity
            from_before = sc.step_capacity(config, state.scale_out_from, metric, threshold)
            if from_before is None or from_before <= current:
                return True
            wanted = from_before
        cooldown = sc.DEFAULT_COOLDOWN_S if config.cooldown is None else config.cooldown
        cause = f"monitor alarm {alarm_name} in state {alarm_state} triggered policy {policy.name}"
        self.actuator.decide(target, ref, state, current, wanted, cause, cooldown)
        return True
