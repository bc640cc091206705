"""The real AWS CLI v1 (`awscli` from the package index, .venv-clients/aws-cli) against smlocal.

Every call is the `aws` command in a subprocess with --endpoint-url, dummy credentials from the
environment and config files of the test's own; other AWS services go to a trap that must stay empty.
The example of docs/quickstart-aws-cli.md (docs/examples/aws_cli_endpoint.sh) runs as it is.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import threading
import time
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

ROLE = "arn:aws:iam::123456789012:role/smlocal"
#: The body docs/examples/aws_cli_endpoint.sh sends when given none (as application/json).
EXAMPLE_BODY = b'{"inputs": [1, 2, 3]}'


class Aws:
    """The `aws` command of the aws-cli environment, with a clean environment pointed at smlocal."""

    def __init__(self, bin_dir: Path, env: dict[str, str], url: str) -> None:
        self.bin_dir, self.env, self.url = bin_dir, env, url

    def __call__(self, *args: str, timeout_s: float = 120.0) -> Any:
        return run_client(
            [str(self.bin_dir / "aws"), "--endpoint-url", self.url, *args], self.env, timeout_s=timeout_s
        )

    def json(self, *args: str) -> Any:
        done = self(*args, "--output", "json")
        assert done.returncode == 0, explain(done)
        return json.loads(done.stdout)


@pytest.fixture(scope="module")
def aws_bin() -> Path:
    """Asked for first, so that a missing environment skips before a server starts."""
    return client_env("aws-cli", "awscli")


@pytest.fixture(scope="module")
def aws(aws_bin: Path, smlocal: Smlocal, trap: AwsTrap, tmp_path_factory: pytest.TempPathFactory) -> Aws:
    bin_dir = aws_bin
    home = tmp_path_factory.mktemp("aws-cli-home")
    env = client_environ(home, bin_dir, trap)
    # The quick waiters of docs/quickstart-aws-cli.md, written by the CLI's own Python.
    made = run_client(
        [str(bin_dir / "python"), str(EXAMPLES / "aws_cli_quick_waiters.py"), str(home / "data")], env
    )
    assert made.returncode == 0, explain(made)
    env["AWS_DATA_PATH"] = str(home / "data")
    return Aws(bin_dir, env, smlocal.server.url)


@pytest.fixture(autouse=True)
def _nothing_reached_aws(trap: AwsTrap) -> Iterator[None]:
    yield
    assert trap.seen == [], "a client called an AWS service other than SageMaker"


def create(aws: Aws, name: str, image: str, env: dict[str, str] | None = None) -> None:
    container = f"Image={image}"
    if env:
        container += ",Environment={" + ",".join(f"{k}={v}" for k, v in env.items()) + "}"
    for args in (
        (
            "create-model",
            "--model-name",
            name,
            "--primary-container",
            container,
            "--execution-role-arn",
            ROLE,
        ),
        (
            "create-endpoint-config",
            "--endpoint-config-name",
            name,
            "--production-variants",
            f"VariantName=AllTraffic,ModelName={name},InitialInstanceCount=1,InstanceType=ml.m5.large",
        ),
        ("create-endpoint", "--endpoint-name", name, "--endpoint-config-name", name),
    ):
        done = aws("sagemaker", *args)
        assert done.returncode == 0, explain(done)


class StartingServer:
    """A loopback port for a server that is still starting: its first `closed` connections are
    closed at once, unanswered (what a client meets before `smlocal serve ... &` listens); later ones
    are relayed to the real server on `target_port`."""

    def __init__(self, target_port: int, closed: int) -> None:
        self.target_port, self.closed_left = target_port, closed
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:  # closed: the test is over
                return
            if self.closed_left > 0:
                self.closed_left -= 1
                conn.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            for source, sink in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.listener.close()


def test_the_quick_start_example_runs_an_endpoints_whole_life(
    aws: Aws, smlocal: Smlocal, tmp_path: Path
) -> None:
    """As the page runs it, right after `smlocal serve ... &`: the server's first connections go
    unanswered (and the CLI does not retry them: AWS_MAX_ATTEMPTS=1), and the example waits them out;
    then IMAGE with a local model.tar.gz (deployed as file://), a JSON body sent as application/json."""
    model = model_tar(tmp_path / "model.tar.gz", {"weights.bin": b"w" * 64})
    starting = StartingServer(int(smlocal.server.url.rsplit(":", 1)[1]), closed=2)
    name = f"cli-{uuid.uuid4().hex[:8]}"
    try:
        done = run_client(
            [
                "bash",
                str(EXAMPLES / "aws_cli_endpoint.sh"),
                f"http://127.0.0.1:{starting.port}",
                smlocal.image,
                str(model),
                name,
            ],
            {**aws.env, "AWS_MAX_ATTEMPTS": "1"},
            timeout_s=180,
        )
        assert done.returncode == 0, explain(done)
        assert starting.closed_left == 0  # it met the unanswered connections, and waited
        assert done.stdout.decode().splitlines() == [
            f"arn:aws:sagemaker:us-east-1:123456789012:model/{name}",
            f"arn:aws:sagemaker:us-east-1:123456789012:endpoint-config/{name}",
            f"arn:aws:sagemaker:us-east-1:123456789012:endpoint/{name}",
            "InService",
            f"file://{model.resolve()}",
            "application/json",
            # the echo container answers the request body: the CLI wrote its bytes to the file unchanged
            f"answer sha256 {hashlib.sha256(EXAMPLE_BODY).hexdigest()}",
            f"{name}\tInService",
            f"deleted {name}",
        ]
        assert smlocal.sm.list_endpoints(NameContains=name)["Endpoints"] == []
    finally:
        starting.close()
        smlocal.cleanup(name)


def test_the_quick_start_example_waits_for_a_server_that_is_still_starting(
    aws: Aws, smlocal: Smlocal, tmp_path: Path
) -> None:
    """Started right after `smlocal serve ... &`, nothing listens yet: the example polls until the
    server answers, and one that never does (a port nothing listens on; the wait lowered from 30 s
    to 2 s by SERVER_WAIT_S) ends it with the CLI's connection error before anything is created."""
    with socket.socket() as probe:  # a free loopback port, closed again: connections are refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = model_tar(tmp_path / "model.tar.gz", {"weights.bin": b"w"})
    started = time.monotonic()
    done = run_client(
        [
            "bash",
            str(EXAMPLES / "aws_cli_endpoint.sh"),
            f"http://127.0.0.1:{port}",
            smlocal.image,
            str(model),
        ],
        {**aws.env, "SERVER_WAIT_S": "2", "AWS_MAX_ATTEMPTS": "1"},
        timeout_s=120,
    )
    assert done.returncode == 255, explain(done)
    assert done.stdout == b""  # no create-model ran
    assert f'Could not connect to the endpoint URL: "http://127.0.0.1:{port}/"' in done.stderr.decode()
    assert 2.0 <= time.monotonic() - started < 30.0


def test_describe_invoke_to_a_file_and_list(aws: Aws, smlocal: Smlocal, tmp_path: Path) -> None:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    create(aws, name, smlocal.image)
    try:
        done = aws("sagemaker", "wait", "endpoint-in-service", "--endpoint-name", name)
        assert (done.returncode, done.stdout, done.stderr) == (0, b"", b""), explain(done)
        described = aws.json("sagemaker", "describe-endpoint", "--endpoint-name", name)
        assert described["EndpointStatus"] == "InService"
        assert described["EndpointArn"] == f"arn:aws:sagemaker:us-east-1:123456789012:endpoint/{name}"
        (variant,) = described["ProductionVariants"]
        assert (variant["VariantName"], variant["CurrentInstanceCount"]) == ("AllTraffic", 1)

        body = tmp_path / "in.json"
        body.write_bytes(b'{"instances": [[1.5, 2]], "text": "caf\xc3\xa9"}')
        out = tmp_path / "out.json"
        headers = aws.json(
            "sagemaker-runtime",
            "invoke-endpoint",
            "--endpoint-name",
            name,
            "--body",
            f"fileb://{body}",
            "--content-type",
            "application/json",
            "--custom-attributes",
            "reply-attrs=from-model",
            str(out),
        )
        assert headers == {
            "ContentType": "application/json",
            "InvokedProductionVariant": "AllTraffic",
            "CustomAttributes": "from-model",
        }
        # the same bytes boto3 gets from the same container
        direct = smlocal.rt.invoke_endpoint(
            EndpointName=name, Body=body.read_bytes(), ContentType="application/json"
        )["Body"].read()
        assert out.read_bytes() == direct == body.read_bytes()

        listed = aws.json("sagemaker", "list-endpoints", "--name-contains", name)["Endpoints"]
        assert [(e["EndpointName"], e["EndpointStatus"]) for e in listed] == [(name, "InService")]
    finally:
        for args in (
            ("delete-endpoint", "--endpoint-name", name),
            ("wait", "endpoint-deleted", "--endpoint-name", name),
            ("delete-endpoint-config", "--endpoint-config-name", name),
            ("delete-model", "--model-name", name),
        ):
            aws("sagemaker", *args)
        smlocal.cleanup(name)
    assert smlocal.sm.list_models(NameContains=name)["Models"] == []


def error_line(done: Any) -> str:
    """The CLI's error: exit status 255 and one line on stderr (after a blank one)."""
    assert done.returncode == 255, explain(done)
    assert done.stdout == b""
    text: str = done.stderr.decode()
    assert text.startswith("\n") and text.endswith("\n") and text.count("\n") == 2, text
    return text.strip()


def test_errors_are_exit_status_255_with_sagemakers_message(
    aws: Aws, smlocal: Smlocal, tmp_path: Path
) -> None:
    missing = f"missing-{uuid.uuid4().hex[:6]}"
    assert error_line(aws("sagemaker", "describe-endpoint", "--endpoint-name", missing)) == (
        "An error occurred (ValidationException) when calling the DescribeEndpoint operation: "
        f'Could not find endpoint "arn:aws:sagemaker:us-east-1:123456789012:endpoint/{missing}".'
    )
    # exactly the server's message, as boto3 gets it
    with pytest.raises(smlocal.sm.exceptions.ClientError) as raised:
        smlocal.sm.describe_endpoint(EndpointName=missing)
    assert f"operation: {raised.value.response['Error']['Message']}" in error_line(
        aws("sagemaker", "describe-endpoint", "--endpoint-name", missing)
    )

    body = tmp_path / "b.json"
    body.write_bytes(b"{}")
    assert error_line(
        aws(
            "sagemaker-runtime",
            "invoke-endpoint",
            "--endpoint-name",
            missing,
            "--body",
            f"fileb://{body}",
            str(tmp_path / "never.json"),
        )
    ) == (
        "An error occurred (ValidationError) when calling the InvokeEndpoint operation: "
        f"Endpoint {missing} of account 123456789012 not found."
    )
    assert not (tmp_path / "never.json").exists()

    assert error_line(
        aws(
            "sagemaker",
            "create-model",
            "--model-name",
            "bad_name!",
            "--primary-container",
            f"Image={smlocal.image}",
            "--execution-role-arn",
            ROLE,
        )
    ) == (
        "An error occurred (ValidationException) when calling the CreateModel operation: 1 validation error "
        "detected: Value 'bad_name!' at 'modelName' failed to satisfy constraint: Member must satisfy regular "
        "expression pattern: [a-zA-Z0-9]([\\-a-zA-Z0-9]*[a-zA-Z0-9])?"
    )
    assert error_line(
        aws("sagemaker", "create-endpoint", "--endpoint-name", missing, "--endpoint-config-name", missing)
    ) == (
        "An error occurred (ValidationException) when calling the CreateEndpoint operation: "
        f'Could not find endpoint configuration "arn:aws:sagemaker:us-east-1:123456789012:endpoint-config/{missing}".'
    )


def test_a_failed_endpoint_ends_the_wait_with_255(aws: Aws, smlocal: Smlocal) -> None:
    name = f"cli-fail-{uuid.uuid4().hex[:6]}"
    create(aws, name, smlocal.image, env={"EXIT_AT_START": "3"})
    try:
        line = error_line(aws("sagemaker", "wait", "endpoint-in-service", "--endpoint-name", name))
        assert line == (
            "Waiter EndpointInService failed: Waiter encountered a terminal failure state: "
            'For expression "EndpointStatus" we matched expected path: "Failed"'
        )
        described = aws.json("sagemaker", "describe-endpoint", "--endpoint-name", name)
        assert described["EndpointStatus"] == "Failed"
        assert described["FailureReason"]
    finally:
        smlocal.cleanup(name)


def test_the_quick_waiters_poll_every_second(aws: Aws, smlocal: Smlocal) -> None:
    """With AWS_DATA_PATH from aws_cli_quick_waiters.py the wait ends within seconds of InService; the
    CLI's own waiter, whose first DescribeEndpoint here sees Creating, sleeps 30 s before the next
    (30.9 s measured: docs/quickstart-aws-cli.md)."""
    name = f"cli-slow-{uuid.uuid4().hex[:6]}"
    create(aws, name, smlocal.image, env={"STARTUP_DELAY_S": "3"})
    try:
        assert smlocal.sm.describe_endpoint(EndpointName=name)["EndpointStatus"] == "Creating"
        started = time.monotonic()
        done = aws("sagemaker", "wait", "endpoint-in-service", "--endpoint-name", name)
        took = time.monotonic() - started
        assert done.returncode == 0, explain(done)
        assert took < 25, f"the wait took {took:.1f} s: the 30 s waiter delay was not replaced"
        assert smlocal.sm.describe_endpoint(EndpointName=name)["EndpointStatus"] == "InService"
    finally:
        smlocal.cleanup(name)


def test_invoke_endpoint_async_with_an_s3_input(
    aws: Aws, smlocal: Smlocal, s3_client: Any, s3_bucket: str
) -> None:
    name = f"cli-async-{uuid.uuid4().hex[:6]}"
    smlocal.sm.create_model(ModelName=name, PrimaryContainer={"Image": smlocal.image})
    smlocal.sm.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": name,
                "InitialInstanceCount": 1,
                "InstanceType": "ml.m5.large",
            }
        ],
        AsyncInferenceConfig={
            "OutputConfig": {
                "S3OutputPath": f"s3://{s3_bucket}/out",
                "S3FailurePath": f"s3://{s3_bucket}/err",
            }
        },
    )
    smlocal.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    try:
        assert aws("sagemaker", "wait", "endpoint-in-service", "--endpoint-name", name).returncode == 0
        s3_client.put_object(Bucket=s3_bucket, Key="in/one.json", Body=b'{"async": true}')
        answer = aws.json(
            "sagemaker-runtime",
            "invoke-endpoint-async",
            "--endpoint-name",
            name,
            "--input-location",
            f"s3://{s3_bucket}/in/one.json",
            "--content-type",
            "application/json",
            "--inference-id",
            "cli-1",
        )
        assert answer == {
            "InferenceId": "cli-1",
            "OutputLocation": f"s3://{s3_bucket}/out/cli-1.out",
            "FailureLocation": f"s3://{s3_bucket}/err/cli-1-error.out",
        }
        deadline = time.monotonic() + 30
        while True:
            try:
                got = s3_client.get_object(Bucket=s3_bucket, Key="out/cli-1.out")["Body"].read()
                break
            except s3_client.exceptions.NoSuchKey:
                assert time.monotonic() < deadline, "no output in S3"
                time.sleep(0.05)
        assert got == b'{"async": true}'
    finally:
        smlocal.cleanup(name)


