"""ModelDataSource's ModelAccessConfig and AdditionalModelDataSources without Docker: CreateModel's
parse and refusals, DescribeModel's shape, state.json, the plan's spec digest and the container's
read-only mounts."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from emulator.errors import ValidationFailed
from emulator.hosting.endpoints.persistence import Snapshot, load, save
from emulator.hosting.fleet.plan import VariantPlan
from emulator.model import messages
from emulator.model.resources import (
    AdditionalModelData,
    ContainerDefinition,
    Model,
    ModelDataSource,
    ProductionVariant,
    ServerlessConfig,
)
from emulator.model.serverless import check_endpoint_config
from emulator.runtime.base import ContainerSpec, ResolvedImage
from emulator.runtime.docker_run import create_options
from emulator.wire import serialize as s

T0 = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)


def s3_source(uri: str, data_type: str = "S3Prefix", **extra: Any) -> dict[str, Any]:
    return {"S3Uri": uri, "S3DataType": data_type, "CompressionType": "None", **extra}


def container(**extra: Any) -> ContainerDefinition:
    return s.container_definition({"Image": "img", **extra})


def refused(**extra: Any) -> str:
    with pytest.raises(ValidationFailed) as info:
        container(**extra)
    return info.value.message


def test_accept_eula_and_channels_are_parsed_in_order() -> None:
    c = container(
        ModelDataSource={"S3DataSource": s3_source("s3://b/m/", ModelAccessConfig={"AcceptEula": True})},
        AdditionalModelDataSources=[
            {"ChannelName": "draft", "S3DataSource": s3_source("s3://b/draft/")},
            {"ChannelName": "lora.v-1_a", "S3DataSource": s3_source("s3://b/l.bin", "S3Object")},
        ],
    )
    assert c.model_data == ModelDataSource("s3://b/m/", "None", "S3Prefix", accept_eula=True)
    assert [(a.channel_name, a.source.uri, a.mount_path) for a in c.additional_model_data] == [
        ("draft", "s3://b/draft/", "/opt/ml/additional-model-data-sources/draft"),
        ("lora.v-1_a", "s3://b/l.bin", "/opt/ml/additional-model-data-sources/lora.v-1_a"),
    ]
    assert c.all_model_data == (c.model_data, *(a.source for a in c.additional_model_data))


def test_accept_eula_false_is_kept_and_none_without_model_access_config() -> None:
    c = container(
        ModelDataSource={"S3DataSource": s3_source("s3://b/m/", ModelAccessConfig={"AcceptEula": False})}
    )
    assert c.model_data is not None and c.model_data.accept_eula is False
    assert container(ModelDataUrl="s3://b/m.tar.gz").model_data == ModelDataSource("s3://b/m.tar.gz")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"ModelDataSource": {"S3DataSource": s3_source("s3://b/no-slash")}},
            messages.prefix_without_slash("s3://b/no-slash"),
        ),
        (
            {"AdditionalModelDataSources": [{"ChannelName": "c", "S3DataSource": s3_source("s3://b/x")}]},
            messages.prefix_without_slash("s3://b/x"),
        ),
        (
            {"ModelDataSource": {"S3DataSource": {**s3_source("s3://b/p/"), "CompressionType": "Gzip"}}},
            messages.prefix_needs_uncompressed(),
        ),
        (
            {
                "AdditionalModelDataSources": [
                    {"ChannelName": "c", "S3DataSource": s3_source("s3://b/x/")},
                    {"ChannelName": "c", "S3DataSource": s3_source("s3://b/y/")},
                ]
            },
            messages.duplicate_channel("c"),
        ),
        (
            {
                "Mode": "MultiModel",
                "ModelDataUrl": "s3://b/models/",
                "AdditionalModelDataSources": [{"ChannelName": "c", "S3DataSource": s3_source("s3://b/x/")}],
            },
            messages.channels_with_multi_model(),
        ),
    ],
    ids=["prefix-without-slash", "channel-prefix-without-slash", "prefix-gzip", "duplicate-channel", "mme"],
)
def test_refusals(extra: dict[str, Any], message: str) -> None:
    assert refused(**extra) == message


def test_the_texts() -> None:
    assert (
        messages.prefix_without_slash("s3://b/x")
        == "S3Uri s3://b/x of an S3Prefix data source must end with '/'."
    )
    assert messages.eula_required("s3://b/llama/") == (
        "The AcceptEula value must be explicitly defined as True in order to accept the end-user license "
        'agreement (EULA) that this "s3://b/llama/" model requires. You are responsible for reviewing and '
        "complying with any applicable license terms and making sure they are acceptable for your use case "
        "before downloading or using a model."
    )


def _model(c: ContainerDefinition) -> Model:
    return Model(name="m", arn="arn:aws:sagemaker:us-east-1:1:model/m", primary_container=c, creation_time=T0)


CHANNELS = (
    AdditionalModelData("draft", ModelDataSource("s3://b/draft/", "None", "S3Prefix", accept_eula=False)),
    AdditionalModelData("tok", ModelDataSource("s3://b/tok.tar.gz")),
)


def test_describe_model_shows_access_config_and_channels() -> None:
    c = ContainerDefinition(
        image="img",
        model_data=ModelDataSource("s3://b/m.tar.gz", accept_eula=True),
        additional_model_data=CHANNELS,
    )
    out = s.describe_model(_model(c))["PrimaryContainer"]
    assert "ModelDataUrl" not in out  # a ModelAccessConfig needs the ModelDataSource form
    assert out["ModelDataSource"] == {
        "S3DataSource": {
            "S3Uri": "s3://b/m.tar.gz",
            "S3DataType": "S3Object",
            "CompressionType": "Gzip",
            "ModelAccessConfig": {"AcceptEula": True},
        }
    }
    assert out["AdditionalModelDataSources"] == [
        {
            "ChannelName": "draft",
            "S3DataSource": {
                "S3Uri": "s3://b/draft/",
                "S3DataType": "S3Prefix",
                "CompressionType": "None",
                "ModelAccessConfig": {"AcceptEula": False},
            },
        },
        {
            "ChannelName": "tok",
            "S3DataSource": {
                "S3Uri": "s3://b/tok.tar.gz",
                "S3DataType": "S3Object",
                "CompressionType": "Gzip",
            },
        },
    ]


def test_state_json_keeps_access_config_and_channels(tmp_path: Path) -> None:
    c = ContainerDefinition(
        image="img",
        model_data=ModelDataSource("s3://b/m/", "None", "S3Prefix", True),
        additional_model_data=CHANNELS,
    )
    save(tmp_path / "state.json", Snapshot(models=[_model(c)]))
    assert load(tmp_path / "state.json").models == [_model(c)]


def test_channels_change_the_spec_digest_and_are_mounted_read_only(tmp_path: Path) -> None:
    variant = ProductionVariant("v", "m")
    image = ResolvedImage("img", "img@sha256:1", "sha256:1")
    plain = VariantPlan("e", variant, _model(ContainerDefinition("img")), image, tmp_path / "model")
    channels = ((tmp_path / "d1", "/opt/ml/additional-model-data-sources/draft"),)
    with_channels = VariantPlan(
        "e", variant, _model(ContainerDefinition("img")), image, tmp_path / "model", channel_dirs=channels
    )
    other = VariantPlan(
        "e",
        variant,
        _model(ContainerDefinition("img")),
        image,
        tmp_path / "model",
        channel_dirs=((tmp_path / "d2", "/opt/ml/additional-model-data-sources/draft"),),
    )
    digests = {p.spec_digest(8080) for p in (plain, with_channels, other)}
    assert len(digests) == 3
    spec = ContainerSpec(
        image="img", name="n", labels={}, model_dir=tmp_path / "model", read_only_mounts=channels
    )
    mounts = [(m["Target"], m["Source"], m["ReadOnly"]) for m in create_options(spec)["mounts"]]
    assert mounts == [
        ("/opt/ml/model", str(tmp_path / "model"), True),
        ("/opt/ml/additional-model-data-sources/draft", str(tmp_path / "d1"), True),
    ]


def test_a_serverless_variant_refuses_a_model_with_channels() -> None:
    model = _model(
        ContainerDefinition(
            "img", model_data=ModelDataSource("s3://b/m.tar.gz"), additional_model_data=CHANNELS
        )
    )
    variant = ProductionVariant("v", "m", serverless=ServerlessConfig(memory_size_mb=2048, max_concurrency=1))
    with pytest.raises(ValidationFailed) as info:
        check_endpoint_config([variant], lambda _name: model, None)
    assert info.value.message == messages.serverless_model_data_source("m")


def test_each_container_of_a_multi_container_instance_mounts_its_own_channels(tmp_path: Path) -> None:
    from emulator.hosting.fleet.instance_limits import InstanceLimits
    from emulator.hosting.fleet.multi_container import container_specs
    from emulator.hosting.fleet.plan import PlannedContainer
    from emulator.model import platform_env

    image = ResolvedImage("img", "img@sha256:1", "sha256:1")
    a = (tmp_path / "a-draft", "/opt/ml/additional-model-data-sources/draft")
    planned = tuple(
        PlannedContainer(
            host,
            ContainerDefinition("img"),
            image,
            tmp_path / host,
            platform_env.multi_container_ports(i),
            ch,
        )
        for i, (host, ch) in enumerate([("a", (a,)), ("b", ())])
    )
    models = (ContainerDefinition("img", hostname="a"), ContainerDefinition("img", hostname="b"))
    model = Model("m", "arn:aws:sagemaker:us-east-1:1:model/m", models[0], T0, containers=models)
    plan = VariantPlan("e", ProductionVariant("v", "m"), model, image, tmp_path / "a", planned, "net")
    specs = container_specs(plan, "base", {}, "net-id", InstanceLimits())
    assert [s.read_only_mounts for s in specs] == [(a,), ()]
    without = VariantPlan(
        "e",
        ProductionVariant("v", "m"),
        model,
        image,
        tmp_path / "a",
        tuple(PlannedContainer(c.hostname, c.definition, image, c.model_dir, c.ports) for c in planned),
        "net",
    )
    assert plan.spec_digest(8080) != without.spec_digest(8080)
