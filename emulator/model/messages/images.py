"""The image a model names: its registry (CreateModel) and its architecture (the endpoint), spec §3.1.

Sourced texts: non_ecr_image [O] (aws/sagemaker-python-sdk#4700: CreateModel's ValidationException for a
Docker Hub image), cross_region_ecr_image [O] (aws/sagemaker-pytorch-inference-toolkit#7,
ed-donner/alex#30); the same-region rule itself is [D] (ContainerDefinition.Image: "the Docker image for
inference container in Amazon EC2 Container Registry must be in the same region as the model or endpoint
you are creating"). [U] texts are smlocal's own (docs/cloud-parity.md); append, do not reorder.
"""

from __future__ import annotations

from emulator.model.messages.resources import cannot_start_container

__all__ = [
    "non_ecr_image",
    "cross_region_ecr_image",
    "local_image_refused",
    "local_image_warning",
    "architecture_mismatch",
    "architecture_fix",
]


def non_ecr_image(image: str) -> str:  # [O]
    return f'Using non-ECR image "{image}" without Vpc repository access mode is not supported.'


def cross_region_ecr_image(image: str, region: str) -> str:  # [O]
    return (
        f'Region of "{image}" does not match expected region of {region}. '
        "Cross region ECR image pulls are not allowed."
    )


def _push_hint(image: str, account_id: str, region: str) -> str:
    repository = image.split("@", 1)[0]
    return f"push it to ECR and name that: {account_id}.dkr.ecr.{region}.amazonaws.com/{repository}"


def local_image_refused(image: str, account_id: str, region: str) -> str:  # [U] --strict-images
    """SageMaker's own text, then what smlocal's strict mode adds."""
    return (
        f"{non_ecr_image(image)} (smlocal --strict-images: a local tag names no registry; "
        f"{_push_hint(image, account_id, region)}.)"
    )


def local_image_warning(image: str, account_id: str, region: str) -> str:  # [U] the endpoint's log
    return (
        f'image "{image}" is a local tag: smlocal runs it, but SageMaker would refuse it at CreateModel '
        f"({non_ecr_image(image)}); {_push_hint(image, account_id, region)}"
    )


def architecture_fix(image_arch: str, instance_arch: str) -> str:  # [U]
    return (
        f"the image is built for linux/{image_arch}; rebuild it for the instance: "
        f"docker buildx build --platform linux/{instance_arch} ..."
    )


def architecture_mismatch(  # [U] after SageMaker's CannotStartContainerError (spec §3.1, §6.8)
    variant: str, image: str, image_arch: str, instance_type: str, instance_arch: str
) -> str:
    return (
        f"{cannot_start_container(variant)}. smlocal: image {image} is built for linux/{image_arch}, "
        f"but {instance_type} instances are linux/{instance_arch}: its entrypoint would fail with "
        f'"exec format error". Rebuild it for the instance: '
        f"docker buildx build --platform linux/{instance_arch} ..."
    )
