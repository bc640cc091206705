"""Inference components on disk: `components.json` in the state dir, beside state.json.

What a restart needs to serve them again: every component as the control plane knows it (its
specification, desired copies, status) and the ids of each component endpoint's instances, so that
the copies adopted after a restart find the instances they were placed on (their containers carry
the instance id: runtime/labels.HOST). Written atomically on every change, as state.json is.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from emulator.hosting.state_files import write_atomically
from emulator.model.components import (
    CapacitySize,
    ComponentContainer,
    ComponentDeploymentConfig,
    ComponentSpec,
    ComponentStatus,
    ComputeRequirements,
    DeployedComponentImage,
    InferenceComponent,
    PlacementStrategy,
    RollingUpdatePolicy,
)

FILE_NAME = "components.json"
VERSION = 1


@dataclass
class ComponentSnapshot:
    components: list[InferenceComponent] = field(default_factory=list)
    #: endpoint name -> variant name -> its instances' ids, in launch order
    hosts: dict[str, dict[str, list[str]]] = field(default_factory=dict)


def path_in(state_dir: Path) -> Path:
    return state_dir / FILE_NAME


def save(path: Path, snapshot: ComponentSnapshot) -> None:
    data = {
        "version": VERSION,
        "components": [_component_to_json(c) for c in snapshot.components],
        "hosts": snapshot.hosts,
    }
    write_atomically(path, json.dumps(data, indent=1, sort_keys=True))


def load(path: Path) -> ComponentSnapshot:
    if not path.exists():
        return ComponentSnapshot()
    data = json.loads(path.read_text())
    return ComponentSnapshot(
        [_component_from_json(c) for c in data.get("components", [])],
        {e: {v: list(ids) for v, ids in variants.items()} for e, variants in data.get("hosts", {}).items()},
    )


def _ts(value: datetime) -> str:
    return value.isoformat()


def _component_to_json(c: InferenceComponent) -> dict[str, Any]:
    return {
        "name": c.name,
        "arn": c.arn,
        "endpoint_name": c.endpoint_name,
        "variant_name": c.variant_name,
        "spec": _spec_to_json(c.spec),
        "desired_copies": c.desired_copies,
        "creation_time": _ts(c.creation_time),
        "last_modified_time": _ts(c.last_modified_time),
        "status": c.status.value,
        "failure_reason": c.failure_reason,
        "tags": [list(t) for t in c.tags],
        "last_deployment_config": (
            None if c.last_deployment_config is None else asdict(c.last_deployment_config)
        ),
        "deployed_image": None
        if c.deployed_image is None
        else {
            "specified_image": c.deployed_image.specified_image,
            "resolved_image": c.deployed_image.resolved_image,
            "resolution_time": _ts(c.deployed_image.resolution_time),
        },
    }


def _spec_to_json(s: ComponentSpec) -> dict[str, Any]:
    out = asdict(s)
    out["placement"] = s.placement.value
    if s.container is not None:
        out["container"]["environment"] = dict(s.container.environment)
    return out


def _spec_from_json(d: dict[str, Any]) -> ComponentSpec:
    container = d.get("container")
    compute = d.get("compute")
    return ComponentSpec(
        model_name=d.get("model_name"),
        container=None if container is None else ComponentContainer(**container),
        compute=None if compute is None else ComputeRequirements(**compute),
        model_data_download_timeout_s=d.get("model_data_download_timeout_s"),
        startup_health_check_timeout_s=d.get("startup_health_check_timeout_s"),
        base_component_name=d.get("base_component_name"),
        placement=PlacementStrategy(d.get("placement", PlacementStrategy.SPREAD.value)),
        instance_type=d.get("instance_type"),
    )


def _capacity(d: dict[str, Any] | None) -> CapacitySize | None:
    return None if d is None else CapacitySize(d["type"], int(d["value"]))


def _deployment_from_json(d: dict[str, Any] | None) -> ComponentDeploymentConfig | None:
    if d is None:
        return None
    r = d["rolling_update"]
    size = _capacity(r["maximum_batch_size"])
    assert size is not None
    policy = RollingUpdatePolicy(
        maximum_batch_size=size,
        wait_interval_s=int(r["wait_interval_s"]),
        maximum_execution_timeout_s=r.get("maximum_execution_timeout_s"),
        rollback_maximum_batch_size=_capacity(r.get("rollback_maximum_batch_size")),
    )
    return ComponentDeploymentConfig(policy, tuple(d.get("alarms") or ()))


def _component_from_json(d: dict[str, Any]) -> InferenceComponent:
    image = d.get("deployed_image")
    return InferenceComponent(
        name=d["name"],
        arn=d["arn"],
        endpoint_name=d["endpoint_name"],
        variant_name=d["variant_name"],
        spec=_spec_from_json(d["spec"]),
        desired_copies=int(d["desired_copies"]),
        creation_time=datetime.fromisoformat(d["creation_time"]),
        last_modified_time=datetime.fromisoformat(d["last_modified_time"]),
        status=ComponentStatus(d["status"]),
        failure_reason=d.get("failure_reason"),
        tags=tuple((k, v) for k, v in d.get("tags", [])),
        last_deployment_config=_deployment_from_json(d.get("last_deployment_config")),
        deployed_image=None
        if image is None
        else DeployedComponentImage(
            image["specified_image"],
            image["resolved_image"],
            datetime.fromisoformat(image["resolution_time"]),
        ),
    )
