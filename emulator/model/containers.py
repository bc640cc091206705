"""The rules of a multi-container model (spec §4), pure: which Containers and InferenceExecutionConfig
CreateModel accepts. The count (at most 15) and the hostname pattern are the service model's and are
checked by wire/validation.py before this runs."""

from __future__ import annotations

from collections.abc import Sequence

from emulator.errors import ValidationFailed
from emulator.model import messages
from emulator.model.resources import ContainerDefinition

#: The image label a container of a multi-container model must carry, with the value "true" (spec §3.5)
ACCEPT_BIND_TO_PORT_LABEL = "com.amazonaws.sagemaker.capabilities.accept-bind-to-port"
#: The label a multi-model container's image must carry ("true"; spec §5).
MULTI_MODELS_LABEL = "com.amazonaws.sagemaker.capabilities.multi-models"
MAX_CONTAINERS = 15
SERIAL = "Serial"
DIRECT = "Direct"


def check_containers(containers: Sequence[ContainerDefinition], mode: str | None) -> None:
    """Direct: a ContainerHostname on every container. Serial (the default): on all or on none.
    Hostnames unique (case-insensitively, as DNS names are)."""
    if not containers:
        raise ValidationFailed(messages.no_container())
    if len(containers) > MAX_CONTAINERS:  # botocore's model says so too; kept for direct callers
        raise ValidationFailed(
            f"Value at 'containers' failed to satisfy constraint: Member must have length less than "
            f"or equal to {MAX_CONTAINERS}"
        )
    named = [c.hostname for c in containers if c.hostname]
    if (mode or SERIAL) == DIRECT and len(named) != len(containers):
        raise ValidationFailed(messages.direct_needs_hostnames())
    if named and len(named) != len(containers):
        raise ValidationFailed(messages.serial_hostnames_all_or_none())
    seen: set[str] = set()
    for hostname in named:
        if hostname.lower() in seen:
            raise ValidationFailed(messages.duplicate_hostname(hostname))
        seen.add(hostname.lower())
