"""emulator.hosting.endpoints.persistence: state.json round trips, atomic writes, versioning."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from emulator.hosting.endpoints import persistence
from emulator.hosting.endpoints.persistence import FORMAT_VERSION, Snapshot, load, save
from emulator.model import deployment as dp
from emulator.model.arns import Account
from emulator.model.resources import (
    ContainerDefinition,
    Endpoint,
    EndpointConfig,
    EndpointStatus,
    Model,
    ModelDataSource,
    ProductionVariant,
    RoutingStrategy,
)

ACCOUNT = Account("us-east-1", "123456789012")
T0 = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)


def models() -> list[Model]:
    return [
        Model(
            name="WithData",
            arn=ACCOUNT.model_arn("WithData"),
            creation_time=T0,
            execution_role_arn="arn:aws:iam::123456789012:role/r",
            enable_network_isolation=True,
            tags=(("team", "ml"), ("env", "")),
            primary_container=ContainerDefinition(
                image="123456789012.dkr.ecr.us-east-1.amazonaws.com/repo:tag",
                environment={"A": "1", "SAGEMAKER_PROGRAM": "serve.py"},
                model_data=ModelDataSource(uri="s3://bucket/model.tar.gz"),
                hostname="primary-host",
            ),
        ),
        Model(
            name="prefix-model",
            arn=ACCOUNT.model_arn("prefix-model"),
            creation_time=T0 + timedelta(seconds=1),
            primary_container=ContainerDefinition(
                image="local/image:latest",
                repository_access_mode="Vpc",
                model_data=ModelDataSource(
                    uri="s3://bucket/prefix/", compression="None", data_type="S3Prefix"
                ),
            ),
        ),
        Model(
            name="no-data",
            arn=ACCOUNT.model_arn("no-data"),
            creation_time=T0 + timedelta(seconds=2),
            primary_container=ContainerDefinition(image="echo:latest"),
        ),
    ]


def configs() -> list[EndpointConfig]:
    return [
        EndpointConfig(
            name="Cfg",
            arn=ACCOUNT.endpoint_config_arn("Cfg"),
            creation_time=T0,
            kms_key_id="key-1",
            tags=(("k", "v"),),
            production_variants=(
                ProductionVariant(variant_name="A", model_name="WithData", initial_variant_weight=2.0),
                ProductionVariant(
                    variant_name="B",
                    model_name="no-data",
                    initial_instance_count=3,
                    instance_type="ml.g5.xlarge",
                    initial_variant_weight=0.5,
                    startup_health_check_timeout_s=600,
                    model_data_download_timeout_s=1200,
                    routing_strategy=RoutingStrategy.RANDOM,
                    volume_size_gb=200,
                ),
            ),
        ),
        EndpointConfig(
            name="single",
            arn=ACCOUNT.endpoint_config_arn("single"),
            creation_time=T0,
            production_variants=(ProductionVariant(variant_name="AllTraffic", model_name="prefix-model"),),
        ),
    ]


def endpoints() -> list[Endpoint]:
    return [
        Endpoint(
            name="Ep",
            arn=ACCOUNT.endpoint_arn("Ep"),
            endpoint_config_name="Cfg",
            status=EndpointStatus.IN_SERVICE,
            creation_time=T0,
            last_modified_time=T0 + timedelta(minutes=3),
            tags=(("a", "b"),),
            variant_overrides=(("AllTraffic", 0.5, 3), ("Other", None, 2)),
            last_deployment_config=dp.DeploymentConfig(
                blue_green=dp.BlueGreenPolicy(
                    dp.TrafficRouting(dp.CANARY, 30, canary_size=dp.CapacitySize(dp.INSTANCE_COUNT, 1)),
                    termination_wait_s=60,
                ),
                rollback_alarms=("errors",),
            ),
        ),
        Endpoint(
            name="Rolled",
            arn=ACCOUNT.endpoint_arn("Rolled"),
            endpoint_config_name="Cfg",
            status=EndpointStatus.UPDATE_ROLLBACK_FAILED,
            creation_time=T0,
            last_modified_time=T0,
            last_deployment_config=dp.DeploymentConfig(
                rolling=dp.RollingPolicy(
                    dp.CapacitySize(dp.CAPACITY_PERCENT, 50),
                    0,
                    maximum_execution_timeout_s=600,
                    rollback_maximum_batch_size=dp.CapacitySize(dp.INSTANCE_COUNT, 2),
                )
            ),
        ),
        Endpoint(
            name="broken",
            arn=ACCOUNT.endpoint_arn("broken"),
            endpoint_config_name="single",
            status=EndpointStatus.FAILED,
            creation_time=T0,
            last_modified_time=T0 + timedelta(minutes=1),
            failure_reason=(
                "The primary container for production variant AllTraffic did not pass the ping health check."
            ),
        ),
    ]


def full() -> Snapshot:
    return Snapshot(models=models(), endpoint_configs=configs(), endpoints=endpoints())


def test_round_trip_models(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    save(path, Snapshot(models=models()))
    got = load(path)
    assert got.models == models()
    assert got.endpoint_configs == [] and got.endpoints == []
    assert dict(got.models[0].primary_container.environment) == {"A": "1", "SAGEMAKER_PROGRAM": "serve.py"}
    assert got.models[0].tags == (("team", "ml"), ("env", ""))
    assert got.models[1].primary_container.model_data == ModelDataSource(
        "s3://bucket/prefix/", "None", "S3Prefix"
    )
    assert got.models[2].primary_container.model_data is None


def test_round_trip_configs(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    save(path, Snapshot(endpoint_configs=configs()))
    got = load(path).endpoint_configs
    assert got == configs()
    assert got[0].production_variants[1].routing_strategy is RoutingStrategy.RANDOM
    assert got[0].production_variants[0].routing_strategy is RoutingStrategy.LEAST_OUTSTANDING_REQUESTS
    assert [v.variant_name for v in got[0].production_variants] == ["A", "B"]


def test_round_trip_endpoints(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    save(path, Snapshot(endpoints=endpoints()))
    got = load(path).endpoints
    assert got == endpoints()
    assert got[0].status is EndpointStatus.IN_SERVICE
    assert got[2].status is EndpointStatus.FAILED
    assert got[2].failure_reason is not None and "ping health check" in got[2].failure_reason
    assert got[0].variant_overrides == (("AllTraffic", 0.5, 3), ("Other", None, 2))
    assert got[0].last_modified_time == T0 + timedelta(minutes=3)
    assert got[0].creation_time.tzinfo is not None


def test_round_trip_everything_and_resave_is_stable(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    save(path, full())
    first = path.read_text()
    loaded = load(path)
    assert loaded == full()
    save(path, loaded)
    assert path.read_text() == first


def test_document_carries_the_version(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    save(path, full())
    assert json.loads(path.read_text())["version"] == FORMAT_VERSION


def test_atomic_write_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "state.json"  # parent is created
    save(path, full())
    save(path, Snapshot(models=models()))
    assert sorted(p.name for p in path.parent.iterdir()) == ["state.json"]


def test_failed_write_keeps_the_old_file_and_removes_the_temp(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    save(path, full())
    before = path.read_text()
    bad = Model(
        name="bad",
        arn=ACCOUNT.model_arn("bad"),
        creation_time=T0,
        primary_container=ContainerDefinition(image="x", environment={"K": object()}),  # type: ignore[dict-item]
    )
    with pytest.raises(TypeError):
        save(path, Snapshot(models=[bad]))
    assert path.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


@pytest.mark.parametrize("version", [0, 2, None, "1"])
def test_unsupported_version_raises(tmp_path: Path, version: object) -> None:
    path = tmp_path / "state.json"
    document: dict[str, object] = {"models": [], "endpoint_configs": [], "endpoints": []}
    if version is not None:
        document["version"] = version
    path.write_text(json.dumps(document))
    with pytest.raises(ValueError, match="unsupported state format"):
        load(path)


def test_missing_file_gives_empty_snapshot(tmp_path: Path) -> None:
    got = load(tmp_path / "nope" / "state.json")
    assert got == Snapshot()
    assert got.models == [] and got.endpoint_configs == [] and got.endpoints == []


def test_module_exposes_format_version_one() -> None:
    assert persistence.FORMAT_VERSION == 1


def test_round_trip_what_an_endpoint_serves(tmp_path: Path) -> None:
    """The deployed copy of an endpoint's config and models survives their deletion from the registries."""
    path = tmp_path / "state.json"
    deployed = persistence.Deployed(configs()[0], (models()[0], models()[2]))
    save(path, Snapshot([], [], endpoints(), {"Ep": deployed}))
    loaded = load(path)
    assert loaded.deployed == {"Ep": deployed}
    assert loaded.models == [] and loaded.endpoint_configs == []
    assert deployed.model("no-data") == models()[2] and deployed.model("gone") is None


