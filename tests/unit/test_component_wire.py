"""The wire layer of inference components (issue 26), pure: the request parsers, the refusals (the
serialize functions' and the wire's `unsupported.check`), the Describe/List shapes against botocore's
output shapes, and the endpoint config's side (a variant without ModelName, ManagedInstanceScaling,
ExecutionRoleArn). No server, no hosting service."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import botocore.model
import pytest

from emulator.errors import ValidationFailed
from emulator.model import messages
from emulator.model.components import (
    CapacitySize,
    ComponentContainer,
    ComponentDeploymentConfig,
    ComponentRuntime,
    ComponentSpec,
    ComponentStatus,
    ComputeRequirements,
    DeployedComponentImage,
    InferenceComponent,
    ManagedInstanceScaling,
    PlacementStrategy,
    PlacementSummary,
    RollingUpdatePolicy,
)
from emulator.model.resources import Endpoint, EndpointConfig, EndpointStatus, VariantSummary
from emulator.wire import control_api, unsupported
from emulator.wire import serialize as s
from emulator.wire.serialize.components import shaped
from emulator.wire.service_models import SAGEMAKER, operation_model
from emulator.wire.validation import validate_input

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
T1 = datetime(2026, 1, 2, 3, 9, 5, tzinfo=UTC)
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/lmi:latest"
ENDPOINT_ARN = "arn:aws:sagemaker:us-east-1:123456789012:endpoint/ep"
IC_ARN = "arn:aws:sagemaker:us-east-1:123456789012:inference-component/ic"
ROLE = "arn:aws:iam::123456789012:role/r"


def unsupported_text(feature: str) -> str:
    return f"{feature} is not supported by smlocal yet. See docs/api-coverage.md."


def refused(call: Any, *args: Any) -> str:
    with pytest.raises(ValidationFailed) as info:
        call(*args)
    return info.value.message


def wire_refusal(operation: str, params: Mapping[str, Any]) -> str:
    """What the wire answers a request botocore's model allows: validation passes, `check` refuses."""
    shape = operation_model(SAGEMAKER, operation).input_shape
    validate_input(shape, params)
    return refused(unsupported.check, shape, params, SAGEMAKER)


def full_create(**overrides: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "InferenceComponentName": "ic",
        "EndpointName": "ep",
        "VariantName": "AllTraffic",
        "Specification": {
            "InstanceType": "ml.g5.12xlarge",
            "Container": {
                "Image": IMAGE,
                "ArtifactUrl": "s3://bucket/model.tar.gz",
                "Environment": {"OPTION_TENSOR_PARALLEL_DEGREE": "2"},
            },
            "StartupParameters": {
                "ModelDataDownloadTimeoutInSeconds": 600,
                "ContainerStartupHealthCheckTimeoutInSeconds": 900,
            },
            "ComputeResourceRequirements": {
                "NumberOfCpuCoresRequired": 2,
                "NumberOfAcceleratorDevicesRequired": 2,
                "MinMemoryRequiredInMb": 4096,
                "MaxMemoryRequiredInMb": 8192,
            },
            "SchedulingConfig": {"PlacementStrategy": "BINPACK"},
        },
        "RuntimeConfig": {"CopyCount": 3},
        "Tags": [{"Key": "team", "Value": "ml"}],
    }
    params.update(overrides)
    return params


def spec_with(**members: Any) -> dict[str, Any]:
    return {"ComputeResourceRequirements": {"MinMemoryRequiredInMb": 1024}, **members}


def component(**overrides: Any) -> InferenceComponent:
    values: dict[str, Any] = {
        "name": "ic",
        "arn": IC_ARN,
        "endpoint_name": "ep",
        "variant_name": "AllTraffic",
        "spec": ComponentSpec(
            container=ComponentContainer(IMAGE, "s3://bucket/model.tar.gz", {"A": "1"}),
            compute=ComputeRequirements(4096, cpus=2.0, accelerators=1.0, max_memory_mb=8192),
            model_data_download_timeout_s=600,
            startup_health_check_timeout_s=900,
            placement=PlacementStrategy.BINPACK,
            instance_type="ml.g5.12xlarge",
        ),
        "desired_copies": 2,
        "creation_time": T0,
        "last_modified_time": T1,
        "status": ComponentStatus.IN_SERVICE,
    }
    values.update(overrides)
    return InferenceComponent(**values)


