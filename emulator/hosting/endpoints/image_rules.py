"""The image rules of a deployment, in one place for CreateModel and CreateEndpoint: the registry a
container's image names (model/image_registry.py: refused at CreateModel, or a warning in the endpoint's
log at deploy, since a model may be created before any endpoint) and the architecture it is built for
against the variant's instance type (model/image_architecture.py: the endpoint fails before any
container starts). docs/cloud-parity.md."""

from __future__ import annotations

from emulator.config import ServerConfig
from emulator.errors import DeploymentFailed, ValidationFailed
from emulator.model import image_architecture, image_registry, messages
from emulator.model.arns import Account
from emulator.model.resources import ContainerDefinition, Model, ProductionVariant
from emulator.runtime.base import ImageConfig


def _judge(c: ContainerDefinition, account: Account, config: ServerConfig) -> image_registry.Judgement:
    return image_registry.judge(
        c.image,
        account.region,
        account.account_id,
        c.repository_access_mode,
        image_registry.RegistryRule(config.registry_rule),
    )


def check_registry(
    containers: tuple[ContainerDefinition, ...], account: Account, config: ServerConfig
) -> None:
    """CreateModel: ValidationFailed with SageMaker's text for the first container whose image it
    would refuse."""
    for c in containers:
        refusal = _judge(c, account, config).refusal
        if refusal is not None:
            raise ValidationFailed(refusal)


def registry_warnings(model: Model, account: Account, config: ServerConfig) -> list[str]:
    """The endpoint log's warnings for `model`'s images: SageMaker would refuse them, smlocal runs them."""
    found = (_judge(c, account, config).warning for c in model.all_containers)
    return list(dict.fromkeys(w for w in found if w is not None))


def check_architecture(variant: ProductionVariant, image: str, config: ImageConfig) -> None:
    """DeploymentFailed (the endpoint's FailureReason) when `image` cannot run on the variant's type."""
    found = image_architecture.mismatch(config.architecture, variant.instance_type)
    if found is not None:
        raise DeploymentFailed(
            messages.architecture_mismatch(
                variant.variant_name,
                image,
                found.image_architecture,
                found.instance.name,
                found.instance_architecture,
            )
        )
