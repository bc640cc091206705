"""`smlocal check --instance-type TYPE [--deploy-as URI]`: the preflight (docs/cloud-parity.md).

Its options (cli.py and plugin.py take them through `fields`), what the instance type gives each checked
container (`container_limits`: the type's memory, CPU share and GPUs, as an endpoint's instance) and the
verdict line at the end of the report: whether SageMaker would accept this image, its model data and
this instance type. `verdict` builds it from the results plus any further judgement a caller adds (the
cold-start profile joins it there: a `Judgement` of its own).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from contract_tests.payload_options import UsageError

if TYPE_CHECKING:
    from contract_tests.check_config import CheckConfig
    from contract_tests.result import CheckResult
    from emulator.model.instance_types import InstanceType

ACCESS_MODES = ("Platform", "Vpc")


class Fields(TypedDict):
    """CheckConfig's preflight fields."""

    instance_type: str | None
    deploy_as: str | None
    region: str | None
    repository_access_mode: str | None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("the preflight: would SageMaker accept this image, model and type")
    group.add_argument(
        "--instance-type",
        metavar="TYPE",
        help="the endpoint's instance type (ml.m5.large): the containers get its memory, CPUs and GPUs, "
        "image.architecture judges the image against it, and a last line says whether SageMaker would "
        "accept the image, its model data and the type",
    )
    group.add_argument(
        "--deploy-as",
        metavar="URI",
        help="the image reference CreateModel will be given "
        "(ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO:TAG): image.registry judges it as SageMaker does",
    )
    group.add_argument(
        "--region",
        metavar="REGION",
        help="the endpoint's region for image.registry (default $AWS_REGION, $AWS_DEFAULT_REGION, else the "
        "--deploy-as ECR reference's own)",
    )
    group.add_argument(
        "--repository-access-mode",
        choices=ACCESS_MODES,
        help="the container's ImageConfig RepositoryAccessMode (default Platform: ECR private only; Vpc: "
        "any registry the model's VPC reaches)",
    )


def fields(
    instance_type: str | None,
    deploy_as: str | None,
    region: str | None,
    access_mode: str | None,
    environ: Mapping[str, str],
    prefix: str = "--",
) -> Fields:
    """CheckConfig's preflight fields; UsageError for a type the table does not know."""
    from emulator.model import instance_types

    if instance_type is not None and instance_types.lookup(instance_type) is None:
        raise UsageError(
            f"{prefix}instance-type {instance_type}: not a SageMaker hosting instance type "
            "(botocore's ProductionVariantInstanceType, e.g. ml.m5.large)"
        )
    if access_mode is not None and access_mode not in ACCESS_MODES:
        raise UsageError(f"{prefix}repository-access-mode takes Platform or Vpc, got {access_mode!r}")
    return Fields(
        instance_type=instance_type,
        deploy_as=deploy_as,
        region=region or environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or None,
        repository_access_mode=access_mode,
    )


def instance(config: CheckConfig) -> InstanceType | None:
    from emulator.model import instance_types

    return instance_types.lookup(config.instance_type)


@dataclass(frozen=True)
class ContainerLimits:
    """What ContainerSpec gets of the instance type (memory_limit_bytes, cpus, gpus, gpu_count)."""

    memory_limit_bytes: int | None = None
    cpus: float | None = None
    gpus: bool = False
    #: the type's GPU count, as the emulator asks the engine for it (None without GPUs)
    gpu_count: int | None = None


def container_limits(config: CheckConfig) -> ContainerLimits:
    """The configured instance type's memory, CPU share and GPUs (none without --instance-type). Under
    the serverless profile no GPU (as its NVIDIA_VISIBLE_DEVICES=void says). A GPU type on an engine
    without the NVIDIA runtime starts on CPU (runtime/docker.py warns)."""
    found = instance(config)
    if found is None:
        return ContainerLimits()
    gpus = found.gpus > 0 and config.profile != "serverless"
    return ContainerLimits(found.memory_bytes, float(found.vcpus), gpus, found.gpus if gpus else None)


@dataclass(frozen=True)
class Judgement:
    """One thing the verdict weighs besides the checks (e.g. a cold-start profile): its name, whether
    SageMaker would accept it, and why not."""

    name: str
    accepted: bool
    reason: str = ""


def subject(config: CheckConfig) -> str:
    """`this image, its model data and ml.m5.large`; the image as --deploy-as names it when given."""
    parts = [f"this image (as {config.deploy_as})" if config.deploy_as else "this image"]
    if config.model_data or config.multi_model_data:
        parts.append("its model data")
    if config.instance_type:
        parts.append(config.instance_type)
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def wanted(config: CheckConfig) -> bool:
    """The verdict line is printed for a preflight run (--instance-type or --deploy-as)."""
    return bool(config.instance_type or config.deploy_as)


def verdict(results: Sequence[CheckResult], config: CheckConfig, judgements: Iterable[Judgement] = ()) -> str:
    """`SageMaker would accept this image, its model data and ml.m5.large: yes`, or `...: no: 2 checks
    fail (image.architecture, image.registry)`; a failed judgement is named after the checks. Skipped
    checks do not count (an option not given); a check that errored does (it could not tell)."""
    failing = [r.id for r in results if not r.ok]
    refused = [j for j in judgements if not j.accepted]
    head = f"SageMaker would accept {subject(config)}"
    if not failing and not refused:
        return f"{head}: yes"
    why = []
    if failing:
        noun = "check fails" if len(failing) == 1 else "checks fail"
        why.append(f"{len(failing)} {noun} ({', '.join(failing)})")
    why.extend(f"{j.name}: {j.reason}" if j.reason else j.name for j in refused)
    return f"{head}: no: {'; '.join(why)}"