def assert_in_shape(value: Any, shape: botocore.model.Shape, path: str = "") -> None:
    """Every key of `value`, at every depth, is a member of `shape` (maps: any key)."""
    if shape.type_name == "structure":
        assert isinstance(value, dict), path
        for key, item in value.items():
            assert key in shape.members, f"{path}.{key} is not a member of {shape.name}"
            assert_in_shape(item, shape.members[key], f"{path}.{key}")
        missing = set(shape.required_members) - set(value)
        assert not missing, f"{path} lacks required {missing}"
    elif shape.type_name == "list":
        assert isinstance(value, list), path
        for item in value:
            assert_in_shape(item, shape.member, f"{path}[]")
    elif shape.type_name == "map":
        assert isinstance(value, dict), path


def output_shape(operation: str) -> botocore.model.Shape:
    shape = operation_model(SAGEMAKER, operation).output_shape
    assert shape is not None
    return shape


# ------------------------------------------------------------------------- CreateInferenceComponent


def test_a_full_create_request_is_valid_and_parses_into_the_domain() -> None:
    params = full_create()
    shape = operation_model(SAGEMAKER, "CreateInferenceComponent").input_shape
    validate_input(shape, params)
    unsupported.check(shape, params, SAGEMAKER)  # nothing refused
    got = s.create_inference_component_input(params)
    assert set(got) == {"name", "endpoint_name", "variant_name", "spec", "copies", "tags"}
    assert (got["name"], got["endpoint_name"], got["variant_name"]) == ("ic", "ep", "AllTraffic")
    assert got["copies"] == 3
    assert got["tags"] == (("team", "ml"),)
    assert got["spec"] == ComponentSpec(
        container=ComponentContainer(
            IMAGE, "s3://bucket/model.tar.gz", {"OPTION_TENSOR_PARALLEL_DEGREE": "2"}
        ),
        compute=ComputeRequirements(4096, cpus=2.0, accelerators=2.0, max_memory_mb=8192),
        model_data_download_timeout_s=600,
        startup_health_check_timeout_s=900,
        placement=PlacementStrategy.BINPACK,
        instance_type="ml.g5.12xlarge",
    )


def test_a_component_of_a_model_spreads_by_default() -> None:
    got = s.create_inference_component_input(full_create(Specification=spec_with(ModelName="m")))
    spec = got["spec"]
    assert spec.model_name == "m" and spec.container is None
    assert spec.placement is PlacementStrategy.SPREAD
    assert spec.compute == ComputeRequirements(1024)


def test_an_adapter_needs_neither_variant_nor_copies() -> None:
    got = s.create_inference_component_input(
        {
            "InferenceComponentName": "adapter",
            "EndpointName": "ep",
            "Specification": {
                "BaseInferenceComponentName": "base",
                "Container": {"ArtifactUrl": "s3://bucket/adapters/a/"},
            },
        }
    )
    assert got["spec"].adapter and got["spec"].base_component_name == "base"
    assert got["spec"].container == ComponentContainer(artifact_url="s3://bucket/adapters/a/")
    assert (got["variant_name"], got["copies"]) == ("", 0)


@pytest.mark.parametrize("runtime", [{"CopyCount": 0}, None])
def test_a_component_needs_a_copy_at_create(runtime: dict[str, int] | None) -> None:
    params = full_create(RuntimeConfig=runtime)
    if runtime is None:
        del params["RuntimeConfig"]
    assert refused(s.create_inference_component_input, params) == (
        "Inference components copy count an integer larger than 0"
    )
    assert messages.component_copy_count_at_create() == (
        "Inference components copy count an integer larger than 0"
    )


@pytest.mark.parametrize(
    "spec, text",
    [
        (
            spec_with(ModelName="m", Container={"Image": IMAGE}),
            "An inference component's Specification names a ModelName or a Container, not both.",
        ),
        (
            spec_with(),
            "An inference component's Specification needs a ModelName or a Container with an Image "
            "(unless it names a BaseInferenceComponentName).",
        ),
        (
            spec_with(Container={"ArtifactUrl": "s3://b/m.tar.gz"}),
            "An inference component's Specification needs a ModelName or a Container with an Image "
            "(unless it names a BaseInferenceComponentName).",
        ),
    ],
)
def test_a_specification_says_what_its_copies_run(spec: dict[str, Any], text: str) -> None:
    assert refused(s.create_inference_component_input, full_create(Specification=spec)) == text
    assert refused(
        s.update_inference_component_input, {"InferenceComponentName": "ic", "Specification": spec}
    ) == (text)


