"""A container that dies while a request is in flight: the client's 424 ModelError says what happened
(the connection was dropped with the request in flight and the container is gone), not that a
connection was refused; the request is never sent to another instance (the model may have seen it)."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from tests.fixtures.smlocal_server import Smlocal, error_of

pytestmark = pytest.mark.docker

CONSOLE = (
    "See https://us-east-1.console.aws.amazon.com/cloudwatch/home?region=us-east-1#logEventViewer:"
    "group=/aws/sagemaker/Endpoints/{name} in account 123456789012 for more information."
)


@pytest.mark.parametrize("count", [1, 2])
def test_a_container_that_exits_mid_request_is_reported_as_such(smlocal: Smlocal, count: int) -> None:
    """The echo container's `crash=1` exits (code 3) inside the invocation. The request before it leaves
    a pooled keep-alive connection, so the crash is seen on a reused connection: the invoker's one retry
    (a stale pooled close) meets a container that is gone. It was reported as "the connection was
    refused" (the retry's error), and with two instances sent to the other one as well."""
    name = f"Crash{count}"
    smlocal.deploy(name, count=count)
    try:
        rt = smlocal.rt
        for _ in range(count):  # a pooled connection to each instance
            assert rt.invoke_endpoint(EndpointName=name, Body=b"warm")["Body"].read() == b"warm"
        with pytest.raises(ClientError) as info:
            rt.invoke_endpoint(EndpointName=name, Body=b"x", CustomAttributes="crash=1")
        code, status, message = error_of(info)
        assert (code, status) == ("ModelError", 424), message
        assert message.startswith(
            'Received server error (0) from primary with message "Container primary dropped the connection '
            "while the request was in flight and no longer accepts connections: the container exited with "
            "code 3 ("
        ), message
        assert message.endswith(CONSOLE.format(name=name)), message
        assert "refused" not in message.split("(")[1], message
        assert info.value.response["ResponseMetadata"]["RetryAttempts"] == 0
    finally:
        smlocal.cleanup(name)
