"""The control plane through unchanged boto3: lifecycle, waiters, exact errors, listing."""

from __future__ import annotations

import json
import time
from pathlib import Path

import boto3
import httpx
import pytest
from botocore.exceptions import ClientError

from tests.fixtures.smlocal_server import CREDENTIALS, Smlocal, error_of, model_tar

pytestmark = pytest.mark.docker

ARN = "arn:aws:sagemaker:us-east-1:123456789012"


def test_lifecycle_with_boto3_waiters(smlocal: Smlocal, tmp_path: Path) -> None:
    sm = smlocal.sm
    data = model_tar(tmp_path / "model.tar.gz", {"weights.bin": b"w" * 100})
    arn = sm.create_model(
        ModelName="Life-Model", PrimaryContainer={"Image": smlocal.image, "ModelDataUrl": str(data)}
    )["ModelArn"]
    assert arn == f"{ARN}:model/life-model"
    sm.create_endpoint_config(
        EndpointConfigName="Life-Config",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": "Life-Model",
                "InitialInstanceCount": 1,
                "InstanceType": "ml.m5.large",
            }
        ],
    )
    created = sm.create_endpoint(EndpointName="Life-Endpoint", EndpointConfigName="Life-Config")
    assert created["EndpointArn"] == f"{ARN}:endpoint/life-endpoint"
    assert sm.describe_endpoint(EndpointName="Life-Endpoint")["EndpointStatus"] in ("Creating", "InService")

    sm.get_waiter("endpoint_in_service").wait(EndpointName="Life-Endpoint", WaiterConfig={"Delay": 1})
    described = sm.describe_endpoint(EndpointName="Life-Endpoint")
    assert described["EndpointStatus"] == "InService"
    assert described["EndpointConfigName"] == "Life-Config"
    (variant,) = described["ProductionVariants"]
    assert variant["VariantName"] == "AllTraffic"
    assert variant["CurrentInstanceCount"] == variant["DesiredInstanceCount"] == 1
    assert variant["CurrentWeight"] == 1.0
    assert variant["DeployedImages"][0]["SpecifiedImage"] == smlocal.image
    assert variant["DeployedImages"][0]["ResolvedImage"].startswith("smlocal-test/echo@sha256:")

    model = sm.describe_model(ModelName="life-model")  # control-plane lookups are case-insensitive
    assert model["PrimaryContainer"]["ModelDataUrl"] == str(data)
    config = sm.describe_endpoint_config(EndpointConfigName="Life-Config")
    assert config["ProductionVariants"][0]["InitialVariantWeight"] == 1.0

    sm.delete_endpoint(EndpointName="Life-Endpoint")
    sm.get_waiter("endpoint_deleted").wait(EndpointName="Life-Endpoint", WaiterConfig={"Delay": 1})
    with pytest.raises(ClientError) as exc:
        sm.describe_endpoint(EndpointName="Life-Endpoint")
    assert error_of(exc) == (
        "ValidationException",
        400,
        f'Could not find endpoint "{ARN}:endpoint/life-endpoint".',
    )
    sm.delete_endpoint_config(EndpointConfigName="Life-Config")
    sm.delete_model(ModelName="Life-Model")


@pytest.mark.parametrize(
    ("call", "kwargs", "message"),
    [
        ("describe_model", {"ModelName": "nope"}, f'Could not find model "{ARN}:model/nope".'),
        ("delete_model", {"ModelName": "nope"}, f'Could not find model "{ARN}:model/nope".'),
        (
            "describe_endpoint_config",
            {"EndpointConfigName": "Nope"},
            f'Could not find endpoint configuration "{ARN}:endpoint-config/nope".',
        ),
        (
            "delete_endpoint_config",
            {"EndpointConfigName": "nope"},
            f'Could not find endpoint configuration "{ARN}:endpoint-config/nope".',
        ),
        ("describe_endpoint", {"EndpointName": "nope"}, f'Could not find endpoint "{ARN}:endpoint/nope".'),
        ("delete_endpoint", {"EndpointName": "nope"}, f'Could not find endpoint "{ARN}:endpoint/nope".'),
        (
            "create_endpoint",
            {"EndpointName": "e", "EndpointConfigName": "nope"},
            f'Could not find endpoint configuration "{ARN}:endpoint-config/nope".',
        ),
        (
            "create_endpoint_config",
            {"EndpointConfigName": "c", "ProductionVariants": [{"VariantName": "v", "ModelName": "nope"}]},
            f'Could not find model "{ARN}:model/nope".',
        ),
    ],
)
def test_not_found(smlocal: Smlocal, call: str, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ClientError) as exc:
        getattr(smlocal.sm, call)(**kwargs)
    assert error_of(exc) == ("ValidationException", 400, message)


