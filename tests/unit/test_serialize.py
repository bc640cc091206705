"""emulator.wire.serialize: AWS request shapes -> domain values, domain values -> Describe* shapes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from emulator.errors import ValidationFailed
from emulator.model.resources import (
    ContainerDefinition,
    DeployedImage,
    Endpoint,
    EndpointConfig,
    EndpointStatus,
    Model,
    ModelDataSource,
    ProductionVariant,
    RoutingStrategy,
    VariantSummary,
)
from emulator.wire import serialize as s
from emulator.wire import serialize_deployment

T0 = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/repo:tag"


def model_params(**extra: Any) -> dict[str, Any]:
    return {"ModelName": "m", "ExecutionRoleArn": "arn:aws:iam::1:role/r", **extra}


def unsupported(call: Any, *args: Any) -> str:
    with pytest.raises(ValidationFailed) as info:
        call(*args)
    assert "not supported by smlocal" in info.value.message
    return info.value.message


# ---------------------------------------------------------------------------------- CreateModel


def test_create_model_from_primary_container() -> None:
    got = s.create_model_input(
        model_params(
            PrimaryContainer={
                "Image": IMAGE,
                "ModelDataUrl": "s3://b/model.tar.gz",
                "Environment": {"A": "1"},
                "ContainerHostname": "h",
            },
            EnableNetworkIsolation=True,
            Tags=[{"Key": "k", "Value": "v"}, {"Key": "novalue"}],
        )
    )
    assert got["name"] == "m"
    assert got["execution_role_arn"] == "arn:aws:iam::1:role/r"
    assert got["enable_network_isolation"] is True
    assert got["tags"] == (("k", "v"), ("novalue", ""))
    c = got["container"]
    assert isinstance(c, ContainerDefinition)
    assert c.image == IMAGE
    assert dict(c.environment) == {"A": "1"}
    assert c.hostname == "h"
    assert c.mode == "SingleModel"
    assert c.model_data == ModelDataSource(
        uri="s3://b/model.tar.gz", compression="Gzip", data_type="S3Object"
    )


def test_create_model_from_containers_zero() -> None:
    got = s.create_model_input(model_params(Containers=[{"Image": "local:1"}]))
    assert got["container"] == ContainerDefinition(image="local:1")
    assert got["enable_network_isolation"] is False
    assert got["tags"] == ()
    assert got["container"].model_data is None


def test_both_primary_and_containers_is_validation_failed() -> None:
    with pytest.raises(ValidationFailed):
        s.create_model_input(model_params(PrimaryContainer={"Image": "a"}, Containers=[{"Image": "a"}]))


def test_neither_primary_nor_containers_is_validation_failed() -> None:
    with pytest.raises(ValidationFailed):
        s.create_model_input(model_params())


def test_several_containers_are_parsed_in_order_with_their_mode() -> None:
    got = s.create_model_input(
        model_params(
            Containers=[
                {"Image": "a", "ContainerHostname": "first", "Environment": {"K": "1"}},
                {"Image": "b", "ContainerHostname": "second", "ModelDataUrl": "s3://b/m.tar.gz"},
            ],
            InferenceExecutionConfig={"Mode": "Direct"},
        )
    )
    assert [c.image for c in got["containers"]] == ["a", "b"]
    assert [c.hostname for c in got["containers"]] == ["first", "second"]
    assert got["containers"][1].model_data == ModelDataSource("s3://b/m.tar.gz")
    assert got["container"] == got["containers"][0]
    assert got["inference_mode"] == "Direct"


def test_serial_is_the_default_and_not_recorded_when_not_given() -> None:
    got = s.create_model_input(model_params(Containers=[{"Image": "a"}, {"Image": "b"}]))
    assert got["inference_mode"] is None
    assert len(got["containers"]) == 2


def _refused(expected: str, **params: Any) -> None:
    with pytest.raises(ValidationFailed) as info:
        s.create_model_input(model_params(**params))
    assert info.value.message == expected


def test_direct_needs_a_hostname_on_every_container() -> None:
    _refused(
        "ContainerHostname must be specified for every container when InferenceExecutionConfig Mode "
        "is Direct.",
        Containers=[{"Image": "a", "ContainerHostname": "a"}, {"Image": "b"}],
        InferenceExecutionConfig={"Mode": "Direct"},
    )
    _refused(  # one container, too
        "ContainerHostname must be specified for every container when InferenceExecutionConfig Mode "
        "is Direct.",
        Containers=[{"Image": "a"}],
        InferenceExecutionConfig={"Mode": "Direct"},
    )


def test_serial_hostnames_are_all_or_none() -> None:
    _refused(
        "ContainerHostname must be specified for all containers or for none of them.",
        Containers=[{"Image": "a"}, {"Image": "b", "ContainerHostname": "b"}],
    )
    _refused(
        "ContainerHostname must be specified for all containers or for none of them.",
        Containers=[{"Image": "a", "ContainerHostname": "a"}, {"Image": "b"}],
        InferenceExecutionConfig={"Mode": "Serial"},
    )


def test_duplicate_hostnames_are_refused() -> None:
    _refused(
        "ContainerHostname Same is used by more than one container. Container hostnames must be unique.",
        Containers=[{"Image": "a", "ContainerHostname": "same"}, {"Image": "b", "ContainerHostname": "Same"}],
        InferenceExecutionConfig={"Mode": "Direct"},
    )


def test_more_than_15_containers_refused_by_the_parser_too() -> None:
    with pytest.raises(ValidationFailed) as info:
        s.create_model_input(model_params(Containers=[{"Image": "a"}] * 16))
    assert "less than or equal to 15" in info.value.message


def test_network_isolation_of_one_or_several_containers() -> None:
    for containers in ([{"Image": "a"}], [{"Image": "a"}, {"Image": "b"}]):
        got = s.create_model_input(model_params(Containers=containers, EnableNetworkIsolation=True))
        assert got["enable_network_isolation"] is True


def test_model_hostnames_default_by_position() -> None:
    m = Model(
        "m",
        "arn",
        ContainerDefinition("a"),
        T0,
        containers=(ContainerDefinition("a"), ContainerDefinition("b"), ContainerDefinition("c")),
    )
    assert m.hostnames() == ("container-1", "container-2", "container-3")
    assert m.multi_container and not m.direct
    single = Model("m", "arn", ContainerDefinition("a", hostname="ignored"), T0)
    assert single.all_containers == (ContainerDefinition("a", hostname="ignored"),)
    assert not single.multi_container


def test_describe_multi_container_model() -> None:
    c1 = ContainerDefinition("a", hostname="x", environment={"K": "v"})
    c2 = ContainerDefinition("b", hostname="y", model_data=ModelDataSource("s3://b/m.tar.gz"))
    m = Model("M", "arn", c1, T0, containers=(c1, c2), inference_mode="Direct")
    out = s.describe_model(m)
    assert "PrimaryContainer" not in out
    assert out["Containers"] == [
        {"Image": "a", "Mode": "SingleModel", "Environment": {"K": "v"}, "ContainerHostname": "x"},
        {"Image": "b", "Mode": "SingleModel", "ContainerHostname": "y", "ModelDataUrl": "s3://b/m.tar.gz"},
    ]
    assert out["InferenceExecutionConfig"] == {"Mode": "Direct"}
    serial = s.describe_model(Model("M", "arn", c1, T0, containers=(c1,)))
    assert "InferenceExecutionConfig" not in serial and len(serial["Containers"]) == 1


def test_multi_model_mode_and_cache_setting() -> None:
    primary = {"Image": "a", "Mode": "MultiModel", "ModelDataUrl": "s3://b/models/"}
    got = s.create_model_input(model_params(PrimaryContainer=primary))
    assert got["container"].multi_model and got["container"].model_cache_setting == "Enabled"
    off = {**primary, "MultiModelConfig": {"ModelCacheSetting": "Disabled"}}
    assert (
        s.create_model_input(model_params(PrimaryContainer=off))["container"].model_cache_setting
        == "Disabled"
    )
    # one multi-model container in a pipeline: not supported yet
    msg = unsupported(s.create_model_input, model_params(Containers=[primary, {"Image": "b"}]))
    assert "multi-model" in msg


def test_container_without_image_is_validation_failed() -> None:
    with pytest.raises(ValidationFailed):
        s.container_definition({"ModelDataUrl": "s3://b/m.tar.gz"})


def test_model_data_source_s3_prefix_none() -> None:
    c = s.container_definition(
        {
            "Image": "a",
            "ModelDataSource": {
                "S3DataSource": {
                    "S3Uri": "s3://b/prefix/",
                    "S3DataType": "S3Prefix",
                    "CompressionType": "None",
                }
            },
        }
    )
    assert c.model_data == ModelDataSource(uri="s3://b/prefix/", compression="None", data_type="S3Prefix")


def test_model_data_source_s3_object_gzip() -> None:
    c = s.container_definition(
        {
            "Image": "a",
            "ModelDataSource": {
                "S3DataSource": {
                    "S3Uri": "s3://b/m.tar.gz",
                    "S3DataType": "S3Object",
                    "CompressionType": "Gzip",
                }
            },
        }
    )
    assert c.model_data == ModelDataSource(uri="s3://b/m.tar.gz")


def test_s3_prefix_with_gzip_rejected() -> None:
    with pytest.raises(ValidationFailed, match="S3Prefix"):
        s.container_definition(
            {
                "Image": "a",
                "ModelDataSource": {
                    "S3DataSource": {
                        "S3Uri": "s3://b/prefix/",
                        "S3DataType": "S3Prefix",
                        "CompressionType": "Gzip",
                    }
                },
            }
        )


def test_s3_prefix_without_trailing_slash_rejected() -> None:
    with pytest.raises(ValidationFailed) as info:
        s.container_definition(
            {
                "Image": "a",
                "ModelDataSource": {
                    "S3DataSource": {
                        "S3Uri": "s3://b/prefix",
                        "S3DataType": "S3Prefix",
                        "CompressionType": "None",
                    }
                },
            }
        )
    assert "s3://b/prefix" in info.value.message
    assert "must end with '/'" in info.value.message


def test_model_data_url_and_source_together_rejected() -> None:
    with pytest.raises(ValidationFailed):
        s.container_definition(
            {
                "Image": "a",
                "ModelDataUrl": "s3://b/m.tar.gz",
                "ModelDataSource": {
                    "S3DataSource": {
                        "S3Uri": "s3://b/p/",
                        "S3DataType": "S3Prefix",
                        "CompressionType": "None",
                    }
                },
            }
        )


def test_model_data_source_without_s3_unsupported() -> None:
    unsupported(s.container_definition, {"Image": "a", "ModelDataSource": {"Other": {}}})


# ----------------------------------------------------------------------------------- variants


def test_production_variant_defaults() -> None:
    v = s.production_variant({"VariantName": "AllTraffic", "ModelName": "m"})
    assert v == ProductionVariant(variant_name="AllTraffic", model_name="m")
    assert v.initial_variant_weight == 1.0
    assert isinstance(v.initial_variant_weight, float)
    assert v.initial_instance_count == 1
    assert v.instance_type is None
    assert v.routing_strategy is RoutingStrategy.LEAST_OUTSTANDING_REQUESTS


def test_production_variant_explicit_values() -> None:
    v = s.production_variant(
        {
            "VariantName": "B",
            "ModelName": "m",
            "InitialInstanceCount": 2,
            "InstanceType": "ml.m5.large",
            "InitialVariantWeight": 3,
            "ContainerStartupHealthCheckTimeoutInSeconds": 600,
            "ModelDataDownloadTimeoutInSeconds": 900,
            "RoutingConfig": {"RoutingStrategy": "RANDOM"},
        }
    )
    assert v.initial_instance_count == 2
    assert v.instance_type == "ml.m5.large"
    assert v.initial_variant_weight == 3.0
    assert v.startup_health_check_timeout_s == 600
    assert v.model_data_download_timeout_s == 900
    assert v.routing_strategy is RoutingStrategy.RANDOM


@pytest.mark.parametrize("feature", ["InstancePools", "CapacityReservationConfig"])
def test_unsupported_variant_features(feature: str) -> None:
    msg = unsupported(s.production_variant, {"VariantName": "v", "ModelName": "m", feature: {}})
    assert feature in msg


def test_a_serverless_variant_has_no_instances_and_is_described_with_its_config() -> None:
    v = s.production_variant(
        {
            "VariantName": "v",
            "ModelName": "m",
            "ServerlessConfig": {"MemorySizeInMB": 3072, "MaxConcurrency": 4, "ProvisionedConcurrency": 2},
        }
    )
    assert v.serverless is not None and v.serverless.memory_size_mb == 3072
    assert v.initial_instance_count == 1  # the warm container ProvisionedConcurrency keeps
    described = s.variant_description(v)
    assert "InitialInstanceCount" not in described
    assert described["ServerlessConfig"] == {
        "MemorySizeInMB": 3072,
        "MaxConcurrency": 4,
        "ProvisionedConcurrency": 2,
    }
    cold = s.production_variant(
        {
            "VariantName": "v",
            "ModelName": "m",
            "ServerlessConfig": {"MemorySizeInMB": 1024, "MaxConcurrency": 1},
        }
    )
    assert cold.initial_instance_count == 0


def test_a_variant_without_model_name_hosts_inference_components() -> None:
    v = s.production_variant({"VariantName": "v", "InstanceType": "ml.g5.xlarge"})
    assert v.model_name is None and v.hosts_components
    assert "ModelName" not in s.variant_description(v)


@pytest.mark.parametrize("feature", ["ShadowProductionVariants", "ExplainerConfig", "DataCaptureConfig"])
def test_unsupported_endpoint_config_features(feature: str) -> None:
    params = {
        "EndpointConfigName": "c",
        "ProductionVariants": [{"VariantName": "v", "ModelName": "m"}],
        feature: {},
    }
    assert feature in unsupported(s.create_endpoint_config_input, params)


def test_create_endpoint_config_input() -> None:
    got = s.create_endpoint_config_input(
        {
            "EndpointConfigName": "c",
            "ProductionVariants": [
                {"VariantName": "a", "ModelName": "m1"},
                {"VariantName": "b", "ModelName": "m2", "InitialVariantWeight": 0.5},
            ],
            "KmsKeyId": "k",
            "Tags": [{"Key": "t", "Value": "1"}],
        }
    )
    assert got["name"] == "c"
    assert [v.variant_name for v in got["variants"]] == ["a", "b"]
    assert isinstance(got["variants"], tuple)
    assert got["kms_key_id"] == "k"
    assert got["tags"] == (("t", "1"),)


def test_create_endpoint_input() -> None:
    got = s.create_endpoint_input({"EndpointName": "e", "EndpointConfigName": "c"})
    assert got == {"name": "e", "config_name": "c", "tags": (), "deployment": None}


DEPLOYMENT = {
    "BlueGreenUpdatePolicy": {
        "TrafficRoutingConfiguration": {
            "Type": "CANARY",
            "WaitIntervalInSeconds": 30,
            "CanarySize": {"Type": "INSTANCE_COUNT", "Value": 1},
        },
        "TerminationWaitInSeconds": 60,
        "MaximumExecutionTimeoutInSeconds": 900,
    },
    "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": "errors"}, {"AlarmName": "latency"}]},
}


def test_deployment_config_round_trips() -> None:
    parsed = serialize_deployment.deployment_config_input(DEPLOYMENT)
    assert parsed is not None
    assert parsed.rollback_alarms == ("errors", "latency")
    assert parsed.blue_green is not None and parsed.blue_green.traffic_routing.canary_size is not None
    assert parsed.blue_green.traffic_routing.canary_size.value == 1
    assert serialize_deployment.deployment_config_output(parsed) == DEPLOYMENT
    rolling = {
        "RollingUpdatePolicy": {
            "MaximumBatchSize": {"Type": "CAPACITY_PERCENT", "Value": 50},
            "WaitIntervalInSeconds": 0,
            "RollbackMaximumBatchSize": {"Type": "INSTANCE_COUNT", "Value": 2},
        }
    }
    parsed = serialize_deployment.deployment_config_input(rolling)
    assert parsed is not None and serialize_deployment.deployment_config_output(parsed) == rolling
    got = s.create_endpoint_input(
        {"EndpointName": "e", "EndpointConfigName": "c", "DeploymentConfig": rolling}
    )
    assert got["deployment"] == parsed


# ------------------------------------------------------------------------------------ outputs


def test_describe_model_pascal_case_and_epoch_seconds() -> None:
    m = Model(
        name="M",
        arn="arn:aws:sagemaker:us-east-1:1:model/m",
        creation_time=T0,
        execution_role_arn="role",
        primary_container=ContainerDefinition(
            image="img", environment={"A": "1"}, model_data=ModelDataSource("s3://b/m.tar.gz"), hostname="h"
        ),
    )
    out = s.describe_model(m)
    assert out == {
        "ModelName": "M",
        "ModelArn": "arn:aws:sagemaker:us-east-1:1:model/m",
        "PrimaryContainer": {
            "Image": "img",
            "Mode": "SingleModel",
            "Environment": {"A": "1"},
            "ContainerHostname": "h",
            "ModelDataUrl": "s3://b/m.tar.gz",
        },
        "CreationTime": T0.timestamp(),
        "EnableNetworkIsolation": False,
        "ExecutionRoleArn": "role",
    }
    assert out["CreationTime"] == 1704164645.0


def test_describe_model_prefix_data_and_no_role() -> None:
    m = Model(
        name="M",
        arn="a",
        creation_time=T0,
        primary_container=ContainerDefinition(
            image="img", model_data=ModelDataSource("s3://b/p/", compression="None", data_type="S3Prefix")
        ),
    )
    out = s.describe_model(m)
    assert "ExecutionRoleArn" not in out
    assert out["PrimaryContainer"] == {
        "Image": "img",
        "Mode": "SingleModel",
        "ModelDataSource": {
            "S3DataSource": {"S3Uri": "s3://b/p/", "S3DataType": "S3Prefix", "CompressionType": "None"}
        },
    }


def test_describe_endpoint_config() -> None:
    c = EndpointConfig(
        name="C",
        arn="arn-c",
        creation_time=T0,
        kms_key_id="k",
        production_variants=(
            ProductionVariant("a", "m", instance_type="ml.m5.large", startup_health_check_timeout_s=60),
            ProductionVariant(
                "b", "m", 2, initial_variant_weight=0.5, routing_strategy=RoutingStrategy.RANDOM
            ),
        ),
    )
    out = s.describe_endpoint_config(c)
    assert out["EndpointConfigName"] == "C"
    assert out["EndpointConfigArn"] == "arn-c"
    assert out["CreationTime"] == T0.timestamp()
    assert out["KmsKeyId"] == "k"
    assert out["ProductionVariants"] == [
        {
            "VariantName": "a",
            "ModelName": "m",
            "InitialInstanceCount": 1,
            "InitialVariantWeight": 1.0,
            "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"},
            "InstanceType": "ml.m5.large",
            "ContainerStartupHealthCheckTimeoutInSeconds": 60,
        },
        {
            "VariantName": "b",
            "ModelName": "m",
            "InitialInstanceCount": 2,
            "InitialVariantWeight": 0.5,
            "RoutingConfig": {"RoutingStrategy": "RANDOM"},
        },
    ]


def test_describe_endpoint() -> None:
    later = datetime(2024, 1, 2, 3, 14, 5, tzinfo=UTC)
    e = Endpoint(
        name="E",
        arn="arn-e",
        endpoint_config_name="C",
        status=EndpointStatus.FAILED,
        creation_time=T0,
        last_modified_time=later,
        failure_reason="why",
        production_variants=(
            VariantSummary("a", 1.0, 1.0, 1, 1, (DeployedImage("img:1", "img@sha256:abc", later),)),
        ),
    )
    out = s.describe_endpoint(e)
    assert out == {
        "EndpointName": "E",
        "EndpointArn": "arn-e",
        "EndpointConfigName": "C",
        "EndpointStatus": "Failed",
        "CreationTime": T0.timestamp(),
        "LastModifiedTime": later.timestamp(),
        "FailureReason": "why",
        "ProductionVariants": [
            {
                "VariantName": "a",
                "DeployedImages": [
                    {
                        "SpecifiedImage": "img:1",
                        "ResolvedImage": "img@sha256:abc",
                        "ResolutionTime": later.timestamp(),
                    }
                ],
                "CurrentWeight": 1.0,
                "DesiredWeight": 1.0,
                "CurrentInstanceCount": 1,
                "DesiredInstanceCount": 1,
            }
        ],
    }
    assert isinstance(out["CreationTime"], float)


def test_describe_endpoint_minimal_has_no_optional_keys() -> None:
    e = Endpoint("E", "arn", "C", EndpointStatus.CREATING, T0, T0)
    out = s.describe_endpoint(e)
    assert "FailureReason" not in out and "ProductionVariants" not in out
    assert out["EndpointStatus"] == "Creating"


def test_summaries() -> None:
    m = Model("M", "am", ContainerDefinition("i"), T0)
    c = EndpointConfig("C", "ac", (), T0)
    e = Endpoint("E", "ae", "C", EndpointStatus.IN_SERVICE, T0, T0)
    assert s.model_summary(m) == {"ModelName": "M", "ModelArn": "am", "CreationTime": T0.timestamp()}
    assert s.endpoint_config_summary(c) == {
        "EndpointConfigName": "C",
        "EndpointConfigArn": "ac",
        "CreationTime": T0.timestamp(),
    }
    assert s.endpoint_summary(e) == {
        "EndpointName": "E",
        "EndpointArn": "ae",
        "CreationTime": T0.timestamp(),
        "LastModifiedTime": T0.timestamp(),
        "EndpointStatus": "InService",
    }


@pytest.mark.parametrize(
    ("uri", "local"),
    [
        ("file:///tmp/model.tar.gz", True),
        ("/abs/model.tar.gz", True),
        ("./rel/model", True),
        ("../up/model", True),
        ("model.tar.gz", True),
        ("dir/sub/model.tar.gz", True),
        ("s3://bucket/model.tar.gz", False),
        ("https://example.com/model.tar.gz", False),
    ],
)
def test_is_local_uri(uri: str, local: bool) -> None:
    assert s.is_local_uri(uri) is local
