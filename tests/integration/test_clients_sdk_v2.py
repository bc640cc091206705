"""The real SageMaker Python SDK v2 (`sagemaker<3`, .venv-clients/sdk-v2) against smlocal.

The examples of docs/quickstart-sdk-v2.md run as they are, in their own environment (v2 and v3 are
one distribution name), with a clean process environment: every AWS service but SageMaker goes to a
trap that must stay empty (no STS call: the role is given; no S3: no model data).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.client_envs import (
    EXAMPLES,
    AwsTrap,
    aws_trap,
    client_env,
    client_environ,
    explain,
    run_client,
)
from tests.fixtures.smlocal_server import Smlocal

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def trap() -> Iterator[AwsTrap]:
    with aws_trap() as trap:
        yield trap


@pytest.fixture(scope="module")
def sdk_v2(trap: AwsTrap, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    bin_dir = client_env("sdk-v2", "sagemaker.model")
    env = client_environ(
        tmp_path_factory.mktemp("sdk-v2-home"), bin_dir, trap, SAGEMAKER_SUPPRESS_V2_WARNING="1"
    )
    return bin_dir / "python", env


@pytest.fixture(autouse=True)
def _nothing_reached_aws(trap: AwsTrap) -> Iterator[None]:
    yield
    assert trap.seen == [], "the SDK called an AWS service other than SageMaker"


def run_example(sdk_v2: tuple[Path, dict[str, str]], script: str, *args: str) -> list[str]:
    python, env = sdk_v2
    done = run_client([str(python), str(EXAMPLES / script), *args], env, timeout_s=180)
    assert done.returncode == 0, explain(done)
    # the SDK logs to stdout where it looked for its defaults config (files it did not find)
    return [
        line for line in done.stdout.decode().splitlines() if not line.startswith("sagemaker.config INFO")
    ]


def assert_gone(smlocal: Smlocal, name: str) -> None:
    assert smlocal.sm.list_endpoints(NameContains=name)["Endpoints"] == []
    assert smlocal.sm.list_endpoint_configs(NameContains=name)["EndpointConfigs"] == []
    assert smlocal.sm.list_models(NameContains=name)["Models"] == []


def test_model_deploy_predict_with_serializers_and_delete(
    sdk_v2: tuple[Path, dict[str, str]], smlocal: Smlocal
) -> None:
    name = f"sdk2-{uuid.uuid4().hex[:8]}"
    try:
        lines = run_example(sdk_v2, "sdk_v2_deploy.py", smlocal.server.url, smlocal.image, name)
        # the wait's progress characters: one per poll, "!" at InService
        assert lines[0].endswith("!") and set(lines[0]) <= {"-", "!"}, lines
        assert lines[1:] == [
            "status InService",
            # JSONSerializer -> the echo container -> JSONDeserializer
            "json {'inputs': [1, 2, 3], 'label': 'café'}",
            # CSVSerializer -> CSVDeserializer: rows of strings
            "csv [['1', '2'], ['3', '4']]",
            f"deleted {name}",
        ]
        assert_gone(smlocal, name)
    finally:
        smlocal.cleanup(name)


def test_pipeline_model_deploys_two_containers_in_serial(
    sdk_v2: tuple[Path, dict[str, str]], smlocal: Smlocal, echo_bind_image: str
) -> None:
    name = f"sdk2-pipe-{uuid.uuid4().hex[:6]}"
    try:
        lines = run_example(sdk_v2, "sdk_pipeline_model.py", smlocal.server.url, echo_bind_image, name)
        assert lines[0].endswith("!"), lines
        assert lines[1:] == [
            str(
                [
                    {
                        "Image": echo_bind_image,
                        "Mode": "SingleModel",
                        "Environment": {"STAGE": "first", "STAGE_CONTENT_TYPE": "text/csv"},
                    },
                    {"Image": echo_bind_image, "Mode": "SingleModel", "Environment": {"STAGE": "second"}},
                ]
            ),
            # each stage's tag, in order: the second container got the first one's answer
            "b'1,2|first:text/csv;accept=-|second:text/csv;accept=-'",
        ]
        assert_gone(smlocal, name)
    finally:
        smlocal.cleanup(name)
