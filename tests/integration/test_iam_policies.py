"""`smlocal serve --iam-policies FILE`: InvokeEndpoint through unchanged boto3 clients with different
access keys, against a real server and a real Direct endpoint of three containers (customIpsA,
secret-1, public, each answering with its name): allowed, implicitly denied, explicitly denied (by
TargetContainerHostname), each allowed call reaching the container it named; unknown and missing
credentials; IAM decides before SageMaker's own checks; without the option every caller is allowed."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from emulator.runtime.labels import owner_id
from tests.fixtures.docker_env import track_owner
from tests.fixtures.smlocal_server import Smlocal, error_of, start_smlocal
from tests.integration.test_multi_container_instances import deploy_multi

pytestmark = pytest.mark.docker

ACCOUNT = "123456789012"
ENDPOINT_ARN = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:endpoint/guarded"
HOST = "sagemaker:TargetContainerHostname"
INVOKE = "sagemaker:InvokeEndpoint"
INVOKE_ASYNC = "sagemaker:InvokeEndpointAsync"


def _user(name: str) -> str:
    return f"arn:aws:iam::{ACCOUNT}:user/{name}"


def _policy(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


POLICIES = {
    "identities": {
        # allowed on every endpoint of the account
        "AKIAALICE": {
            "arn": _user("alice"),
            "policies": [
                _policy(
                    {
                        "Effect": "Allow",
                        "Action": "sagemaker:Invoke*",
                        "Resource": "arn:aws:sagemaker:*:*:endpoint/*",
                    }
                )
            ],
        },
        # allowed on another endpoint only: implicitly denied here
        "AKIABOB": {
            "arn": _user("bob"),
            "policies": [
                _policy(
                    {
                        "Effect": "Allow",
                        "Action": INVOKE,
                        "Resource": f"{ENDPOINT_ARN.rsplit('/', 1)[0]}/other",
                    }
                )
            ],
        },
        # everything, but no container whose hostname starts with "secret"
        "AKIACAROL": {
            "arn": _user("carol"),
            "policies": [
                _policy(
                    {"Effect": "Allow", "Action": "*", "Resource": "*"},
                    {
                        "Effect": "Deny",
                        "Action": INVOKE,
                        "Resource": "*",
                        "Condition": {"StringLike": {HOST: "secret*"}},
                    },
                )
            ],
        },
        # only the containers the SageMaker guide's example lists (StringLike with *)
        "AKIADAVE": {
            "arn": _user("dave"),
            "policies": [
                _policy(
                    {
                        "Effect": "Allow",
                        "Action": INVOKE,
                        "Resource": ENDPOINT_ARN,
                        "Condition": {"StringLike": {HOST: ["customIps*", "common*"]}},
                    }
                )
            ],
        },
        # only InvokeEndpointAsync, its own action (not InvokeEndpoint's)
        "AKIAERIN": {
            "arn": _user("erin"),
            "policies": [_policy({"Effect": "Allow", "Action": INVOKE_ASYNC, "Resource": ENDPOINT_ARN})],
        },
        # everything but InvokeEndpointAsync
        "AKIAFRANK": {
            "arn": _user("frank"),
            "policies": [
                _policy(
                    {"Effect": "Allow", "Action": "*", "Resource": "*"},
                    {"Effect": "Deny", "Action": INVOKE_ASYNC, "Resource": "*"},
                )
            ],
        },
    }
}


HOSTNAMES = ("customIpsA", "secret-1", "public")


def assert_needs_a_target(error: tuple[str, int, str]) -> None:
    """SageMaker's refusal of a Direct call without TargetContainerHostname: the proof that IAM let the
    request through. (Its wording belongs to the Direct work, tested there.)"""
    code, status, message = error
    assert (code, status) == ("ValidationError", 400), error
    assert "TargetContainerHostname" in message and "Direct" in message, error


def reached(client: Any, host: str) -> None:
    """An allowed call: the container it named answered (the echo stage tags the body with its name)."""
    got = client.invoke_endpoint(EndpointName="guarded", Body=b"hi", TargetContainerHostname=host)
    assert got["Body"].read().startswith(f"hi|{host}:".encode())


def _denied(user: str, explicit: bool, action: str = INVOKE) -> str:
    reason = (
        "with an explicit deny in an identity-based policy"
        if explicit
        else f"because no identity-based policy allows the {action} action"
    )
    return f"User: {_user(user)} is not authorized to perform: {action} on resource: {ENDPOINT_ARN} {reason}"


def runtime(url: str, key: str) -> Any:
    return boto3.client(
        "sagemaker-runtime",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id=key,
        aws_secret_access_key="any-secret",
        config=Config(retries={"mode": "standard", "max_attempts": 3}),
    )


def refused(client: Any, **kwargs: Any) -> tuple[str, int, str]:
    with pytest.raises(ClientError) as exc:
        client.invoke_endpoint(**kwargs)
    assert exc.value.response["ResponseMetadata"]["RetryAttempts"] == 0  # a 403 is not retried
    return error_of(exc)


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory, echo_bind_image: str) -> Iterator[Smlocal]:
    policies = tmp_path_factory.mktemp("iam") / "policies.json"
    policies.write_text(json.dumps(POLICIES))
    env = start_smlocal(tmp_path_factory.mktemp("smlocal"), echo_bind_image, iam_policies_file=policies)
    try:
        containers = [
            {"Image": echo_bind_image, "Environment": {"STAGE": host}, "ContainerHostname": host}
            for host in HOSTNAMES
        ]
        described = deploy_multi(env, "guarded", containers, mode="Direct")
        assert described["EndpointStatus"] == "InService", described.get("FailureReason")
        yield env
        env.cleanup("guarded")
    finally:
        env.server.stop()


def test_an_allowed_caller_reaches_the_container_it_names(guarded: Smlocal) -> None:
    alice = runtime(guarded.server.url, "AKIAALICE")
    for host in (*HOSTNAMES, "public"):
        reached(alice, host)
    assert_needs_a_target(refused(alice, EndpointName="guarded", Body=b"hi"))


def test_no_policy_allowing_it_is_an_implicit_deny(guarded: Smlocal) -> None:
    assert refused(runtime(guarded.server.url, "AKIABOB"), EndpointName="guarded", Body=b"hi") == (
        "AccessDeniedException",
        403,
        _denied("bob", explicit=False),
    )


def test_a_deny_on_the_target_container_hostname_wins(guarded: Smlocal) -> None:
    carol = runtime(guarded.server.url, "AKIACAROL")
    assert refused(carol, EndpointName="guarded", Body=b"hi", TargetContainerHostname="secret-1") == (
        "AccessDeniedException",
        403,
        _denied("carol", explicit=True),
    )
    # another hostname passes IAM and reaches its container; without one the Deny's condition does not
    # match (the key is absent): IAM lets it through to SageMaker's own check
    reached(carol, "public")
    reached(carol, "customIpsA")
    assert_needs_a_target(refused(carol, EndpointName="guarded", Body=b"hi"))


def test_an_allow_list_of_hostnames_denies_a_request_without_one(guarded: Smlocal) -> None:
    dave = runtime(guarded.server.url, "AKIADAVE")
    assert refused(dave, EndpointName="guarded", Body=b"hi") == (
        "AccessDeniedException",
        403,
        _denied("dave", False),
    )
    assert refused(dave, EndpointName="guarded", Body=b"hi", TargetContainerHostname="secondContainer") == (
        "AccessDeniedException",
        403,
        _denied("dave", False),
    )
    assert refused(dave, EndpointName="guarded", Body=b"hi", TargetContainerHostname="public") == (
        "AccessDeniedException",
        403,
        _denied("dave", False),
    )
    reached(dave, "customIpsA")


def test_iam_decides_before_the_endpoint_is_looked_up(guarded: Smlocal) -> None:
    url = guarded.server.url
    nope = ENDPOINT_ARN.replace("guarded", "nope")
    code, status, message = refused(runtime(url, "AKIABOB"), EndpointName="Nope", Body=b"")
    assert (code, status) == ("AccessDeniedException", 403)
    assert f"on resource: {nope} because" in message  # the ARN carries the name lower-cased
    assert refused(runtime(url, "AKIAALICE"), EndpointName="Nope", Body=b"") == (
        "ValidationError",
        400,
        f"Endpoint Nope of account {ACCOUNT} not found.",
    )


def test_unknown_and_missing_credentials(guarded: Smlocal) -> None:
    url = guarded.server.url
    assert refused(runtime(url, "AKIAMALLORY"), EndpointName="guarded", Body=b"") == (
        "UnrecognizedClientException",
        403,
        "The security token included in the request is invalid.",
    )
    unsigned = httpx.post(f"{url}/endpoints/guarded/invocations", content=b"hi")
    assert unsigned.status_code == 403
    assert unsigned.headers["x-amzn-ErrorType"].startswith("MissingAuthenticationTokenException:")
    assert unsigned.json() == {"message": "Missing Authentication Token"}


def test_without_the_option_every_caller_is_allowed(echo_image: str, tmp_path: Path) -> None:
    env = start_smlocal(tmp_path / "state", echo_image)
    try:
        assert env.deploy("open")["EndpointStatus"] == "InService"
        for key in ("AKIABOB", "AKIAMALLORY"):
            assert (
                runtime(env.server.url, key).invoke_endpoint(EndpointName="open", Body=b"x")["Body"].read()
                == b"x"
            )
        assert httpx.post(f"{env.server.url}/endpoints/open/invocations", content=b"y").content == b"y"
        env.cleanup("open")
    finally:
        env.server.stop()


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(tmp_path: Path, policies: Path) -> subprocess.Popen[bytes]:
    track_owner(owner_id(tmp_path / "state"))
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "emulator.cli",
            "serve",
            "--port",
            str(_port()),
            "--state-dir",
            str(tmp_path / "state"),
        ]
        + ["--iam-policies", str(policies)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def test_smlocal_serve_with_the_option(tmp_path: Path) -> None:
    policies = tmp_path / "policies.json"
    policies.write_text(json.dumps(POLICIES))
    port = _port()
    track_owner(owner_id(tmp_path / "state"))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "emulator.cli",
            "serve",
            "--port",
            str(port),
            "--state-dir",
            str(tmp_path / "state"),
        ]
        + ["--iam-policies", str(policies), "--stop-grace", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:  # poll the health route until the server answers (no fixed sleep)
            try:
                if httpx.get(f"{url}/_smlocal/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "smlocal serve did not answer"
            time.sleep(0.1)
        code, status, message = refused(runtime(url, "AKIABOB"), EndpointName="guarded", Body=b"")
        assert (code, status, message) == ("AccessDeniedException", 403, _denied("bob", explicit=False))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def test_smlocal_serve_refuses_a_bad_file_at_start(tmp_path: Path) -> None:
    policies = tmp_path / "policies.json"
    policies.write_text(
        json.dumps({"identities": {"AK": {"arn": _user("a"), "policies": [{"Statement": {}}]}}})
    )
    proc = _serve(tmp_path, policies)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert (
        f"smlocal: --iam-policies {policies}: identity AK, policy 1, statement 1: "
        "Effect must be Allow or Deny, not None" in out.decode()
    )
    missing = tmp_path / "missing.json"
    proc = _serve(tmp_path, missing)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert f"smlocal: --iam-policies {missing}: cannot read it:" in out.decode()


def test_the_stream_operation_is_authorized_as_invoke_endpoint(guarded: Smlocal) -> None:
    """InvokeEndpointWithResponseStream needs sagemaker:InvokeEndpoint (its API reference): the same
    policies allow and deny it, with the same texts."""
    carol = runtime(guarded.server.url, "AKIACAROL")
    streamed = carol.invoke_endpoint_with_response_stream(
        EndpointName="guarded", Body=b"hi", TargetContainerHostname="public"
    )
    body = b"".join(e["PayloadPart"]["Bytes"] for e in streamed["Body"] if "PayloadPart" in e)
    assert body.startswith(b"hi|public:")
    for user, key, extra, explicit in (
        ("carol", "AKIACAROL", {"TargetContainerHostname": "secret-1"}, True),
        ("bob", "AKIABOB", {}, False),
    ):
        with pytest.raises(ClientError) as exc:
            runtime(guarded.server.url, key).invoke_endpoint_with_response_stream(
                EndpointName="guarded", Body=b"hi", **extra
            )
        assert error_of(exc) == ("AccessDeniedException", 403, _denied(user, explicit))


def _invoke_async(client: Any) -> tuple[str, int, str]:
    with pytest.raises(ClientError) as exc:
        client.invoke_endpoint_async(EndpointName="guarded", InputLocation="s3://bucket/input.json")
    return error_of(exc)


def test_invoke_endpoint_async_is_authorized_as_its_own_action(guarded: Smlocal) -> None:
    """sagemaker:InvokeEndpointAsync (the service authorization reference lists it apart from
    InvokeEndpoint): an Allow of only it lets InvokeEndpointAsync through to SageMaker's own check (the
    endpoint is not asynchronous) and refuses InvokeEndpoint; a Deny of it refuses InvokeEndpointAsync
    and nothing else. (It was authorized as sagemaker:InvokeEndpoint: the Deny let it through and the
    Allow refused it.)"""
    erin = runtime(guarded.server.url, "AKIAERIN")
    assert _invoke_async(erin) == (
        "ValidationError",
        400,
        "Endpoint guarded is not an asynchronous endpoint: InvokeEndpointAsync needs an endpoint config "
        "with AsyncInferenceConfig. Call InvokeEndpoint.",
    )
    assert refused(erin, EndpointName="guarded", Body=b"hi", TargetContainerHostname="public") == (
        "AccessDeniedException",
        403,
        _denied("erin", explicit=False),
    )
    frank = runtime(guarded.server.url, "AKIAFRANK")
    assert _invoke_async(frank) == ("AccessDeniedException", 403, _denied("frank", True, INVOKE_ASYNC))
    reached(frank, "public")
    # without a policy that allows it: the implicit deny names the async action
    assert _invoke_async(runtime(guarded.server.url, "AKIABOB")) == (
        "AccessDeniedException",
        403,
        _denied("bob", False, INVOKE_ASYNC),
    )