def test_create_needs_a_specification_and_a_variant() -> None:
    params = full_create()
    del params["Specification"]
    assert refused(s.create_inference_component_input, params) == (
        "CreateInferenceComponent needs a Specification."
    )
    params = full_create()
    del params["VariantName"]
    assert refused(s.create_inference_component_input, params) == (
        "CreateInferenceComponent needs a VariantName: the production variant of the endpoint its "
        "copies are placed on (only an adapter, which names a BaseInferenceComponentName, may omit it)."
    )


SPEC_REFUSALS = [
    ({"DataCacheConfig": {"EnableCaching": True}}, "InferenceComponent Specification DataCacheConfig"),
    (
        {"Container": {"Image": IMAGE, "ContainerMetricsConfig": {"MetricsEndpoints": []}}},
        "InferenceComponent Specification Container ContainerMetricsConfig",
    ),
    (
        {
            "ModelName": "m",
            "ComputeResourceRequirements": {
                "MinMemoryRequiredInMb": 1024,
                "AcceleratorPartitionType": "mig-1g.10gb",
            },
        },
        "InferenceComponent Specification ComputeResourceRequirements AcceleratorPartitionType",
    ),
    (
        {
            "ModelName": "m",
            "SchedulingConfig": {
                "PlacementStrategy": "SPREAD",
                "AvailabilityZoneBalance": {"EnforcementMode": "PERMISSIVE"},
            },
        },
        "InferenceComponent Specification SchedulingConfig AvailabilityZoneBalance",
    ),
]


@pytest.mark.parametrize("members, feature", SPEC_REFUSALS)
def test_what_smlocal_does_not_implement_of_a_specification_is_refused(
    members: dict[str, Any], feature: str
) -> None:
    params = full_create(Specification=spec_with(**members))
    assert refused(s.create_inference_component_input, params) == unsupported_text(feature)
    assert wire_refusal("CreateInferenceComponent", params) == unsupported_text(feature)
    update = {"InferenceComponentName": "ic", "Specification": spec_with(**members)}
    assert refused(s.update_inference_component_input, update) == unsupported_text(feature)
    assert wire_refusal("UpdateInferenceComponent", update) == unsupported_text(feature)


@pytest.mark.parametrize("operation", ["CreateInferenceComponent", "UpdateInferenceComponent"])
def test_several_specifications_are_refused(operation: str) -> None:
    params: dict[str, Any] = (
        full_create() if operation == "CreateInferenceComponent" else {"InferenceComponentName": "ic"}
    )
    params["Specifications"] = [spec_with(ModelName="m")]
    text = unsupported_text(f"{operation} Specifications")
    call = (
        s.create_inference_component_input
        if operation == "CreateInferenceComponent"
        else s.update_inference_component_input
    )
    assert refused(call, params) == text
    assert wire_refusal(operation, params) == text


def test_a_placement_strategy_smlocal_has_not_seen_is_refused_by_the_wire() -> None:
    shape = operation_model(SAGEMAKER, "CreateInferenceComponent").input_shape
    params = full_create(
        Specification=spec_with(ModelName="m", SchedulingConfig={"PlacementStrategy": "RANDOM"})
    )
    assert refused(unsupported.check, shape, params, SAGEMAKER) == unsupported_text(
        "CreateInferenceComponent Specification SchedulingConfig PlacementStrategy RANDOM"
    )


# ----------------------------------------------------------------- Update*, the other operations


def test_update_input_with_a_deployment_config() -> None:
    params = {
        "InferenceComponentName": "ic",
        "Specification": spec_with(ModelName="m2"),
        "RuntimeConfig": {"CopyCount": 4},
        "DeploymentConfig": {
            "RollingUpdatePolicy": {
                "MaximumBatchSize": {"Type": "COPY_COUNT", "Value": 1},
                "WaitIntervalInSeconds": 60,
                "MaximumExecutionTimeoutInSeconds": 1800,
                "RollbackMaximumBatchSize": {"Type": "CAPACITY_PERCENT", "Value": 50},
            },
            "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": "errors"}, {"AlarmName": "latency"}]},
        },
    }
    validate_input(operation_model(SAGEMAKER, "UpdateInferenceComponent").input_shape, params)
    got = s.update_inference_component_input(params)
    assert got["name"] == "ic"
    assert got["spec"].model_name == "m2"
    assert got["copies"] == 4
    assert got["deployment"] == ComponentDeploymentConfig(
        RollingUpdatePolicy(
            CapacitySize("COPY_COUNT", 1),
            60,
            maximum_execution_timeout_s=1800,
            rollback_maximum_batch_size=CapacitySize("CAPACITY_PERCENT", 50),
        ),
        alarms=("errors", "latency"),
    )


