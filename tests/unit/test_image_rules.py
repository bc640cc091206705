"""The registry rule (model/image_registry.py) and the architecture rule (model/image_architecture.py),
case by case with their texts (docs/cloud-parity.md)."""

from __future__ import annotations

import pytest

from emulator.model.image_architecture import mismatch, normalise
from emulator.model.image_registry import ReferenceKind, RegistryRule, judge, parse

ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com/my-model:1"
ECR_WEST = "123456789012.dkr.ecr.us-west-2.amazonaws.com/my-model:1"
NON_ECR = 'Using non-ECR image "{}" without Vpc repository access mode is not supported.'
CROSS = 'Region of "{}" does not match expected region of us-east-1. Cross region ECR image pulls are not allowed.'


@pytest.mark.parametrize(
    ("image", "kind", "region"),
    [
        (ECR, ReferenceKind.ECR, "us-east-1"),
        (
            "123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com/m@sha256:" + "a" * 64,
            ReferenceKind.ECR,
            "us-gov-west-1",
        ),
        ("123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn/m:1", ReferenceKind.ECR, "cn-north-1"),
        ("123456789012.dkr-ecr.eu-west-1.on.aws/m:1", ReferenceKind.ECR, "eu-west-1"),
        ("public.ecr.aws/lambda/python:3.11", ReferenceKind.OTHER_REGISTRY, None),
        ("docker.io/library/python:3.11", ReferenceKind.OTHER_REGISTRY, None),
        ("localhost:5000/m:1", ReferenceKind.OTHER_REGISTRY, None),
        ("localhost/m", ReferenceKind.OTHER_REGISTRY, None),
        ("12345678901.dkr.ecr.us-east-1.amazonaws.com/m:1", ReferenceKind.OTHER_REGISTRY, None),  # 11 digits
        ("my-model:latest", ReferenceKind.LOCAL, None),
        ("team/my-model", ReferenceKind.LOCAL, None),
        ("pytorch/pytorch:2.3.0", ReferenceKind.LOCAL, None),  # Docker Hub's, but named without its host
    ],
)
def test_references_are_read_as_docker_reads_them(
    image: str, kind: ReferenceKind, region: str | None
) -> None:
    ref = parse(image)
    assert (ref.kind, ref.region) == (kind, region)


def test_ecr_of_the_endpoints_region_is_accepted() -> None:
    assert judge(ECR, "us-east-1", "123456789012") == judge(ECR, "us-east-1", "1", rule=RegistryRule.STRICT)
    got = judge(ECR, "us-east-1", "123456789012")
    assert (got.refusal, got.warning) == (None, None)


def test_ecr_of_another_region_is_refused_in_sagemakers_words() -> None:
    assert judge(ECR_WEST, "us-east-1", "123456789012").refusal == CROSS.format(ECR_WEST)
    assert judge(ECR_WEST, "us-east-1", "123456789012", rule=RegistryRule.STRICT).refusal == CROSS.format(
        ECR_WEST
    )


@pytest.mark.parametrize(
    "image", ["docker.io/library/python:3.11", "public.ecr.aws/lambda/python:3.11", "ghcr.io/o/m:1"]
)
def test_another_registry_is_refused_in_sagemakers_words(image: str) -> None:
    assert judge(image, "us-east-1", "123456789012").refusal == NON_ECR.format(image)
    assert judge(image, "us-east-1", "123456789012", "Platform").refusal == NON_ECR.format(image)


@pytest.mark.parametrize("image", ["ghcr.io/o/m:1", ECR_WEST, "my-model:latest"])
def test_vpc_access_mode_accepts_any_registry(image: str) -> None:
    for rule in RegistryRule:
        got = judge(image, "us-east-1", "123456789012", "Vpc", rule)
        assert (got.refusal, got.warning) == (None, None)


@pytest.mark.parametrize("image", ["ghcr.io/o/m:1", ECR_WEST, "my-model:latest"])
def test_any_registry_accepts_everything(image: str) -> None:
    got = judge(image, "us-east-1", "123456789012", rule=RegistryRule.ANY)
    assert (got.refusal, got.warning) == (None, None)


def test_a_local_tag_is_accepted_with_a_warning() -> None:
    got = judge("my-model:latest", "eu-west-1", "111122223333")
    assert got.refusal is None
    assert got.warning == (
        'image "my-model:latest" is a local tag: smlocal runs it, but SageMaker would refuse it at '
        'CreateModel (Using non-ECR image "my-model:latest" without Vpc repository access mode is not '
        "supported.); push it to ECR and name that: "
        "111122223333.dkr.ecr.eu-west-1.amazonaws.com/my-model:latest"
    )


def test_strict_refuses_a_local_tag() -> None:
    got = judge("my-model@sha256:" + "b" * 64, "us-east-1", "123456789012", rule=RegistryRule.STRICT)
    image = "my-model@sha256:" + "b" * 64
    assert got.refusal == (
        f"{NON_ECR.format(image)} (smlocal --strict-images: a local tag names no registry; push it to ECR "
        "and name that: 123456789012.dkr.ecr.us-east-1.amazonaws.com/my-model.)"
    )


def test_architecture_rule() -> None:
    assert normalise("x86_64") == "amd64" and normalise("AArch64") == "arm64"
    found = mismatch("arm64", "ml.m5.large")
    assert found is not None
    assert (found.image_architecture, found.instance.name, found.instance_architecture) == (
        "arm64",
        "ml.m5.large",
        "amd64",
    )
    graviton = mismatch("amd64", "ml.c7g.xlarge")
    assert graviton is not None and graviton.instance_architecture == "arm64"
    assert mismatch("arm64", "ml.m6g.large") is None
    assert mismatch("amd64", "ml.m5.large") is None
    assert mismatch("aarch64", "ml.r7gd.large") is None
    # no rule: a type the table does not know, no type (serverless), an image config without one
    assert mismatch("arm64", "ml.future.large") is None
    assert mismatch("arm64", None) is None
    assert mismatch("", "ml.m5.large") is None
