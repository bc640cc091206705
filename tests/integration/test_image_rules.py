"""The image rules of docs/cloud-parity.md through unchanged boto3 against a real server and real images:
the registry a model's image names (CreateModel answers SageMaker's ValidationException, or accepts it;
a local tag with a warning in the endpoint's log, refused under --strict-images, any reference under
--any-registry) and the architecture the image is built for against the instance type (the endpoint
goes Creating -> Failed before any container starts)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from emulator.hosting.fleet.logs import PLATFORM_STREAM
from tests.fixtures.smlocal_server import Smlocal, error_of, start_smlocal

pytestmark = pytest.mark.docker

ACCOUNT = "123456789012"
REGION = "us-east-1"  # the fixtures' clients and the server's default
NON_ECR = 'Using non-ECR image "{}" without Vpc repository access mode is not supported.'


def ecr(image: str, region: str = REGION) -> str:
    """An ECR reference that resolves to the local `image` (runtime/docker_images.candidate_local_names)."""
    return f"{ACCOUNT}.dkr.ecr.{region}.amazonaws.com/{image}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, echo_image: str) -> Iterator[Smlocal]:
    env = start_smlocal(tmp_path_factory.mktemp("image-rules"), echo_image)
    try:
        yield env
    finally:
        env.server.stop()


def refused(env: Smlocal, name: str, **model: Any) -> tuple[str, int, str]:
    with pytest.raises(ClientError) as info:
        env.sm.create_model(ModelName=name, **model)
    with pytest.raises(ClientError):  # nothing was created
        env.sm.describe_model(ModelName=name)
    return error_of(info)


def platform_log(state_dir: Path, endpoint: str) -> str:
    return (state_dir / "logs" / endpoint / f"{PLATFORM_STREAM}.log").read_text()


@pytest.mark.parametrize(
    "prefix", ["docker.io/", "public.ecr.aws/", "registry.example.com:5000/", "localhost:5000/"]
)
def test_another_registry_is_refused_at_create_model(server: Smlocal, prefix: str) -> None:
    image = prefix + server.image
    assert refused(server, "other-registry", PrimaryContainer={"Image": image}) == (
        "ValidationException",
        400,
        NON_ECR.format(image),
    )


def test_ecr_of_another_region_is_refused_at_create_model(server: Smlocal) -> None:
    image = ecr(server.image, "eu-west-1")
    assert refused(server, "other-region", PrimaryContainer={"Image": image}) == (
        "ValidationException",
        400,
        f'Region of "{image}" does not match expected region of us-east-1. Cross region ECR image pulls '
        "are not allowed.",
    )


def test_each_container_of_a_multi_container_model_is_judged(server: Smlocal) -> None:
    bad = "ghcr.io/" + server.image
    containers = [
        {"Image": ecr(server.image), "ContainerHostname": "first"},
        {"Image": bad, "ContainerHostname": "second"},
    ]
    assert refused(server, "multi", Containers=containers) == (
        "ValidationException",
        400,
        NON_ECR.format(bad),
    )


def test_vpc_access_mode_accepts_another_registry(server: Smlocal) -> None:
    image = "registry.example.com/" + server.image  # resolves to the local echo image
    container = {"Image": image, "ImageConfig": {"RepositoryAccessMode": "Vpc"}}
    server.sm.create_model(ModelName="vpc", PrimaryContainer=container)
    try:
        described = server.sm.describe_model(ModelName="vpc")["PrimaryContainer"]
        assert (described["Image"], described["ImageConfig"]) == (image, {"RepositoryAccessMode": "Vpc"})
    finally:
        server.sm.delete_model(ModelName="vpc")


def test_ecr_of_the_region_deploys_without_a_warning(server: Smlocal) -> None:
    try:
        described = server.deploy("ecr-here", image=ecr(server.image))
        assert described["EndpointStatus"] == "InService", described.get("FailureReason")
        assert "warning" not in platform_log(server.state_dir, "ecr-here")
    finally:
        server.cleanup("ecr-here")


def test_a_local_tag_deploys_with_a_warning_in_the_endpoints_log(server: Smlocal) -> None:
    try:
        described = server.deploy("local-tag")
        assert described["EndpointStatus"] == "InService", described.get("FailureReason")
        image = server.image
        assert (
            f'AllTraffic: warning: image "{image}" is a local tag: smlocal runs it, but SageMaker would '
            f"refuse it at CreateModel ({NON_ECR.format(image)}); push it to ECR and name that: "
            f"{ecr(image)}\n"
        ) in platform_log(server.state_dir, "local-tag")
    finally:
        server.cleanup("local-tag")


def test_strict_images_refuses_a_local_tag_and_any_registry_accepts_everything(
    tmp_path: Path, echo_image: str
) -> None:
    strict = start_smlocal(tmp_path / "strict", echo_image, registry_rule="strict")
    try:
        assert refused(strict, "local", PrimaryContainer={"Image": echo_image}) == (
            "ValidationException",
            400,
            f"{NON_ECR.format(echo_image)} (smlocal --strict-images: a local tag names no registry; push it "
            f"to ECR and name that: {ecr(echo_image)}.)",
        )
        strict.sm.create_model(ModelName="ecr", PrimaryContainer={"Image": ecr(echo_image)})
    finally:
        strict.server.stop()
    anything = start_smlocal(tmp_path / "any", echo_image, registry_rule="any")
    try:
        for i, image in enumerate(("docker.io/" + echo_image, ecr(echo_image, "eu-west-1"), echo_image)):
            anything.sm.create_model(ModelName=f"any-{i}", PrimaryContainer={"Image": image})
    finally:
        anything.server.stop()


def test_an_arm64_image_fails_an_x86_endpoint(server: Smlocal, arm64_image: str) -> None:
    try:
        described = server.deploy("arm-on-x86", image=arm64_image)
        reason = (
            "CannotStartContainerError. Please ensure the model container for variant AllTraffic starts "
            f"correctly when invoked with 'docker run <image> serve'. smlocal: image {arm64_image} is built "
            "for linux/arm64, but ml.m5.large instances are linux/amd64: its entrypoint would fail with "
            '"exec format error". Rebuild it for the instance: docker buildx build --platform linux/amd64 ...'
        )
        assert (described["EndpointStatus"], described["FailureReason"]) == ("Failed", reason)
        assert f"endpoint Failed: {reason}" in platform_log(server.state_dir, "arm-on-x86")
    finally:
        server.cleanup("arm-on-x86")


def test_an_amd64_image_fails_a_graviton_endpoint(server: Smlocal) -> None:
    variants = [
        {
            "VariantName": "Graviton",
            "ModelName": "amd-on-arm",
            "InitialInstanceCount": 1,
            "InstanceType": "ml.c7g.large",
        }
    ]
    try:
        described = server.deploy("amd-on-arm", variants=variants)
        assert described["EndpointStatus"] == "Failed"
        assert described["FailureReason"].startswith(
            "CannotStartContainerError. Please ensure the model container for variant Graviton starts"
        )
        assert (
            f"image {server.image} is built for linux/amd64, but ml.c7g.large instances are linux/arm64"
            in described["FailureReason"]
        )
        assert "docker buildx build --platform linux/arm64" in described["FailureReason"]
    finally:
        server.cleanup("amd-on-arm")


def test_an_update_to_an_arm64_image_keeps_the_old_fleet_with_the_reason(
    server: Smlocal, arm64_image: str
) -> None:
    sm = server.sm
    try:
        assert server.deploy("arm-update")["EndpointStatus"] == "InService"
        sm.create_model(ModelName="arm-update-2", PrimaryContainer={"Image": arm64_image})
        variant = {
            "VariantName": "AllTraffic",
            "ModelName": "arm-update-2",
            "InitialInstanceCount": 1,
            "InstanceType": "ml.m5.large",
        }
        sm.create_endpoint_config(EndpointConfigName="arm-update-2", ProductionVariants=[variant])
        sm.update_endpoint(EndpointName="arm-update", EndpointConfigName="arm-update-2")
        assert server.server.service is not None
        server.server.call(server.server.service.wait_idle(), timeout_s=60)
        described = sm.describe_endpoint(EndpointName="arm-update")
        assert (described["EndpointStatus"], described["EndpointConfigName"]) == ("InService", "arm-update")
        assert f"image {arm64_image} is built for linux/arm64, but ml.m5.large" in described["FailureReason"]
    finally:
        server.cleanup("arm-update")
        for call, key in ((sm.delete_endpoint_config, "EndpointConfigName"), (sm.delete_model, "ModelName")):
            try:
                call(**{key: "arm-update-2"})
            except sm.exceptions.ClientError:
                pass
