"""The preflight's parts without Docker (contract_tests/preflight.py, checks/image_platform.py's
image.registry): options, the instance type's container limits, the verdict line, and each registry
case with its text (docs/cloud-parity.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from contract_tests import preflight
from contract_tests.check_config import CheckConfig
from contract_tests.payload_options import UsageError
from contract_tests.registry import select
from contract_tests.result import CheckResult, Outcome
from contract_tests.runner import run_check
from contract_tests.target import Target
from tests.fixtures.no_engine import NoImagesRuntime
from tests.unit.check_results import result

ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com/my-model:1"
ECR_WEST = "123456789012.dkr.ecr.us-west-2.amazonaws.com/my-model:1"
NON_ECR = 'Using non-ECR image "{}" without Vpc repository access mode is not supported.'
FIX = (
    " Fix: push the image to ECR private in {r} and deploy that reference (ACCOUNT.dkr.ecr.{r}.amazonaws.com"
    "/REPO:TAG), or set ImageConfig RepositoryAccessMode Vpc (--repository-access-mode Vpc) for a registry "
    "the model's VPC reaches."
)


def registry(tmp_path: Path, **config: object) -> CheckResult:
    (check,) = select(["image.registry"])
    target = Target(CheckConfig(image="img", cache_dir=tmp_path, **config), runtime=NoImagesRuntime())  # type: ignore[arg-type]
    return run_check(check, target)


@pytest.mark.parametrize(
    ("deploy_as", "what"),
    [
        ("docker.io/me/my-model:1", "docker.io"),
        ("public.ecr.aws/me/my-model:1", "public.ecr.aws"),
        ("ghcr.io/me/my-model:1", "ghcr.io"),
        ("my-model:latest", "a local tag: no registry"),
    ],
)
def test_a_reference_sagemaker_refuses_fails(tmp_path: Path, deploy_as: str, what: str) -> None:
    got = registry(tmp_path, deploy_as=deploy_as, region="eu-west-1")
    assert (got.outcome, got.message) == (
        Outcome.FAILED,
        f"{NON_ECR.format(deploy_as)} ({what}.){FIX.format(r='eu-west-1')}",
    )


def test_without_a_region_the_fix_names_a_placeholder(tmp_path: Path) -> None:
    got = registry(tmp_path, deploy_as="my-model:latest")
    assert got.message.endswith(
        "Fix: push the image to ECR private in the endpoint region and deploy that reference "
        "(ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO:TAG), or set ImageConfig RepositoryAccessMode Vpc "
        "(--repository-access-mode Vpc) for a registry the model's VPC reaches."
    )


def test_ecr_of_another_region_fails(tmp_path: Path) -> None:
    got = registry(tmp_path, deploy_as=ECR_WEST, region="us-east-1")
    assert (got.outcome, got.message) == (
        Outcome.FAILED,
        f'Region of "{ECR_WEST}" does not match expected region of us-east-1. Cross region ECR image pulls '
        "are not allowed. Fix: push the image to ECR in us-east-1 "
        "(123456789012.dkr.ecr.us-east-1.amazonaws.com/...), or deploy in us-west-2.",
    )


def test_ecr_of_the_region_and_vpc_mode_pass(tmp_path: Path) -> None:
    assert (registry(tmp_path, deploy_as=ECR, region="us-east-1").message) == "ECR private in us-east-1"
    own = registry(tmp_path, deploy_as=ECR_WEST)
    assert (own.outcome, own.message) == (
        Outcome.PASSED,
        "ECR private in us-west-2 (its own region: give --region to judge it for another)",
    )
    vpc = registry(tmp_path, deploy_as="ghcr.io/me/m:1", repository_access_mode="Vpc")
    assert (vpc.outcome, vpc.message) == (
        Outcome.PASSED,
        "ghcr.io/me/m:1: any registry with RepositoryAccessMode Vpc",
    )


def test_without_deploy_as_it_is_skipped(tmp_path: Path) -> None:
    got = registry(tmp_path)
    assert (got.outcome, got.message) == (
        Outcome.SKIPPED,
        "give --deploy-as URI (the reference CreateModel will get) to judge it",
    )


def test_fields_take_the_region_from_the_environment_and_refuse_unknown_types() -> None:
    assert preflight.fields("ml.m5.large", ECR, None, None, {"AWS_DEFAULT_REGION": "eu-west-1"}) == {
        "instance_type": "ml.m5.large",
        "deploy_as": ECR,
        "region": "eu-west-1",
        "repository_access_mode": None,
    }
    assert preflight.fields(None, None, "us-west-2", "Vpc", {"AWS_REGION": "x"})["region"] == "us-west-2"
    with pytest.raises(UsageError) as info:
        preflight.fields("ml.nope.large", None, None, None, {}, "--sagemaker-")
    assert str(info.value) == (
        "--sagemaker-instance-type ml.nope.large: not a SageMaker hosting instance type (botocore's "
        "ProductionVariantInstanceType, e.g. ml.m5.large)"
    )
    with pytest.raises(UsageError) as info:
        preflight.fields(None, None, None, "vpc", {}, "--sagemaker-")
    assert str(info.value) == "--sagemaker-repository-access-mode takes Platform or Vpc, got 'vpc'"


def test_container_limits_are_the_instance_types() -> None:
    assert preflight.container_limits(CheckConfig(image="i")) == preflight.ContainerLimits()
    assert preflight.container_limits(CheckConfig(image="i", instance_type="ml.g5.xlarge")) == (
        preflight.ContainerLimits(16 * 2**30, 4.0, True, 1)
    )
    assert preflight.container_limits(CheckConfig(image="i", instance_type="ml.g5.12xlarge")).gpu_count == 4
    serverless = CheckConfig(image="i", instance_type="ml.g5.xlarge", profile="serverless")
    assert preflight.container_limits(serverless) == preflight.ContainerLimits(16 * 2**30, 4.0, False, None)


def test_the_verdict_line() -> None:
    config = CheckConfig(image="i", instance_type="ml.m5.large", model_data="model.tar.gz")
    passed = [result(Outcome.PASSED), result(Outcome.SKIPPED, id="image.registry")]
    assert preflight.verdict(passed, config) == (
        "SageMaker would accept this image, its model data and ml.m5.large: yes"
    )
    failing = [*passed, result(Outcome.FAILED, id="image.architecture"), result(Outcome.ERROR, id="x.y")]
    with_uri = CheckConfig(image="i", instance_type="ml.m5.large", deploy_as=ECR)
    assert preflight.verdict(failing, with_uri) == (
        f"SageMaker would accept this image (as {ECR}) and ml.m5.large: no: 2 checks fail "
        "(image.architecture, x.y)"
    )
    # the seam for further judgements (the cold-start profile)
    cold = preflight.Judgement("cold start", False, "61 s over the 60 s budget")
    assert preflight.verdict(failing[:3], config, [cold, preflight.Judgement("other", True)]) == (
        "SageMaker would accept this image, its model data and ml.m5.large: no: 1 check fails "
        "(image.architecture); cold start: 61 s over the 60 s budget"
    )
    assert preflight.subject(CheckConfig(image="i", deploy_as="u")) == "this image (as u)"
    assert not preflight.wanted(CheckConfig(image="i"))
