"""The preflight (`smlocal check --instance-type TYPE --deploy-as URI`) against real images: the
image.architecture check FAILS on its twin (an image whose config says arm64, docker-loaded by
tests/fixtures/foreign_arch.py) and on the good image for a Graviton type; the containers get the type's
memory and CPUs; the command ends with the verdict line (docs/cloud-parity.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import docker
import pytest

from contract_tests.check_config import CheckConfig
from contract_tests.result import CheckResult, Outcome
from contract_tests.target import Target
from tests.integration.test_check_cli import assert_no_containers_left, smlocal_check

pytestmark = pytest.mark.docker

RunOne = Callable[..., CheckResult]
ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com/my-model:1"


def test_an_arm64_image_fails_on_an_x86_type(run_one: RunOne, arm64_image: str) -> None:
    result = run_one("image.architecture", arm64_image, instance_type="ml.m5.large")
    assert (result.outcome, result.message) == (
        Outcome.FAILED,
        "the image is built for linux/arm64, but ml.m5.large instances are linux/amd64: SageMaker would "
        'fail the endpoint with CannotStartContainerError ("exec format error"). Fix: the image is built '
        "for linux/arm64; rebuild it for the instance: docker buildx build --platform linux/amd64 ..., or "
        "deploy it on an instance type of linux/arm64.",
    )
    assert result.evidence == {
        "image_architecture": "arm64",
        "instance_type": "ml.m5.large",
        "instance_architecture": "amd64",
    }


def test_the_arm64_image_passes_on_a_graviton_type(run_one: RunOne, arm64_image: str) -> None:
    result = run_one("image.architecture", arm64_image, instance_type="ml.m6g.large")
    assert (result.outcome, result.message) == (Outcome.PASSED, "linux/arm64, as ml.m6g.large")


def test_the_good_image_passes_on_x86_and_fails_on_graviton(run_one: RunOne, echo_image: str) -> None:
    passed = run_one("image.architecture", echo_image, instance_type="ml.m5.large")
    assert (passed.outcome, passed.message) == (Outcome.PASSED, "linux/amd64, as ml.m5.large")
    failed = run_one("image.architecture", echo_image, instance_type="ml.c7g.xlarge")
    assert failed.outcome is Outcome.FAILED
    assert failed.message.startswith(
        "the image is built for linux/amd64, but ml.c7g.xlarge instances are linux/arm64"
    )
    assert "docker buildx build --platform linux/arm64" in failed.message


def test_without_an_instance_type_it_is_skipped(run_one: RunOne, arm64_image: str) -> None:
    result = run_one("image.architecture", arm64_image)
    assert (result.outcome, result.message) == (
        Outcome.SKIPPED,
        "give --instance-type TYPE to judge the image's architecture against it",
    )


def test_containers_get_the_instance_types_memory_and_cpus(
    echo_image: str, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    target = Target(CheckConfig(image=echo_image, instance_type="ml.m5.large", cache_dir=tmp_path))
    try:
        container = target.start()
        host = docker_engine.containers.get(container.handle.id).attrs["HostConfig"]
        cpus = min(2.0, float(os.cpu_count() or 1))
        assert (host["Memory"], host["MemorySwap"], host["NanoCpus"]) == (
            8 * 2**30,
            8 * 2**30,
            int(cpus * 1e9),
        )
    finally:
        target.close()


def test_a_gpu_type_asks_for_the_gpus_and_starts_on_cpu_without_the_nvidia_runtime(
    echo_image: str, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    """ml.g5.xlarge: 16 GiB and 4 vCPUs (capped at the host's cores); the engine here has no NVIDIA
    runtime, so the container starts without a device request (runtime/docker.py warns), as an
    endpoint's does."""
    if "nvidia" in (docker_engine.info().get("Runtimes") or {}):
        pytest.skip("this engine has the NVIDIA runtime: the device request is made")
    target = Target(CheckConfig(image=echo_image, instance_type="ml.g5.xlarge", cache_dir=tmp_path))
    try:
        container = target.start()
        host = docker_engine.containers.get(container.handle.id).attrs["HostConfig"]
        cpus = min(4.0, float(os.cpu_count() or 1))
        assert (host["Memory"], host["NanoCpus"], host["DeviceRequests"]) == (
            16 * 2**30,
            int(cpus * 1e9),
            None,
        )
    finally:
        target.close()


def test_the_preflight_says_no_and_names_the_failing_checks(
    arm64_image: str, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    run, pid = smlocal_check(
        arm64_image,
        *("--check", "image.architecture", "--check", "image.registry"),
        *("--instance-type", "ml.m5.large", "--deploy-as", "docker.io/me/my-model:1"),
        *("--json", "out.json"),
        cwd=tmp_path,
    )
    verdict = (
        "SageMaker would accept this image (as docker.io/me/my-model:1) and ml.m5.large: no: 2 checks fail "
        "(image.architecture, image.registry)"
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stdout.splitlines()[-2:] == [verdict, "JSON report: out.json"], run.stdout
    assert "; instance ml.m5.large" in run.stdout.replace("\n", "")  # the header line, wrapped
    assert json.loads((tmp_path / "out.json").read_text())["properties"]["verdict"] == verdict
    assert_no_containers_left(docker_engine, pid)


def test_the_preflight_says_yes(echo_image: str, docker_engine: docker.DockerClient, tmp_path: Path) -> None:
    run, pid = smlocal_check(
        echo_image,
        *("--check", "image.architecture", "--check", "image.registry", "--check", "start.healthy"),
        *("--instance-type", "ml.m5.large", "--deploy-as", ECR, "--region", "us-east-1"),
        "--startup-timeout",
        "30",
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines()[-1] == (
        f"SageMaker would accept this image (as {ECR}) and ml.m5.large: yes"
    ), run.stdout
    assert_no_containers_left(docker_engine, pid)


def test_an_unknown_instance_type_is_a_usage_error(echo_image: str, tmp_path: Path) -> None:
    run, _ = smlocal_check(echo_image, "--instance-type", "ml.m5.larg", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.strip() == (
        "smlocal check: --instance-type ml.m5.larg: not a SageMaker hosting instance type (botocore's "
        "ProductionVariantInstanceType, e.g. ml.m5.large)"
    )


def test_the_pytest_plugin_takes_the_preflight_options(arm64_image: str, tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPATH": str(root)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "contract_tests.plugin", "-p", "no:cacheprovider", "-v"]
        + ["--sagemaker-image", arm64_image, "--sagemaker-instance-type", "ml.m5.large"]
        + ["--sagemaker-deploy-as", ECR, "--sagemaker-region", "us-east-1"]
        + ["-k", "image.architecture or image.registry"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "smlocal-contract::image.architecture FAILED" in run.stdout
    assert "smlocal-contract::image.registry PASSED" in run.stdout
    assert (
        f"SageMaker would accept this image (as {ECR}) and ml.m5.large: no: 1 check fails (image.architecture)"
        in run.stdout
    )