def test_the_cli_reads_no_config_of_the_user(aws: Aws) -> None:
    """The environment names the test's own (empty) config files and a temp HOME."""
    assert Path(aws.env["AWS_CONFIG_FILE"]).read_text() == ""
    assert aws.env["HOME"] != os.environ.get("HOME")
    done = aws("configure", "list")
    assert done.returncode == 0, explain(done)
    text = done.stdout.decode()
    assert "env" in text and "us-east-1" in text


def test_the_endpoint_can_come_from_the_environment_instead(
    aws: Aws, smlocal: Smlocal, trap: AwsTrap
) -> None:
    """No --endpoint-url: AWS_ENDPOINT_URL_SAGEMAKER(_RUNTIME) send the CLI to smlocal (the answer is
    smlocal's; the trap, where AWS_ENDPOINT_URL points, would have answered AccessDenied)."""
    env = dict(
        aws.env,
        AWS_ENDPOINT_URL_SAGEMAKER=smlocal.server.url,
        AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME=smlocal.server.url,
    )
    done = run_client([str(aws.bin_dir / "aws"), "sagemaker", "list-endpoints", "--output", "json"], env)
    assert done.returncode == 0, explain(done)
    assert "Endpoints" in json.loads(done.stdout)
    missing = run_client(
        [str(aws.bin_dir / "aws"), "sagemaker-runtime", "invoke-endpoint", "--endpoint-name", "nope"]
        + ["--body", "fileb:///dev/null", "/dev/null"],
        env,
    )
    assert error_line(missing) == (
        "An error occurred (ValidationError) when calling the InvokeEndpoint operation: "
        "Endpoint nope of account 123456789012 not found."
    )
    assert trap.seen == []