def test_update_input_leaves_what_it_does_not_name() -> None:
    assert s.update_inference_component_input({"InferenceComponentName": "ic"}) == {
        "name": "ic",
        "spec": None,
        "copies": None,
        "deployment": None,
    }
    assert (
        s.update_inference_component_input(
            {"InferenceComponentName": "ic", "RuntimeConfig": {"CopyCount": 0}}
        )["copies"]
        == 0
    )  # scaling to zero copies is an update's to allow (the model's minimum is 0)


def test_update_runtime_config_input() -> None:
    params = {"InferenceComponentName": "ic", "DesiredRuntimeConfig": {"CopyCount": 5}}
    validate_input(operation_model(SAGEMAKER, "UpdateInferenceComponentRuntimeConfig").input_shape, params)
    assert s.update_inference_component_runtime_config_input(params) == {"name": "ic", "copies": 5}


def test_the_six_operations_are_served_and_their_members_known() -> None:
    six = {
        "CreateInferenceComponent",
        "DescribeInferenceComponent",
        "ListInferenceComponents",
        "UpdateInferenceComponent",
        "UpdateInferenceComponentRuntimeConfig",
        "DeleteInferenceComponent",
    }
    assert six <= set(control_api.OPERATIONS)
    known = unsupported.known_members(SAGEMAKER)
    for operation in six:
        shape = operation_model(SAGEMAKER, operation).input_shape
        assert known[shape.name] == frozenset(shape.members), operation


# ------------------------------------------------------------------------ Describe / List shapes


def test_describe_answers_the_output_shapes_members_only() -> None:
    c = component(
        failure_reason="a copy failed",
        deployed_image=DeployedComponentImage(IMAGE, IMAGE + "@sha256:abc", T0),
        last_deployment_config=ComponentDeploymentConfig(
            RollingUpdatePolicy(CapacitySize("COPY_COUNT", 1), 30, 600, CapacitySize("COPY_COUNT", 2)),
            alarms=("a",),
        ),
    )
    runtime = ComponentRuntime(2, 1, (PlacementSummary("ml.g5.12xlarge", 1),))
    out = s.describe_inference_component(c, runtime, ENDPOINT_ARN)
    assert_in_shape(out, output_shape("DescribeInferenceComponent"))
    assert out["InferenceComponentName"] == "ic"
    assert out["InferenceComponentArn"] == IC_ARN
    assert (out["EndpointName"], out["EndpointArn"], out["VariantName"]) == ("ep", ENDPOINT_ARN, "AllTraffic")
    assert out["FailureReason"] == "a copy failed"
    assert out["InferenceComponentStatus"] == "InService"
    assert (out["CreationTime"], out["LastModifiedTime"]) == (T0.timestamp(), T1.timestamp())
    assert out["RuntimeConfig"] == {
        "DesiredCopyCount": 2,
        "CurrentCopyCount": 1,
        "PlacementStatus": [{"InstanceType": "ml.g5.12xlarge", "CurrentCopyCount": 1}],
    }
    assert out["Specification"] == {
        "InstanceType": "ml.g5.12xlarge",
        "Container": {
            "DeployedImage": {
                "SpecifiedImage": IMAGE,
                "ResolvedImage": IMAGE + "@sha256:abc",
                "ResolutionTime": T0.timestamp(),
            },
            "ArtifactUrl": "s3://bucket/model.tar.gz",
            "Environment": {"A": "1"},
        },
        "StartupParameters": {
            "ModelDataDownloadTimeoutInSeconds": 600,
            "ContainerStartupHealthCheckTimeoutInSeconds": 900,
        },
        "ComputeResourceRequirements": {
            "MinMemoryRequiredInMb": 4096,
            "NumberOfCpuCoresRequired": 2.0,
            "NumberOfAcceleratorDevicesRequired": 1.0,
            "MaxMemoryRequiredInMb": 8192,
        },
        "SchedulingConfig": {"PlacementStrategy": "BINPACK"},
    }
    assert out["LastDeploymentConfig"] == {
        "RollingUpdatePolicy": {
            "MaximumBatchSize": {"Type": "COPY_COUNT", "Value": 1},
            "WaitIntervalInSeconds": 30,
            "MaximumExecutionTimeoutInSeconds": 600,
            "RollbackMaximumBatchSize": {"Type": "COPY_COUNT", "Value": 2},
        },
        "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": "a"}]},
    }


