"""The state dir's state.json: resource definitions kept across restarts of `smlocal serve`.

Written atomically after every control-plane mutation (they are rare); read once at start.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from emulator.hosting.state_files import write_atomically
from emulator.model import deployment as dp
from emulator.model.components import ManagedInstanceScaling
from emulator.model.resources import (
    AdditionalModelData,
    AsyncInference,
    ContainerDefinition,
    Endpoint,
    EndpointConfig,
    EndpointStatus,
    Model,
    ModelDataSource,
    ProductionVariant,
    RoutingStrategy,
    ServerlessConfig,
)

FORMAT_VERSION = 1


@dataclass(frozen=True)
class Deployed:
    """What a serving endpoint runs: its endpoint config and the models of its variants, as they
    were when deployed. SageMaker lets both be deleted (or re-created differently) while the
    endpoint serves; a restart re-adopts the endpoint from this copy, not from the registries."""

    endpoint_config: EndpointConfig
    models: tuple[Model, ...]

    def model(self, name: str) -> Model | None:
        return next((m for m in self.models if m.name == name), None)


@dataclass
class Snapshot:
    models: list[Model] = field(default_factory=list)
    endpoint_configs: list[EndpointConfig] = field(default_factory=list)
    endpoints: list[Endpoint] = field(default_factory=list)
    #: endpoint name -> what it serves (absent from state files written before it was kept)
    deployed: dict[str, Deployed] = field(default_factory=dict)


def _ts(value: datetime) -> str:
    return value.isoformat()


def _tags(tags: Any) -> tuple[tuple[str, str], ...]:
    return tuple((str(k), str(v)) for k, v in tags)


def _source_to_json(d: ModelDataSource) -> dict[str, Any]:
    out: dict[str, Any] = {"uri": d.uri, "compression": d.compression, "data_type": d.data_type}
    if d.accept_eula is not None:  # only then: older files stay as they were
        out["accept_eula"] = d.accept_eula
    return out


def _container_to_json(c: ContainerDefinition) -> dict[str, Any]:
    out: dict[str, Any] = {
        "image": c.image,
        "environment": dict(c.environment),
        "model_data": None if c.model_data is None else _source_to_json(c.model_data),
        "hostname": c.hostname,
        "mode": c.mode,
        "model_cache_setting": c.model_cache_setting,
        "repository_access_mode": c.repository_access_mode,
    }
    if c.additional_model_data:
        out["additional_model_data"] = [
            {"channel_name": a.channel_name, "source": _source_to_json(a.source)}
            for a in c.additional_model_data
        ]
    return out


def _container_from_json(c: dict[str, Any]) -> ContainerDefinition:
    data = ModelDataSource(**c["model_data"]) if c["model_data"] else None
    return ContainerDefinition(
        image=c["image"],
        environment=c["environment"],
        model_data=data,
        hostname=c["hostname"],
        mode=c["mode"],
        model_cache_setting=c.get("model_cache_setting", "Enabled"),
        repository_access_mode=c.get("repository_access_mode"),
        additional_model_data=tuple(
            AdditionalModelData(a["channel_name"], ModelDataSource(**a["source"]))
            for a in c.get("additional_model_data") or ()
        ),
    )


def _model_to_json(m: Model) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": m.name,
        "arn": m.arn,
        "creation_time": _ts(m.creation_time),
        "execution_role_arn": m.execution_role_arn,
        "enable_network_isolation": m.enable_network_isolation,
        "tags": list(m.tags),
        "container": _container_to_json(m.primary_container),
    }
    if m.containers:  # only then: files of single-container models stay as they were
        out["containers"] = [_container_to_json(c) for c in m.containers]
        out["inference_mode"] = m.inference_mode
    return out


def _model_from_json(d: dict[str, Any]) -> Model:
    containers = tuple(_container_from_json(c) for c in d.get("containers") or ())
    return Model(
        name=d["name"],
        arn=d["arn"],
        creation_time=datetime.fromisoformat(d["creation_time"]),
        execution_role_arn=d["execution_role_arn"],
        enable_network_isolation=d["enable_network_isolation"],
        tags=_tags(d["tags"]),
        primary_container=_container_from_json(d["container"]),
        containers=containers,
        inference_mode=d.get("inference_mode"),
    )


def _variant_to_json(v: ProductionVariant) -> dict[str, Any]:
    return {
        "variant_name": v.variant_name,
        "model_name": v.model_name,
        "initial_instance_count": v.initial_instance_count,
        "instance_type": v.instance_type,
        "initial_variant_weight": v.initial_variant_weight,
        "startup_health_check_timeout_s": v.startup_health_check_timeout_s,
        "model_data_download_timeout_s": v.model_data_download_timeout_s,
        "routing_strategy": v.routing_strategy.value,
        "volume_size_gb": v.volume_size_gb,
        "serverless": None if v.serverless is None else dataclasses.asdict(v.serverless),
        "managed_instance_scaling": (
            None if v.managed_instance_scaling is None else dataclasses.asdict(v.managed_instance_scaling)
        ),
    }


def _config_to_json(c: EndpointConfig) -> dict[str, Any]:
    return {
        "name": c.name,
        "arn": c.arn,
        "creation_time": _ts(c.creation_time),
        "kms_key_id": c.kms_key_id,
        "tags": list(c.tags),
        "production_variants": [_variant_to_json(v) for v in c.production_variants],
        "async_inference": None if c.async_inference is None else dataclasses.asdict(c.async_inference),
        "execution_role_arn": c.execution_role_arn,
    }


def _config_from_json(d: dict[str, Any]) -> EndpointConfig:
    variants = tuple(
        ProductionVariant(
            **{
                **v,
                "routing_strategy": RoutingStrategy(v["routing_strategy"]),
                "serverless": ServerlessConfig(**v["serverless"]) if v.get("serverless") else None,
                "managed_instance_scaling": (
                    ManagedInstanceScaling(**v["managed_instance_scaling"])
                    if v.get("managed_instance_scaling")
                    else None
                ),
            }
        )
        for v in d["production_variants"]
    )
    return EndpointConfig(
        name=d["name"],
        arn=d["arn"],
        creation_time=datetime.fromisoformat(d["creation_time"]),
        kms_key_id=d["kms_key_id"],
        tags=_tags(d["tags"]),
        production_variants=variants,
        async_inference=_async_from_json(d.get("async_inference")),
        execution_role_arn=d.get("execution_role_arn"),
    )


def _async_from_json(d: dict[str, Any] | None) -> AsyncInference | None:
    if d is None:
        return None
    return AsyncInference(**{**d, "include_response_in": tuple(d["include_response_in"])})


def _endpoint_to_json(e: Endpoint) -> dict[str, Any]:
    return {
        "name": e.name,
        "arn": e.arn,
        "endpoint_config_name": e.endpoint_config_name,
        "status": e.status.value,
        "creation_time": _ts(e.creation_time),
        "last_modified_time": _ts(e.last_modified_time),
        "failure_reason": e.failure_reason,
        "tags": list(e.tags),
        "variant_overrides": [list(o) for o in e.variant_overrides],
        "last_deployment_config": None
        if e.last_deployment_config is None
        else dataclasses.asdict(e.last_deployment_config),
    }


def _endpoint_from_json(d: dict[str, Any]) -> Endpoint:
    return Endpoint(
        name=d["name"],
        arn=d["arn"],
        endpoint_config_name=d["endpoint_config_name"],
        status=EndpointStatus(d["status"]),
        creation_time=datetime.fromisoformat(d["creation_time"]),
        last_modified_time=datetime.fromisoformat(d["last_modified_time"]),
        failure_reason=d["failure_reason"],
        tags=_tags(d["tags"]),
        variant_overrides=tuple(
            (str(name), None if w is None else float(w), None if c is None else int(c))
            for name, w, c in d.get("variant_overrides", [])
        ),
        last_deployment_config=_deployment(d.get("last_deployment_config")),
    )


def _size(d: dict[str, Any] | None) -> dp.CapacitySize | None:
    return None if d is None else dp.CapacitySize(d["type"], int(d["value"]))


def _deployment(d: dict[str, Any] | None) -> dp.DeploymentConfig | None:
    if d is None:
        return None
    blue_green = rolling = None
    if (bg := d.get("blue_green")) is not None:
        r = bg["traffic_routing"]
        blue_green = dp.BlueGreenPolicy(
            dp.TrafficRouting(
                r["type"],
                int(r["wait_interval_s"]),
                _size(r.get("canary_size")),
                _size(r.get("linear_step_size")),
            ),
            bg.get("termination_wait_s"),
            bg.get("maximum_execution_timeout_s"),
        )
    if (ru := d.get("rolling")) is not None:
        size = _size(ru["maximum_batch_size"])
        assert size is not None
        rolling = dp.RollingPolicy(
            size,
            int(ru["wait_interval_s"]),
            ru.get("maximum_execution_timeout_s"),
            _size(ru.get("rollback_maximum_batch_size")),
        )
    return dp.DeploymentConfig(blue_green, rolling, tuple(d.get("rollback_alarms", ())))


def save(path: Path, snapshot: Snapshot) -> None:
    document = {
        "version": FORMAT_VERSION,
        "models": [_model_to_json(m) for m in snapshot.models],
        "endpoint_configs": [_config_to_json(c) for c in snapshot.endpoint_configs],
        "endpoints": [_endpoint_to_json(e) for e in snapshot.endpoints],
        "deployed": {
            name: {
                "endpoint_config": _config_to_json(d.endpoint_config),
                "models": [_model_to_json(m) for m in d.models],
            }
            for name, d in sorted(snapshot.deployed.items())
        },
    }
    write_atomically(path, json.dumps(document, indent=1, sort_keys=True))


def load(path: Path) -> Snapshot:
    if not path.exists():
        return Snapshot()
    document = json.loads(path.read_text(encoding="utf-8"))
    if document.get("version") != FORMAT_VERSION:
        raise ValueError(f"{path}: unsupported state format {document.get('version')!r}")
    return Snapshot(
        models=[_model_from_json(m) for m in document["models"]],
        endpoint_configs=[_config_from_json(c) for c in document["endpoint_configs"]],
        endpoints=[_endpoint_from_json(e) for e in document["endpoints"]],
        deployed={
            name: Deployed(
                _config_from_json(d["endpoint_config"]), tuple(_model_from_json(m) for m in d["models"])
            )
            for name, d in document.get("deployed", {}).items()
        },
    )
