"""Which image references SageMaker accepts at CreateModel (spec §3.1, docs/cloud-parity.md#registry-rules).

SageMaker pulls an image from ECR private in the model's own region, or from any registry reachable from
the model's VPC when the container's `ImageConfig.RepositoryAccessMode` is `Vpc`. Everything else is a
ValidationException at CreateModel:

* another registry (Docker Hub, `public.ecr.aws`, any other host) with `Platform` access mode (the default):
  `Using non-ECR image "..." without Vpc repository access mode is not supported.` [O];
* an ECR image of another region: `Region of "..." does not match expected region of R. Cross region ECR
  image pulls are not allowed.` [O].

A reference that names no registry (`my-model:latest`, `team/model:1`) is how people work locally: it is
the third kind. SageMaker refuses it as non-ECR (Docker would read it as Docker Hub's); smlocal accepts it
and warns in the endpoint's log (RegistryRule.LOCAL_WARNS), refuses it too under `--strict-images`
(STRICT) and accepts every reference under `--any-registry` (ANY) [U]. Pure: no IO; the texts are
messages/images.py's.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from emulator.model import messages

#: ECR private's registry host: ACCOUNT.dkr.ecr[-fips].REGION.amazonaws.com[.cn] (and the dual-stack
#: ACCOUNT.dkr-ecr.REGION.on.aws).
_ECR_HOST = re.compile(
    r"^(?P<account>\d{12})\.(?:dkr\.ecr(?:-fips)?\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?"
    r"|dkr-ecr\.(?P<region2>[a-z0-9-]+)\.on\.aws)$"
)
VPC = "Vpc"
PLATFORM = "Platform"


class RegistryRule(enum.StrEnum):
    """`smlocal serve`'s choice for references SageMaker would refuse (ServerConfig.registry_rule)."""

    #: default: SageMaker's rule, except that a local tag is accepted with a warning in the endpoint's log
    LOCAL_WARNS = "local-warns"
    #: `--strict-images`: SageMaker's rule exactly, local tags refused too
    STRICT = "strict"
    #: `--any-registry`: every reference accepted (for people who deploy elsewhere)
    ANY = "any"


class ReferenceKind(enum.StrEnum):
    ECR = "ecr"  # ECR private: account and region known
    OTHER_REGISTRY = "other-registry"  # names a registry host that is not ECR private's
    LOCAL = "local"  # names no registry host at all


@dataclass(frozen=True)
class ImageReference:
    image: str
    kind: ReferenceKind
    registry: str | None = None
    account_id: str | None = None
    region: str | None = None


def parse(image: str) -> ImageReference:
    """The registry an image reference names, as Docker reads it: the part before the first `/` is a
    registry host when it holds a `.` or a `:` or is `localhost`."""
    first, sep, _ = image.partition("/")
    if not sep or not ("." in first or ":" in first or first == "localhost"):
        return ImageReference(image, ReferenceKind.LOCAL)
    match = _ECR_HOST.match(first.lower())
    if match is None:
        return ImageReference(image, ReferenceKind.OTHER_REGISTRY, first)
    region = match.group("region") or match.group("region2")
    return ImageReference(image, ReferenceKind.ECR, first, match.group("account"), region)


@dataclass(frozen=True)
class Judgement:
    """What CreateModel does with one container's image: refuse it (`refusal`, the ValidationException's
    message), or accept it, with a `warning` for the endpoint's log when SageMaker would not."""

    refusal: str | None = None
    warning: str | None = None


def judge(
    image: str,
    region: str,
    account_id: str,
    access_mode: str | None = PLATFORM,
    rule: RegistryRule = RegistryRule.LOCAL_WARNS,
) -> Judgement:
    """SageMaker's verdict on `image` for a model in `region` (see the module's docstring)."""
    if rule is RegistryRule.ANY or access_mode == VPC:
        return Judgement()
    ref = parse(image)
    if ref.kind is ReferenceKind.ECR:
        if ref.region != region:
            return Judgement(refusal=messages.cross_region_ecr_image(image, region))
        return Judgement()
    if ref.kind is ReferenceKind.OTHER_REGISTRY:
        return Judgement(refusal=messages.non_ecr_image(image))
    if rule is RegistryRule.STRICT:
        return Judgement(refusal=messages.local_image_refused(image, account_id, region))
    return Judgement(warning=messages.local_image_warning(image, account_id, region))