def test_describe_without_live_state_reports_the_desired_copies_and_none_current() -> None:
    c = component(
        spec=ComponentSpec(model_name="m", compute=ComputeRequirements(1024)), status=ComponentStatus.CREATING
    )
    out = s.describe_inference_component(c, None, ENDPOINT_ARN)
    assert_in_shape(out, output_shape("DescribeInferenceComponent"))
    assert out["RuntimeConfig"] == {"DesiredCopyCount": 2, "CurrentCopyCount": 0}
    assert out["Specification"] == {
        "ModelName": "m",
        "ComputeResourceRequirements": {"MinMemoryRequiredInMb": 1024},
    }
    assert "FailureReason" not in out and "LastDeploymentConfig" not in out
    assert out["InferenceComponentStatus"] == "Creating"


def test_describe_drops_what_the_installed_output_shape_lacks() -> None:
    """An older botocore's RuntimeConfig without PlacementStatus (and a shape without the rest): the
    answer holds only what that shape has."""
    older = botocore.model.ShapeResolver(
        {
            "Out": {"type": "structure", "members": {"RuntimeConfig": {"shape": "Runtime"}}},
            "Runtime": {
                "type": "structure",
                "members": {"DesiredCopyCount": {"shape": "Int"}, "CurrentCopyCount": {"shape": "Int"}},
            },
            "Int": {"type": "integer"},
        }
    ).get_shape_by_name("Out")
    runtime = ComponentRuntime(1, 1, (PlacementSummary("ml.g5.xlarge", 1),))
    out = shaped(s.describe_inference_component(component(), runtime, ENDPOINT_ARN), older)
    assert out == {"RuntimeConfig": {"DesiredCopyCount": 1, "CurrentCopyCount": 1}}


def test_the_list_summary_is_the_summary_shape() -> None:
    out = s.inference_component_summary(component(), ENDPOINT_ARN)
    item = output_shape("ListInferenceComponents").members["InferenceComponents"].member
    assert_in_shape(out, item)
    assert set(out) == set(item.members)
    assert out["EndpointArn"] == ENDPOINT_ARN and out["InferenceComponentStatus"] == "InService"


@dataclass
class _Account:
    def endpoint_arn(self, name: str) -> str:
        return f"arn:aws:sagemaker:us-east-1:123456789012:endpoint/{name}"


@dataclass
class _Components:
    """The part of HostingService ListInferenceComponents reads."""

    inference_components: list[InferenceComponent]  # HostingService's is a Registry (iterable)
    account: _Account


def test_list_selects_endpoint_and_variant_before_paging() -> None:
    items = [
        component(name="a1", endpoint_name="a", creation_time=T0),
        component(name="b1", endpoint_name="b", creation_time=T1),
        component(name="a2", endpoint_name="a", variant_name="Other", creation_time=T1),
        component(name="a3", endpoint_name="a", status=ComponentStatus.FAILED, creation_time=T1),
    ]
    svc: Any = _Components(items, _Account())

    def names(params: dict[str, Any]) -> tuple[list[str], str | None]:
        out = asyncio.run(control_api.list_inference_components(svc, params))
        assert_in_shape(out, output_shape("ListInferenceComponents"))
        return [c["InferenceComponentName"] for c in out["InferenceComponents"]], out.get("NextToken")

    assert names({"EndpointNameEquals": "a", "SortBy": "Name", "SortOrder": "Ascending"}) == (
        ["a1", "a2", "a3"],
        None,
    )
    page, token = names(
        {
            "EndpointNameEquals": "a",
            "VariantNameEquals": "AllTraffic",
            "MaxResults": 1,
            "SortBy": "Name",
            "SortOrder": "Ascending",
        }
    )
    assert page == ["a1"] and token is not None
    assert names(
        {
            "EndpointNameEquals": "a",
            "VariantNameEquals": "AllTraffic",
            "MaxResults": 1,
            "SortBy": "Name",
            "SortOrder": "Ascending",
            "NextToken": token,
        }
    ) == (["a3"], None)
    assert names({"StatusEquals": "Failed"}) == (["a3"], None)
    assert names({"NameContains": "B"})[0] == ["b1"]
    out = asyncio.run(control_api.list_inference_components(svc, {"EndpointNameEquals": "b"}))
    assert out["InferenceComponents"][0]["EndpointArn"].endswith(":endpoint/b")


# ------------------------------------------------------------- the endpoint config's side


