"""The preflight's image checks (docs/cloud-parity.md): the architecture the image is built for against
`--instance-type`, and the reference it will be deployed as (`--deploy-as`) against SageMaker's
registry rules. Both judge with the emulator's own rules (emulator.model.image_architecture,
emulator.model.image_registry), so `smlocal check` and `smlocal serve` say the same; each is SKIPPED
without its option."""

from __future__ import annotations

from contract_tests.registry import check
from contract_tests.result import CheckFailed, CheckSkipped
from contract_tests.target import CheckContext
from emulator.model import image_architecture, image_registry, messages


@check(
    "image.architecture",
    "the image is built for the instance type's CPU architecture (with --instance-type)",
    "SageMaker runs the container on the instance's CPU: x86_64 (amd64) for most types, arm64 for the "
    "Graviton ones (ml.c7g, ml.m6g, ml.r7gd, ...). An image built for the other architecture cannot start "
    "(`exec format error`) and the endpoint fails with CannotStartContainerError (hosting contract §3.1; "
    "docs/cloud-parity.md#image-architecture). SKIPPED without --instance-type.",
    fix="Build the image for the instance's architecture: docker buildx build --platform linux/amd64 (or "
    "linux/arm64 for a Graviton type) ..., or choose an instance type of the image's architecture.",
    before="docker build -t my-model .        # on an Apple-silicon Mac: linux/arm64",
    after="docker buildx build --platform linux/amd64 -t my-model .",
)
def architecture(ctx: CheckContext) -> str:
    """The image config's Architecture (`docker inspect`) equals the instance type's (instance_types)."""
    instance_type = ctx.config.instance_type
    if instance_type is None:
        raise CheckSkipped("give --instance-type TYPE to judge the image's architecture against it")
    found = ctx.target.image.architecture
    ctx.evidence.update(image_architecture=found, instance_type=instance_type)
    if not found:
        raise CheckSkipped("the image's config names no architecture")
    mismatch = image_architecture.mismatch(found, instance_type)
    if mismatch is not None:
        raise CheckFailed(
            f"the image is built for linux/{mismatch.image_architecture}, but {instance_type} instances are "
            f"linux/{mismatch.instance_architecture}: SageMaker would fail the endpoint with "
            f'CannotStartContainerError ("exec format error"). Fix: '
            f"{messages.architecture_fix(mismatch.image_architecture, mismatch.instance_architecture)}, or "
            f"deploy it on an instance type of linux/{mismatch.image_architecture}.",
            instance_architecture=mismatch.instance_architecture,
        )
    return f"linux/{image_architecture.normalise(found)}, as {instance_type}"


@check(
    "image.registry",
    "SageMaker accepts the image reference it will be deployed as (with --deploy-as)",
    "CreateModel accepts an image of ECR private in the model's own region, or of any registry when the "
    "container's ImageConfig RepositoryAccessMode is Vpc; any other reference (Docker Hub, public.ecr.aws, "
    "another host, a local tag) is a ValidationException, and so is an ECR image of another region "
    "(hosting contract §3.1; docs/cloud-parity.md#registry-rules). SKIPPED without --deploy-as.",
    fix="Push the image to ECR private in the endpoint's region and deploy that reference "
    "(ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO:TAG), or, for a registry the model's VPC reaches, set "
    "ImageConfig RepositoryAccessMode Vpc (--repository-access-mode Vpc).",
    before='PrimaryContainer={"Image": "docker.io/me/my-model:1"}',
    after='PrimaryContainer={"Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/my-model:1"}',
)
def registry(ctx: CheckContext) -> str:
    """model/image_registry.judge under SageMaker's own rule (a local tag refused as non-ECR); the region
    is --region (or $AWS_REGION), else an ECR reference's own."""
    config = ctx.config
    image = config.deploy_as
    if image is None:
        raise CheckSkipped("give --deploy-as URI (the reference CreateModel will get) to judge it")
    ref = image_registry.parse(image)
    region = config.region or ref.region
    ctx.evidence.update(deploy_as=image, region=region, kind=ref.kind.value)
    if config.repository_access_mode == image_registry.VPC:
        return f"{image}: any registry with RepositoryAccessMode Vpc"
    if ref.kind is image_registry.ReferenceKind.ECR:
        assert ref.region is not None and region is not None
        if ref.region != region:
            raise CheckFailed(
                f"{messages.cross_region_ecr_image(image, region)} Fix: push the image to ECR in {region} "
                f"({ref.account_id}.dkr.ecr.{region}.amazonaws.com/...), or deploy in {ref.region}.",
            )
        given = "" if config.region else " (its own region: give --region to judge it for another)"
        return f"ECR private in {region}{given}"
    what = "a local tag: no registry" if ref.kind is image_registry.ReferenceKind.LOCAL else ref.registry
    raise CheckFailed(
        f"{messages.non_ecr_image(image)} ({what}.) Fix: push the image to ECR private in "
        f"{region or 'the endpoint region'} and deploy that reference "
        f"(ACCOUNT.dkr.ecr.{region or 'REGION'}.amazonaws.com/REPO:TAG), or set ImageConfig "
        "RepositoryAccessMode Vpc (--repository-access-mode Vpc) for a registry the model's VPC reaches.",
    )
