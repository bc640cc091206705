"""Model data the way SageMaker delivers it, through unchanged boto3 against the real server and
moto's S3: each naming rule of uncompressed model data (CompressionType None) as a failed
deployment with its FailureReason, S3Prefix without '/' refused by CreateModel, a gated model
without ModelAccessConfig.AcceptEula refused, and AdditionalModelDataSources channels read by the
container at /opt/ml/additional-model-data-sources/{ChannelName}, read-only, and adopted after a
restart."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import docker
import pytest
from botocore.config import Config

from emulator.model_data.gate import GATED_TAG
from emulator.runtime import labels
from tests.fixtures.smlocal_server import CREDENTIALS, Smlocal, error_of, model_tar, start_smlocal

pytestmark = pytest.mark.docker

CHANNELS_ROOT = "/opt/ml/additional-model-data-sources"


def invalid(uri: str, key_uri: str, reason: str) -> str:
    return (
        f'Invalid model data at URL "{uri}": the object "{key_uri}" {reason}. With CompressionType None '
        "each object must map to a file path under /opt/ml/model."
    )


def s3_source(
    uri: str, data_type: str = "S3Prefix", compression: str = "None", **extra: Any
) -> dict[str, Any]:
    return {"S3Uri": uri, "S3DataType": data_type, "CompressionType": compression, **extra}


def create(env: Smlocal, name: str, container: dict[str, Any], **variant: Any) -> dict[str, Any]:
    """CreateModel, CreateEndpointConfig, CreateEndpoint; DescribeEndpoint once it left Creating."""
    env.sm.create_model(ModelName=name, PrimaryContainer={"Image": env.image, **container})
    env.sm.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": name,
                "InitialInstanceCount": 1,
                "InstanceType": "ml.m5.large",
                **variant,
            }
        ],
    )
    env.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    return env.wait(name)


@pytest.fixture
def cleanup(smlocal: Smlocal) -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        smlocal.cleanup(name)


@pytest.mark.parametrize(
    ("keys", "bad", "reason"),
    [
        (["p/ok.bin", "p/sub/"], "p/sub/", "is a folder object (a zero-byte key ending in '/')"),
        (["p/", "p/ok.bin"], "p/", "is a folder object (a zero-byte key ending in '/')"),
        (
            ["p/weights", "p/weights/part1"],
            "p/weights",
            'is a file, but "s3://{b}/p/weights/part1" needs that name as a directory',
        ),
        (["p/a/./b"], "p/a/./b", "has a '.' path segment"),
        (["p/a/../b"], "p/a/../b", "has a '..' path segment"),
        (["p/a//b"], "p/a//b", "has an empty or blank path segment"),
        (["p/ /b"], "p/ /b", "has an empty or blank path segment"),
        (["p/" + "n" * 256], "p/" + "n" * 256, "has a path segment longer than 255 bytes"),
        (["p/a\x00b"], "p/a\x00b", "has a NUL character in its name"),
    ],
    ids=[
        "folder-object",
        "prefix-folder-object",
        "name-clash",
        "dot",
        "dotdot",
        "empty",
        "blank",
        "long",
        "nul",
    ],
)
def test_each_naming_rule_is_a_failed_deployment_with_its_text(
    smlocal: Smlocal,
    s3_client: Any,
    s3_bucket: str,
    cleanup: list[str],
    keys: list[str],
    bad: str,
    reason: str,
) -> None:
    for key in keys:
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=b"" if key.endswith("/") else b"data")
    uri = f"s3://{s3_bucket}/p/"
    cleanup.append("Naming")
    described = create(smlocal, "Naming", {"ModelDataSource": {"S3DataSource": s3_source(uri)}})
    assert described["EndpointStatus"] == "Failed"
    assert described["FailureReason"] == invalid(uri, f"s3://{s3_bucket}/{bad}", reason.format(b=s3_bucket))
    assert (
        not smlocal.server.service.fleet_instances("Naming")
        if hasattr(smlocal.server.service, "fleet_instances")
        else True
    )


def test_a_channel_breaking_a_naming_rule_fails_the_deployment_with_its_text(
    smlocal: Smlocal, s3_client: Any, s3_bucket: str, cleanup: list[str], tmp_path: Path
) -> None:
    s3_client.upload_file(str(model_tar(tmp_path / "m.tar.gz", {"w": b"w"})), s3_bucket, "m.tar.gz")
    s3_client.put_object(Bucket=s3_bucket, Key="draft/ok.bin", Body=b"ok")
    s3_client.put_object(Bucket=s3_bucket, Key="draft/folder/", Body=b"")
    uri = f"s3://{s3_bucket}/draft/"
    cleanup.append("BadChannel")
    described = create(
        smlocal,
        "BadChannel",
        {
            "ModelDataUrl": f"s3://{s3_bucket}/m.tar.gz",
            "AdditionalModelDataSources": [{"ChannelName": "draft", "S3DataSource": s3_source(uri)}],
        },
    )
    assert described["EndpointStatus"] == "Failed"
    assert described["FailureReason"] == invalid(
        uri, f"s3://{s3_bucket}/draft/folder/", "is a folder object (a zero-byte key ending in '/')"
    )


@pytest.mark.parametrize("where", ["ModelDataSource", "AdditionalModelDataSources"])
def test_an_s3_prefix_without_a_slash_is_refused_by_create_model(
    smlocal: Smlocal, s3_client: Any, s3_bucket: str, where: str
) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="p/w.bin", Body=b"w")
    source = s3_source(f"s3://{s3_bucket}/p")
    container: dict[str, Any] = {"Image": smlocal.image}
    if where == "ModelDataSource":
        container["ModelDataSource"] = {"S3DataSource": source}
    else:
        container["AdditionalModelDataSources"] = [{"ChannelName": "c", "S3DataSource": source}]
    with pytest.raises(smlocal.sm.exceptions.ClientError) as caught:
        smlocal.sm.create_model(ModelName="NoSlash", PrimaryContainer=container)
    assert error_of(caught) == (
        "ValidationException",
        400,
        f"S3Uri s3://{s3_bucket}/p of an S3Prefix data source must end with '/'.",
    )
    with pytest.raises(smlocal.sm.exceptions.ClientError):
        smlocal.sm.describe_model(ModelName="NoSlash")


def test_an_empty_prefix_is_refused_by_create_model(smlocal: Smlocal, s3_bucket: str) -> None:
    uri = f"s3://{s3_bucket}/nothing/"
    with pytest.raises(smlocal.sm.exceptions.ClientError) as caught:
        smlocal.sm.create_model(
            ModelName="Empty",
            PrimaryContainer={"Image": smlocal.image, "ModelDataSource": {"S3DataSource": s3_source(uri)}},
        )
    assert error_of(caught) == ("ValidationException", 400, f"Could not find model data at {uri}.")


EULA_TEXT = (
    "The AcceptEula value must be explicitly defined as True in order to accept the end-user license "
    'agreement (EULA) that this "{uri}" model requires. You are responsible for reviewing and complying '
    "with any applicable license terms and making sure they are acceptable for your use case before "
    "downloading or using a model."
)


@pytest.fixture
def gated_bucket(s3_client: Any, s3_bucket: str) -> str:
    s3_client.put_bucket_tagging(Bucket=s3_bucket, Tagging={"TagSet": [{"Key": GATED_TAG, "Value": "true"}]})
    s3_client.put_object(Bucket=s3_bucket, Key="llama/config.json", Body=b"{}")
    return s3_bucket


@pytest.mark.parametrize(
    ("access", "where"),
    [
        (None, "ModelDataSource"),
        ({"AcceptEula": False}, "ModelDataSource"),
        (None, "AdditionalModelDataSources"),
    ],
    ids=["no-access-config", "accept-eula-false", "channel"],
)
def test_a_gated_model_without_accept_eula_is_refused(
    smlocal: Smlocal, gated_bucket: str, access: dict[str, bool] | None, where: str
) -> None:
    uri = f"s3://{gated_bucket}/llama/"
    source = s3_source(uri, **({} if access is None else {"ModelAccessConfig": access}))
    container: dict[str, Any] = {"Image": smlocal.image}
    if where == "ModelDataSource":
        container["ModelDataSource"] = {"S3DataSource": source}
    else:
        container["AdditionalModelDataSources"] = [{"ChannelName": "c", "S3DataSource": source}]
    with pytest.raises(smlocal.sm.exceptions.ClientError) as caught:
        smlocal.sm.create_model(ModelName="Gated", PrimaryContainer=container)
    assert error_of(caught) == ("ValidationException", 400, EULA_TEXT.format(uri=uri))


def test_a_gated_model_with_accept_eula_deploys(
    smlocal: Smlocal, gated_bucket: str, cleanup: list[str]
) -> None:
    uri = f"s3://{gated_bucket}/llama/"
    source = s3_source(uri, ModelAccessConfig={"AcceptEula": True})
    cleanup.append("GatedOk")
    described = create(smlocal, "GatedOk", {"ModelDataSource": {"S3DataSource": source}})
    assert described["EndpointStatus"] == "InService", described.get("FailureReason")
    shown = smlocal.sm.describe_model(ModelName="GatedOk")["PrimaryContainer"]["ModelDataSource"]
    assert shown == {"S3DataSource": source}


def _listing(env: Smlocal, endpoint: str, folder: str) -> dict[str, Any]:
    body = env.rt.invoke_endpoint(EndpointName=endpoint, Body=b"x", CustomAttributes=f"model-dir={folder}")
    listing: dict[str, Any] = json.loads(body["Body"].read())
    return listing


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_additional_model_data_sources_are_read_by_the_container(
    smlocal: Smlocal, s3_client: Any, s3_bucket: str, cleanup: list[str], tmp_path: Path
) -> None:
    s3_client.upload_file(str(model_tar(tmp_path / "m.tar.gz", {"w.bin": b"main"})), s3_bucket, "m.tar.gz")
    s3_client.put_object(Bucket=s3_bucket, Key="draft/config.json", Body=b'{"draft": 1}')
    s3_client.put_object(Bucket=s3_bucket, Key="draft/shards/part-1", Body=b"shard")
    s3_client.put_object(Bucket=s3_bucket, Key="adapters/lora.safetensors", Body=b"lora")
    s3_client.upload_file(
        str(model_tar(tmp_path / "t.tar.gz", {"tok/vocab.txt": b"a b"})), s3_bucket, "t.tar.gz"
    )
    channels = [
        {"ChannelName": "draft", "S3DataSource": s3_source(f"s3://{s3_bucket}/draft/")},
        {
            "ChannelName": "lora",
            "S3DataSource": s3_source(f"s3://{s3_bucket}/adapters/lora.safetensors", "S3Object"),
        },
        {
            "ChannelName": "tok.v-1_x",
            "S3DataSource": s3_source(f"s3://{s3_bucket}/t.tar.gz", "S3Object", "Gzip"),
        },
    ]
    cleanup.append("Channels")
    described = create(
        smlocal,
        "Channels",
        {"ModelDataUrl": f"s3://{s3_bucket}/m.tar.gz", "AdditionalModelDataSources": channels},
    )
    assert described["EndpointStatus"] == "InService", described.get("FailureReason")
    assert _listing(smlocal, "Channels", "/opt/ml/model")["files"] == {"w.bin": _sha(b"main")}
    draft = _listing(smlocal, "Channels", f"{CHANNELS_ROOT}/draft")
    assert draft["files"] == {"config.json": _sha(b'{"draft": 1}'), "shards/part-1": _sha(b"shard")}
    assert draft["writable"] is False
    lora = _listing(smlocal, "Channels", f"{CHANNELS_ROOT}/lora")
    assert lora["files"] == {"lora.safetensors": _sha(b"lora")} and lora["writable"] is False
    tok = _listing(smlocal, "Channels", f"{CHANNELS_ROOT}/tok.v-1_x")
    assert tok["files"] == {"tok/vocab.txt": _sha(b"a b")} and tok["writable"] is False
    assert (
        smlocal.sm.describe_model(ModelName="Channels")["PrimaryContainer"]["AdditionalModelDataSources"]
        == channels
    )


def test_six_channels_are_refused_by_the_server(smlocal: Smlocal, s3_bucket: str) -> None:
    """botocore refuses a sixth channel itself; a client that skips its validation gets the server's."""
    unchecked = boto3.client(
        "sagemaker", endpoint_url=smlocal.server.url, config=Config(parameter_validation=False), **CREDENTIALS
    )
    channels = [
        {"ChannelName": f"c{i}", "S3DataSource": s3_source(f"s3://{s3_bucket}/c{i}/")} for i in range(6)
    ]
    with pytest.raises(unchecked.exceptions.ClientError) as caught:
        unchecked.create_model(
            ModelName="Six", PrimaryContainer={"Image": smlocal.image, "AdditionalModelDataSources": channels}
        )
    code, status, message = error_of(caught)
    assert (code, status) == ("ValidationException", 400)
    assert message.startswith("1 validation error detected: Value '[{"), message
    assert message.endswith(
        "at 'primaryContainer.additionalModelDataSources' failed to satisfy constraint: "
        "Member must have length less than or equal to 5"
    ), message