def test_a_variant_for_components_round_trips_with_managed_instance_scaling() -> None:
    raw = {
        "VariantName": "AllTraffic",
        "InstanceType": "ml.g5.12xlarge",
        "InitialInstanceCount": 1,
        "ManagedInstanceScaling": {
            "Status": "ENABLED",
            "MinInstanceCount": 0,
            "MaxInstanceCount": 4,
            "ScaleInPolicy": {"Strategy": "IDLE_RELEASE"},
        },
        "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"},
    }
    params = {"EndpointConfigName": "c", "ProductionVariants": [raw], "ExecutionRoleArn": ROLE}
    shape = operation_model(SAGEMAKER, "CreateEndpointConfig").input_shape
    validate_input(shape, params)
    unsupported.check(shape, params, SAGEMAKER)  # ManagedInstanceScaling is no longer refused
    got = s.create_endpoint_config_input(params)
    assert got["execution_role_arn"] == ROLE
    (v,) = got["variants"]
    assert v.model_name is None and v.hosts_components
    assert v.managed_instance_scaling == ManagedInstanceScaling(True, 0, 4, "IDLE_RELEASE")
    described = s.variant_description(v)
    assert "ModelName" not in described
    assert described["ManagedInstanceScaling"] == raw["ManagedInstanceScaling"]
    config = EndpointConfig("c", "arn:c", got["variants"], T0, execution_role_arn=ROLE)
    out = s.describe_endpoint_config(config)
    assert_in_shape(out, output_shape("DescribeEndpointConfig"))
    assert out["ExecutionRoleArn"] == ROLE
    assert out["ProductionVariants"] == [described]


def test_managed_instance_scaling_disabled_or_without_status() -> None:
    assert s.managed_instance_scaling({"Status": "DISABLED"}) == ManagedInstanceScaling(False)
    assert s.managed_instance_scaling({"MinInstanceCount": 1}) == ManagedInstanceScaling(False, 1)
    assert s.managed_instance_scaling(None) is None
    assert s.managed_instance_scaling_output(ManagedInstanceScaling(False)) == {"Status": "DISABLED"}


@pytest.mark.parametrize("member", ["MaximumStepSize", "CooldownInMinutes"])
def test_a_scale_in_policy_beyond_its_strategy_is_refused(member: str) -> None:
    variant = {
        "VariantName": "v",
        "InstanceType": "ml.g5.xlarge",
        "ManagedInstanceScaling": {
            "Status": "ENABLED",
            "ScaleInPolicy": {"Strategy": "IDLE_RELEASE", member: 5},
        },
    }
    feature = f"ProductionVariant ManagedInstanceScaling ScaleInPolicy {member}"
    assert refused(s.production_variant, variant) == unsupported_text(feature)
    params = {"EndpointConfigName": "c", "ProductionVariants": [variant], "ExecutionRoleArn": ROLE}
    assert wire_refusal("CreateEndpointConfig", params) == unsupported_text(feature)


def test_a_config_without_a_role_has_none() -> None:
    got = s.create_endpoint_config_input(
        {"EndpointConfigName": "c", "ProductionVariants": [{"VariantName": "v", "ModelName": "m"}]}
    )
    assert got["execution_role_arn"] is None
    config = EndpointConfig("c", "arn:c", got["variants"], T0)
    assert "ExecutionRoleArn" not in s.describe_endpoint_config(config)


def test_describe_endpoint_shows_a_variants_managed_instance_scaling() -> None:
    managed = ManagedInstanceScaling(True, 1, 3)
    endpoint = Endpoint(
        "ep",
        ENDPOINT_ARN,
        "c",
        EndpointStatus.IN_SERVICE,
        T0,
        T1,
        production_variants=(VariantSummary("AllTraffic", 1.0, 1.0, 1, 1, managed_instance_scaling=managed),),
    )
    out = s.describe_endpoint(endpoint)
    assert_in_shape(out, output_shape("DescribeEndpoint"))
    assert out["ProductionVariants"][0]["ManagedInstanceScaling"] == {
        "Status": "ENABLED",
        "MinInstanceCount": 1,
        "MaxInstanceCount": 3,
    }
    plain = Endpoint(
        "ep",
        ENDPOINT_ARN,
        "c",
        EndpointStatus.IN_SERVICE,
        T0,
        T1,
        production_variants=(VariantSummary("v", 1.0, 1.0, 1, 1),),
    )
    assert "ManagedInstanceScaling" not in s.describe_endpoint(plain)["ProductionVariants"][0]