def test_already_existing_is_case_insensitive(smlocal: Smlocal) -> None:
    sm = smlocal.sm
    smlocal.deploy("Dup")
    try:
        for call, kwargs, kind in (
            ("create_model", {"ModelName": "DUP", "PrimaryContainer": {"Image": smlocal.image}}, "model/dup"),
            (
                "create_endpoint_config",
                {
                    "EndpointConfigName": "dup",
                    "ProductionVariants": [{"VariantName": "v", "ModelName": "Dup"}],
                },
                "endpoint-config/dup",
            ),
            ("create_endpoint", {"EndpointName": "dUp", "EndpointConfigName": "Dup"}, "endpoint/dup"),
        ):
            with pytest.raises(ClientError) as exc:
                getattr(sm, call)(**kwargs)
            noun = {"model/dup": "model", "endpoint-config/dup": "endpoint configuration"}.get(
                kind, "endpoint"
            )
            assert error_of(exc) == (
                "ValidationException",
                400,
                f'Cannot create already existing {noun} "{ARN}:{kind}".',
            )
    finally:
        smlocal.cleanup("Dup")


def test_mutation_while_creating_is_refused(smlocal: Smlocal) -> None:
    described = smlocal.deploy("Busy", env={"STARTUP_DELAY_S": "3"}, wait=False)
    assert described["EndpointStatus"] == "Creating"
    with pytest.raises(ClientError) as exc:
        smlocal.sm.delete_endpoint(EndpointName="Busy")
    assert error_of(exc) == (
        "ValidationException",
        400,
        f'Cannot update in-progress endpoint "{ARN}:endpoint/busy".',
    )
    assert smlocal.wait("Busy")["EndpointStatus"] == "InService"
    smlocal.cleanup("Busy")


def test_deleting_endpoint_blocks_recreation(smlocal: Smlocal) -> None:
    smlocal.deploy("Gone", env={"IGNORE_SIGTERM": "1"})
    smlocal.sm.delete_endpoint(EndpointName="Gone")
    assert smlocal.sm.describe_endpoint(EndpointName="Gone")["EndpointStatus"] == "Deleting"
    with pytest.raises(ClientError) as exc:
        smlocal.sm.create_endpoint(EndpointName="Gone", EndpointConfigName="Gone")
    assert error_of(exc) == (
        "ValidationException",
        400,
        f'Cannot create already existing endpoint "{ARN}:endpoint/gone".',
    )
    smlocal.cleanup("Gone")


@pytest.mark.parametrize(
    ("name", "constraint"),
    [
        ("bad_name", "Member must satisfy regular expression pattern: [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"),
        ("-lead", "Member must satisfy regular expression pattern: [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"),
        ("x" * 64, "Member must have length less than or equal to 63"),
    ],
)
def test_endpoint_names_are_validated(smlocal: Smlocal, name: str, constraint: str) -> None:
    with pytest.raises(ClientError) as exc:
        smlocal.sm.create_endpoint(EndpointName=name, EndpointConfigName="c")
    code, status, message = error_of(exc)
    assert (code, status) == ("ValidationException", 400)
    assert message.startswith(("1 validation error detected: Value ", "2 validation errors detected: Value "))
    assert f"at 'endpointName' failed to satisfy constraint: {constraint}" in message


def test_several_validation_errors_in_one_message(smlocal: Smlocal) -> None:
    with pytest.raises(ClientError) as exc:
        smlocal.sm.create_endpoint_config(
            EndpointConfigName="ok",
            ProductionVariants=[{"VariantName": "a_b", "ModelName": "m", "InstanceType": "ml.bogus"}],
        )
    code, status, message = error_of(exc)
    assert (code, status) == ("ValidationException", 400)
    assert message.startswith("2 validation errors detected: ")
    assert "at 'productionVariants.1.member.variantName'" in message
    assert (
        "at 'productionVariants.1.member.instanceType' failed to satisfy constraint: Member must satisfy enum"
        in message
    )


def test_unknown_image_is_refused_by_create_model(smlocal: Smlocal) -> None:
    with pytest.raises(ClientError) as exc:
        smlocal.sm.create_model(ModelName="noimg", PrimaryContainer={"Image": "no/such-image:1"})
    code, status, message = error_of(exc)
    assert (code, status) == ("ValidationException", 400)
    assert message.startswith("Requested image no/such-image:1 not found.")


def test_missing_s3_model_data_fails_create_model(smlocal: Smlocal, s3_bucket: str) -> None:
    with pytest.raises(ClientError) as exc:
        smlocal.sm.create_model(
            ModelName="nodata",
            PrimaryContainer={
                "Image": smlocal.image,
                "ModelDataUrl": f"s3://{s3_bucket}/missing/model.tar.gz",
            },
        )
    assert error_of(exc) == (
        "ValidationException",
        400,
        f"Could not find model data at s3://{s3_bucket}/missing/model.tar.gz.",
    )