def test_a_state_file_from_before_deployed_copies_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    save(path, full())
    document = json.loads(path.read_text())
    del document["deployed"]  # as written by earlier versions
    path.write_text(json.dumps(document))
    loaded = load(path)
    assert loaded.deployed == {}
    assert loaded.endpoints == full().endpoints


def test_round_trip_multi_container_model_and_old_files_still_load(tmp_path: Path) -> None:
    first = ContainerDefinition(image="a:1", environment={"K": "1"}, hostname="pre")
    second = ContainerDefinition(
        image="b:1", model_data=ModelDataSource("s3://bucket/b.tar.gz"), hostname="post"
    )
    multi = Model(
        name="pipe",
        arn=ACCOUNT.model_arn("pipe"),
        creation_time=T0,
        primary_container=first,
        containers=(first, second),
        inference_mode="Direct",
    )
    path = tmp_path / "state.json"
    save(path, Snapshot(models=[*models(), multi]))
    got = load(path)
    assert got.models[-1] == multi
    assert got.models[-1].hostnames() == ("pre", "post")
    raw = json.loads(path.read_text())
    # a single-container model is written as before (no containers key): older servers read it
    assert all("containers" not in m for m in raw["models"][:-1])
    assert raw["models"][-1]["inference_mode"] == "Direct"
    assert got.models[0].containers == () and got.models[0].inference_mode is None


def test_round_trip_a_serverless_config_and_old_files_still_load(tmp_path: Path) -> None:
    from emulator.model.resources import ServerlessConfig

    path = tmp_path / "state.json"
    serverless = ServerlessConfig(memory_size_mb=2048, max_concurrency=5, provisioned_concurrency=2)
    config = EndpointConfig(
        name="Serverless",
        arn=ACCOUNT.endpoint_config_arn("Serverless"),
        production_variants=(ProductionVariant("AllTraffic", "WithData", 1, serverless=serverless),),
        creation_time=T0,
    )
    save(path, Snapshot(endpoint_configs=[config]))
    assert load(path).endpoint_configs == [config]
    document = json.loads(path.read_text())
    for variant in document["endpoint_configs"][0]["production_variants"]:
        del variant["serverless"]  # a file written before serverless endpoints
    path.write_text(json.dumps(document))
    assert load(path).endpoint_configs[0].production_variants[0].serverless is None
