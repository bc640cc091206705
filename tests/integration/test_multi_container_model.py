"""Multi-container models through unchanged boto3: CreateModel's Containers and
InferenceExecutionConfig, SageMaker's validation (spec §4), DescribeModel's shape."""

from __future__ import annotations

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.fixtures.smlocal_server import CREDENTIALS, Smlocal, error_of

pytestmark = pytest.mark.docker


def test_containers_and_mode_round_trip_through_describe_model(smlocal: Smlocal) -> None:
    sm = smlocal.sm
    sm.create_model(
        ModelName="mc-direct",
        Containers=[
            {"Image": smlocal.image, "ContainerHostname": "alpha", "Environment": {"K": "1"}},
            {"Image": smlocal.image, "ContainerHostname": "beta"},
        ],
        InferenceExecutionConfig={"Mode": "Direct"},
    )
    try:
        got = sm.describe_model(ModelName="mc-direct")
        assert "PrimaryContainer" not in got
        assert [c["ContainerHostname"] for c in got["Containers"]] == ["alpha", "beta"]
        assert got["Containers"][0]["Environment"] == {"K": "1"}
        assert got["InferenceExecutionConfig"] == {"Mode": "Direct"}
    finally:
        sm.delete_model(ModelName="mc-direct")


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"Containers": [{"ContainerHostname": "a"}, {}], "InferenceExecutionConfig": {"Mode": "Direct"}},
            "ContainerHostname must be specified for every container when InferenceExecutionConfig Mode "
            "is Direct.",
        ),
        (
            {"Containers": [{}, {"ContainerHostname": "b"}]},
            "ContainerHostname must be specified for all containers or for none of them.",
        ),
        (
            {"Containers": [{"ContainerHostname": "x"}, {"ContainerHostname": "x"}]},
            "ContainerHostname x is used by more than one container. Container hostnames must be unique.",
        ),
        ({"Containers": []}, "A model needs a PrimaryContainer or at least one entry in Containers."),
        ({}, "A model needs a PrimaryContainer or at least one entry in Containers."),
    ],
)
def test_invalid_container_sets_are_refused(smlocal: Smlocal, params: dict, message: str) -> None:
    containers = [{"Image": smlocal.image, **c} for c in params.get("Containers", [])]
    call = {k: v for k, v in params.items() if k != "Containers"}
    if "Containers" in params:
        call["Containers"] = containers
    with pytest.raises(ClientError) as info:
        smlocal.sm.create_model(ModelName="mc-bad", **call)
    assert error_of(info) == ("ValidationException", 400, message)


def test_primary_and_containers_together_are_refused(smlocal: Smlocal) -> None:
    with pytest.raises(ClientError) as info:
        smlocal.sm.create_model(
            ModelName="mc-both",
            PrimaryContainer={"Image": smlocal.image},
            Containers=[{"Image": smlocal.image}],
        )
    assert error_of(info) == (
        "ValidationException",
        400,
        "Specify either PrimaryContainer or Containers, not both.",
    )


def _unvalidated(smlocal: Smlocal) -> object:
    config = Config(parameter_validation=False, retries={"max_attempts": 1})
    return boto3.client("sagemaker", endpoint_url=smlocal.server.url, config=config, **CREDENTIALS)


def test_sixteen_containers_are_refused_by_the_server_itself(smlocal: Smlocal) -> None:
    """botocore checks no maximum (only minimums), so this reaches the server as sent."""
    containers = [{"Image": smlocal.image} for _ in range(16)]
    with pytest.raises(ClientError) as info:
        smlocal.sm.create_model(ModelName="mc-16", Containers=containers)
    code, status, message = error_of(info)
    assert (code, status) == ("ValidationException", 400)
    assert "'containers' failed to satisfy constraint: Member must have length less than or equal to 15" in (
        message
    )
    # the same refusal without any client-side validation at all
    with pytest.raises(ClientError) as info:
        _unvalidated(smlocal).create_model(ModelName="mc-16", Containers=containers)  # type: ignore[attr-defined]
    assert error_of(info)[:2] == ("ValidationException", 400)
    with pytest.raises(ClientError) as info:
        smlocal.sm.describe_model(ModelName="mc-16")
    assert error_of(info)[0] == "ValidationException"


def test_a_mode_outside_serial_and_direct_is_refused(smlocal: Smlocal) -> None:
    with pytest.raises(ClientError) as info:
        _unvalidated(smlocal).create_model(  # type: ignore[attr-defined]
            ModelName="mc-mode",
            Containers=[{"Image": smlocal.image}],
            InferenceExecutionConfig={"Mode": "Parallel"},
        )
    code, status, message = error_of(info)
    assert (code, status) == ("ValidationException", 400)
    assert "Member must satisfy enum value set: [Serial, Direct]" in message
