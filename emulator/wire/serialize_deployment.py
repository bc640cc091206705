"""UpdateEndpoint's (and CreateEndpoint's) DeploymentConfig: PascalCase <-> `model.deployment` values
(blue/green with traffic routing, rolling updates, auto-rollback alarms), both directions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from emulator.errors import ValidationFailed
from emulator.model import deployment as dp

JSON = dict[str, Any]


def _alarm_name(alarm: Mapping[str, Any]) -> str:
    if "AlarmName" not in alarm:  # optional in the model; [U] SageMaker's text
        raise ValidationFailed("Each alarm of AutoRollbackConfiguration needs an AlarmName.")
    return str(alarm["AlarmName"])


def rollback_alarms(p: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The alarm names of an AutoRollbackConfiguration (endpoints' and inference components' alike)."""
    return tuple(_alarm_name(a) for a in (p or {}).get("Alarms", []))


def _capacity_size(p: Mapping[str, Any] | None) -> dp.CapacitySize | None:
    return None if p is None else dp.CapacitySize(p["Type"], int(p["Value"]))


def deployment_config_input(p: Mapping[str, Any] | None) -> dp.DeploymentConfig | None:
    if not p:
        return None
    blue_green = rolling = None
    if (bg := p.get("BlueGreenUpdatePolicy")) is not None:
        routing = bg["TrafficRoutingConfiguration"]
        blue_green = dp.BlueGreenPolicy(
            dp.TrafficRouting(
                routing["Type"],
                int(routing["WaitIntervalInSeconds"]),
                _capacity_size(routing.get("CanarySize")),
                _capacity_size(routing.get("LinearStepSize")),
            ),
            bg.get("TerminationWaitInSeconds"),
            bg.get("MaximumExecutionTimeoutInSeconds"),
        )
    if (ru := p.get("RollingUpdatePolicy")) is not None:
        size = _capacity_size(ru["MaximumBatchSize"])
        assert size is not None
        rolling = dp.RollingPolicy(
            size,
            int(ru["WaitIntervalInSeconds"]),
            ru.get("MaximumExecutionTimeoutInSeconds"),
            _capacity_size(ru.get("RollbackMaximumBatchSize")),
        )
    alarms = rollback_alarms(p.get("AutoRollbackConfiguration"))
    return dp.DeploymentConfig(blue_green, rolling, alarms)


def _capacity_size_out(c: dp.CapacitySize) -> JSON:
    return {"Type": c.type, "Value": c.value}


def deployment_config_output(d: dp.DeploymentConfig) -> JSON:
    out: JSON = {}
    if d.blue_green is not None:
        r = d.blue_green.traffic_routing
        routing: JSON = {"Type": r.type, "WaitIntervalInSeconds": r.wait_interval_s}
        if r.canary_size is not None:
            routing["CanarySize"] = _capacity_size_out(r.canary_size)
        if r.linear_step_size is not None:
            routing["LinearStepSize"] = _capacity_size_out(r.linear_step_size)
        bg: JSON = {"TrafficRoutingConfiguration": routing}
        if d.blue_green.termination_wait_s is not None:
            bg["TerminationWaitInSeconds"] = d.blue_green.termination_wait_s
        if d.blue_green.maximum_execution_timeout_s is not None:
            bg["MaximumExecutionTimeoutInSeconds"] = d.blue_green.maximum_execution_timeout_s
        out["BlueGreenUpdatePolicy"] = bg
    if d.rolling is not None:
        ru: JSON = {
            "MaximumBatchSize": _capacity_size_out(d.rolling.maximum_batch_size),
            "WaitIntervalInSeconds": d.rolling.wait_interval_s,
        }
        if d.rolling.maximum_execution_timeout_s is not None:
            ru["MaximumExecutionTimeoutInSeconds"] = d.rolling.maximum_execution_timeout_s
        if d.rolling.rollback_maximum_batch_size is not None:
            ru["RollbackMaximumBatchSize"] = _capacity_size_out(d.rolling.rollback_maximum_batch_size)
        out["RollingUpdatePolicy"] = ru
    if d.rollback_alarms:
        out["AutoRollbackConfiguration"] = {"Alarms": [{"AlarmName": a} for a in d.rollback_alarms]}
    return out
