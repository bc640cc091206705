"""The real SageMaker Python SDK v3 (`sagemaker>=3`: sagemaker-core's resource classes,
.venv-clients/sdk-v3) against smlocal.

The example of docs/quickstart-sdk-v3.md runs as it is. The resource classes make their own boto3
clients, so smlocal's address reaches them only through AWS_ENDPOINT_URL_SAGEMAKER and
AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME; every other service goes to a trap that must stay empty.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.fixtures.client_envs import (
    EXAMPLES,
    AwsTrap,
    client_env,
    client_environ,
    explain,
    run_client,
)
from tests.fixtures.smlocal_server import Smlocal

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def v3_bin() -> Path:
    """Asked for first, so that a missing environment skips before a server starts."""
    return client_env("sdk-v3", "sagemaker.core.resources")


@pytest.fixture(scope="module")
def sdk_v3(
    v3_bin: Path, trap: AwsTrap, smlocal: Smlocal, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, str]]:
    bin_dir = v3_bin
    env = client_environ(
        tmp_path_factory.mktemp("sdk-v3-home"),
        bin_dir,
        trap,
        AWS_ENDPOINT_URL_SAGEMAKER=smlocal.server.url,
        AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME=smlocal.server.url,
    )
    return bin_dir / "python", env


def test_resources_create_wait_invoke_and_delete(
    sdk_v3: tuple[Path, dict[str, str]], smlocal: Smlocal, trap: AwsTrap
) -> None:
    python, env = sdk_v3
    name = f"sdk3-{uuid.uuid4().hex[:8]}"
    try:
        done = run_client(
            [str(python), str(EXAMPLES / "sdk_v3_resources.py"), smlocal.image, name], env, timeout_s=180
        )
        assert done.returncode == 0, explain(done)
        text = done.stdout.decode()
        # wait_for_delete draws a rich panel on stdout; the example's own lines are these
        ours = [line for line in text.splitlines() if line.startswith(("status ", "answer ", "deleted "))]
        last = text.rsplit("deleted ", 1)
        assert len(last) == 2, text
        assert ours[:2] == ["status InService", 'answer application/json AllTraffic {"inputs": [1, 2, 3]}']
        assert "deleted " + last[1].strip() == (
            'deleted ValidationException Could not find endpoint "arn:aws:sagemaker:us-east-1:123456789012:'
            f'endpoint/{name}".'
        )
        assert smlocal.sm.list_endpoints(NameContains=name)["Endpoints"] == []
        assert smlocal.sm.list_endpoint_configs(NameContains=name)["EndpointConfigs"] == []
        assert smlocal.sm.list_models(NameContains=name)["Models"] == []
        assert trap.seen == [], "the SDK called an AWS service other than SageMaker"
    finally:
        smlocal.cleanup(name)


def test_without_the_endpoint_variables_nothing_reaches_smlocal(
    sdk_v3: tuple[Path, dict[str, str]], smlocal: Smlocal, trap: AwsTrap
) -> None:
    """The resource classes take no endpoint_url: without AWS_ENDPOINT_URL_SAGEMAKER they call
    whatever boto3 would (here the trap standing in for AWS), which is why the quick start sets it."""
    python, env = sdk_v3
    bare = {k: v for k, v in env.items() if not k.startswith("AWS_ENDPOINT_URL_SAGEMAKER")}
    done = run_client(
        [str(python), "-c", "from sagemaker.core.resources import Endpoint; Endpoint.get(endpoint_name='x')"],
        bare,
        timeout_s=120,
    )
    try:
        assert done.returncode != 0
        assert b"AccessDenied" in done.stderr or b"403" in done.stderr, explain(done)
        assert any("/sagemaker/aws4_request" in seen for seen in trap.seen), trap.seen
    finally:
        trap.seen.clear()


FAILING_SCRIPT = """
import sys
from sagemaker.core.resources import Endpoint, EndpointConfig, Model
from sagemaker.core.shapes import ContainerDefinition, ProductionVariant
from sagemaker.core.utils.exceptions import FailedStatusError

image, name = sys.argv[1:3]
Model.create(model_name=name, execution_role_arn="arn:aws:iam::123456789012:role/x",
             primary_container=ContainerDefinition(image=image, environment={"EXIT_AT_START": "3"}))
EndpointConfig.create(endpoint_config_name=name, production_variants=[ProductionVariant(
    variant_name="AllTraffic", model_name=name, initial_instance_count=1, instance_type="ml.m5.large")])
endpoint = Endpoint.create(endpoint_name=name, endpoint_config_name=name)
try:
    endpoint.wait_for_status("InService", poll=1, timeout=60)
except FailedStatusError as failed:
    print("failed:", failed)
"""


def test_wait_for_status_raises_failed_status_error_with_smlocals_reason(
    sdk_v3: tuple[Path, dict[str, str]], smlocal: Smlocal, trap: AwsTrap, tmp_path: Path
) -> None:
    python, env = sdk_v3
    script = tmp_path / "failing.py"
    script.write_text(FAILING_SCRIPT)
    name = f"sdk3-fail-{uuid.uuid4().hex[:6]}"
    try:
        done = run_client([str(python), str(script), smlocal.image, name], env, timeout_s=120)
        assert done.returncode == 0, explain(done)
        described = smlocal.sm.describe_endpoint(EndpointName=name)
        assert described["EndpointStatus"] == "Failed"
        out = done.stdout.decode()
        assert out.count("failed: ") == 1, out
        # the reason (smlocal's, with the container's last log lines) runs to the end of the output
        assert out[out.index("failed: ") :].rstrip("\n") == (
            "failed: Encountered unexpected failed state while waiting for Endpoint. Final Resource State: "
            f"Failed. Failure Reason: {described['FailureReason']}"
        )
        assert trap.seen == []
    finally:
        smlocal.cleanup(name)
