"""The real SageMaker Python SDK v2 (`sagemaker<3`, .venv-clients/sdk-v2) against smlocal.

The examples of docs/quickstart-sdk-v2.md run as they are, in their own environment (v2 and v3 are
one distribution name), with a clean process environment: every AWS service but SageMaker goes to a
trap that must stay empty (no STS call: the role is given; no S3: no model data).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.client_envs import (
    EXAMPLES,
    AwsTrap,
    client_env,
    client_environ,
    explain,
    run_client,
)
from tests.fixtures.smlocal_server import Smlocal, model_tar

pytestmark = pytest.mark.docker


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


#: Model data from S3: the SDK passes the s3:// URL through (no upload, no S3 call of its own);
#: smlocal fetches it from its S3 server (moto's, as `smlocal serve` would from AWS_ENDPOINT_URL_S3).
S3_MODEL_SCRIPT = """
import json, sys
import boto3
from sagemaker.model import Model
from sagemaker.predictor import Predictor
from sagemaker.session import Session

url, image, name, model_data = sys.argv[1:5]
boto_session = boto3.Session()
session = Session(
    boto_session=boto_session,
    sagemaker_client=boto_session.client("sagemaker", endpoint_url=url),
    sagemaker_runtime_client=boto_session.client("sagemaker-runtime", endpoint_url=url),
)
model = Model(image_uri=image, model_data=model_data, role="arn:aws:iam::123456789012:role/x",
              name=name, sagemaker_session=session, predictor_cls=Predictor)
predictor = model.deploy(initial_instance_count=1, instance_type="ml.m5.large", endpoint_name=name, wait=False)
session.wait_for_endpoint(name, poll=1)
print()
print("listing", predictor.predict(b"{}", initial_args={"CustomAttributes": "model=1"}).decode())
print("model data", session.sagemaker_client.describe_model(ModelName=name)["PrimaryContainer"]["ModelDataUrl"])
predictor.delete_endpoint()
model.delete_model()
"""


def test_model_data_from_s3_reaches_the_container_without_the_sdk_calling_s3(
    sdk_v2: tuple[Path, dict[str, str]], smlocal: Smlocal, s3_client: Any, s3_bucket: str, tmp_path: Path
) -> None:
    archive = model_tar(tmp_path / "model.tar.gz", {"weights.bin": b"\x01\x02\x03", "config.json": b"{}"})
    s3_client.upload_file(str(archive), s3_bucket, "models/model.tar.gz")
    script = tmp_path / "s3_model.py"
    script.write_text(S3_MODEL_SCRIPT)
    name = f"sdk2-s3-{uuid.uuid4().hex[:6]}"
    model_data = f"s3://{s3_bucket}/models/model.tar.gz"
    python, env = sdk_v2
    try:
        done = run_client(
            [str(python), str(script), smlocal.server.url, smlocal.image, name, model_data],
            env,
            timeout_s=180,
        )
        assert done.returncode == 0, explain(done)
        lines = [
            line for line in done.stdout.decode().splitlines() if line.startswith(("listing", "model data"))
        ]
        listing = json.loads(lines[0].removeprefix("listing "))
        assert listing["files"] == {
            "weights.bin": hashlib.sha256(b"\x01\x02\x03").hexdigest(),
            "config.json": hashlib.sha256(b"{}").hexdigest(),
        }
        assert lines[1] == f"model data {model_data}"
        assert_gone(smlocal, name)
    finally:
        smlocal.cleanup(name)


def test_model_data_as_a_local_file_url_reaches_the_container(
    sdk_v2: tuple[Path, dict[str, str]], smlocal: Smlocal, tmp_path: Path
) -> None:
    """`Model(model_data="file:///abs/model.tar.gz")`: the SDK passes the URL through, smlocal
    extracts the local archive (docs/quickstart-sdk-v2.md says so: no S3 server needed)."""
    archive = model_tar(tmp_path / "model.tar.gz", {"weights.bin": b"\x04\x05"})
    script = tmp_path / "file_model.py"
    script.write_text(S3_MODEL_SCRIPT)
    name = f"sdk2-file-{uuid.uuid4().hex[:6]}"
    model_data = archive.resolve().as_uri()
    python, env = sdk_v2
    try:
        done = run_client(
            [str(python), str(script), smlocal.server.url, smlocal.image, name, model_data],
            env,
            timeout_s=180,
        )
        assert done.returncode == 0, explain(done)
        lines = [
            line for line in done.stdout.decode().splitlines() if line.startswith(("listing", "model data"))
        ]
        listing = json.loads(lines[0].removeprefix("listing "))
        assert listing["files"] == {"weights.bin": hashlib.sha256(b"\x04\x05").hexdigest()}
        assert lines[1] == f"model data {model_data}"
        assert_gone(smlocal, name)
    finally:
        smlocal.cleanup(name)


FAILING_SCRIPT = """
import sys
import boto3
from sagemaker.exceptions import UnexpectedStatusException
from sagemaker.model import Model
from sagemaker.session import Session

url, image, name = sys.argv[1:4]
boto_session = boto3.Session()
session = Session(
    boto_session=boto_session,
    sagemaker_client=boto_session.client("sagemaker", endpoint_url=url),
    sagemaker_runtime_client=boto_session.client("sagemaker-runtime", endpoint_url=url),
)
model = Model(image_uri=image, role="arn:aws:iam::123456789012:role/x", name=name,
              sagemaker_session=session, env={"EXIT_AT_START": "3"})
model.deploy(initial_instance_count=1, instance_type="ml.m5.large", endpoint_name=name, wait=False)
try:
    session.wait_for_endpoint(name, poll=1)
except UnexpectedStatusException as failed:
    print()
    print("failed:", failed)
"""


def test_a_failed_endpoint_raises_unexpected_status_with_smlocals_reason(
    sdk_v2: tuple[Path, dict[str, str]], smlocal: Smlocal, tmp_path: Path
) -> None:
    script = tmp_path / "failing.py"
    script.write_text(FAILING_SCRIPT)
    name = f"sdk2-fail-{uuid.uuid4().hex[:6]}"
    python, env = sdk_v2
    try:
        done = run_client(
            [str(python), str(script), smlocal.server.url, smlocal.image, name], env, timeout_s=120
        )
        assert done.returncode == 0, explain(done)
        reason = smlocal.sm.describe_endpoint(EndpointName=name)["FailureReason"]
        out = done.stdout.decode()
        assert out.count("failed: ") == 1, out
        # smlocal's reason (with the container's last log lines), then the SDK's troubleshooting advice
        assert out[out.index("failed: ") :].startswith(
            f"failed: Error hosting endpoint {name}: Failed. Reason: {reason}. Try changing the instance type"
        ), out
    finally:
        smlocal.cleanup(name)