def test_a_restart_adopts_the_container_of_a_model_with_channels(
    tmp_path: Path, echo_image: str, s3_server: str, aws_credentials: None, s3_client: Any, s3_bucket: str
) -> None:
    """state.json keeps the channels and AcceptEula; the relaunched plan materializes the same
    directories, so the spec digest matches and the running container is adopted, not replaced."""
    s3_client.put_object(Bucket=s3_bucket, Key="main/w.bin", Body=b"main")
    s3_client.put_object(Bucket=s3_bucket, Key="draft/d.bin", Body=b"draft")
    container = {
        "ModelDataSource": {
            "S3DataSource": s3_source(f"s3://{s3_bucket}/main/", ModelAccessConfig={"AcceptEula": True})
        },
        "AdditionalModelDataSources": [
            {"ChannelName": "draft", "S3DataSource": s3_source(f"s3://{s3_bucket}/draft/")}
        ],
    }
    client = docker.from_env()

    def ids() -> list[str]:
        return [
            c["Id"] for c in client.api.containers(all=True, filters={"label": f"{labels.ENDPOINT}=Kept"})
        ]

    crashed = start_smlocal(tmp_path, echo_image, stop_containers=False, s3_endpoint_url=s3_server)
    try:
        assert create(crashed, "Kept", container)["EndpointStatus"] == "InService"
    finally:
        crashed.server.stop()
    before = ids()
    assert len(before) == 1
    restarted = start_smlocal(tmp_path, echo_image, s3_endpoint_url=s3_server)
    try:
        assert restarted.wait("Kept")["EndpointStatus"] == "InService"
        assert ids() == before  # adopted
        described = restarted.sm.describe_model(ModelName="Kept")["PrimaryContainer"]
        assert {k: described[k] for k in container} == container
        assert _listing(restarted, "Kept", f"{CHANNELS_ROOT}/draft")["files"] == {"d.bin": _sha(b"draft")}
        restarted.cleanup("Kept")
    finally:
        restarted.server.stop()
    assert ids() == []
    client.close()