def test_environment_over_32_kb_is_refused(smlocal: Smlocal) -> None:
    env = {f"K{i}": "v" * 1000 for i in range(40)}
    with pytest.raises(ClientError) as exc:
        smlocal.sm.create_model(
            ModelName="bigenv", PrimaryContainer={"Image": smlocal.image, "Environment": env}
        )
    code, status, message = error_of(exc)
    assert (code, status) == ("ValidationException", 400)
    assert "over the limit of 32768 bytes" in message


def test_unimplemented_operation_names_itself_and_is_not_retried(smlocal: Smlocal) -> None:
    with pytest.raises(ClientError) as exc:
        smlocal.sm.list_training_jobs()
    code, status, message = error_of(exc)
    assert (code, status) == ("NotImplemented", 501)
    assert "ListTrainingJobs" in message
    assert exc.value.response["ResponseMetadata"]["RetryAttempts"] == 0


def test_wire_level_errors_are_aws_shaped(smlocal: Smlocal) -> None:
    url = smlocal.server.url
    bad_json = httpx.post(
        url,
        content=b"{not json",
        headers={"X-Amz-Target": "SageMaker.ListModels", "Content-Type": "application/x-amz-json-1.1"},
    )
    assert bad_json.status_code == 400
    assert bad_json.json()["__type"].endswith("#SerializationException")  # Coral: not deserialisable
    assert bad_json.headers["x-amzn-RequestId"]
    unknown = httpx.post(url, content=b"{}", headers={"X-Amz-Target": "SageMaker.NoSuchThing"})
    assert unknown.status_code == 400
    assert unknown.json()["__type"].endswith("#UnknownOperationException")
    stray = httpx.get(f"{url}/no/such/path")
    assert stray.status_code == 400
    assert "message" in stray.json()


def test_listing_filters_sorts_and_pages(smlocal: Smlocal) -> None:
    sm = smlocal.sm
    names = [f"List-{i}" for i in range(5)]
    for name in names:
        sm.create_model(ModelName=name, PrimaryContainer={"Image": smlocal.image})
        time.sleep(0.01)  # distinct creation times, so the default sort is observable
    try:
        page = sm.list_models(NameContains="list-", MaxResults=2, SortBy="Name", SortOrder="Ascending")
        assert [m["ModelName"] for m in page["Models"]] == names[:2]
        seen = [
            m["ModelName"]
            for p in sm.get_paginator("list_models").paginate(
                NameContains="List-", PaginationConfig={"PageSize": 2}
            )
            for m in p["Models"]
        ]
        assert seen == list(reversed(names))  # CreationTime, Descending by default
        assert all(m["ModelArn"].startswith(f"{ARN}:model/list-") for m in page["Models"])
        sm.create_endpoint_config(
            EndpointConfigName="List-Config", ProductionVariants=[{"VariantName": "v", "ModelName": "List-0"}]
        )
        configs = sm.list_endpoint_configs(NameContains="List-Config")["EndpointConfigs"]
        assert [c["EndpointConfigName"] for c in configs] == ["List-Config"]
        assert sm.list_endpoints(StatusEquals="Failed", NameContains="zzz")["Endpoints"] == []
    finally:
        sm.delete_endpoint_config(EndpointConfigName="List-Config")
        for name in names:
            sm.delete_model(ModelName=name)


def test_standard_endpoint_variables_reach_the_server(
    smlocal: Smlocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER", smlocal.server.url)
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", smlocal.server.url)
    sm = boto3.client("sagemaker", **CREDENTIALS)
    rt = boto3.client("sagemaker-runtime", **CREDENTIALS)
    assert "Models" in sm.list_models()
    with pytest.raises(ClientError) as exc:
        rt.invoke_endpoint(EndpointName="nowhere", Body=b"x")
    assert error_of(exc) == ("ValidationError", 400, "Endpoint nowhere of account 123456789012 not found.")


def test_describe_reports_json_epoch_timestamps(smlocal: Smlocal) -> None:
    smlocal.sm.create_model(ModelName="Stamp", PrimaryContainer={"Image": smlocal.image})
    try:
        raw = httpx.post(
            smlocal.server.url,
            content=json.dumps({"ModelName": "Stamp"}).encode(),
            headers={"X-Amz-Target": "SageMaker.DescribeModel", "Content-Type": "application/x-amz-json-1.1"},
        ).json()
        assert isinstance(raw["CreationTime"], float)
        assert abs(raw["CreationTime"] - time.time()) < 60
    finally:
        smlocal.sm.delete_model(ModelName="Stamp")
