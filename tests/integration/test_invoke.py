"""InvokeEndpoint through unchanged boto3 against real containers: forwarding, caps, every error path."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.fixtures.smlocal_server import Smlocal, error_of, model_tar

pytestmark = pytest.mark.docker

CAP = 6_291_456
CONSOLE = (
    "https://us-east-1.console.aws.amazon.com/cloudwatch/home?region=us-east-1"
    "#logEventViewer:group=/aws/sagemaker/Endpoints/Echo"
)
LOG_GROUP_ARN = "arn:aws:logs:us-east-1:123456789012:log-group:/aws/sagemaker/Endpoints/Echo"


@pytest.fixture(scope="module")
def echo(smlocal: Smlocal, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = model_tar(
        tmp_path_factory.mktemp("model") / "model.tar.gz",
        {"config.json": b'{"a": 1}', "sub/w.bin": b"\0" * 64},
    )
    described = smlocal.deploy(
        "Echo", env={"GREETING": "hello from Environment"}, count=2, model_data=str(data)
    )
    assert described["EndpointStatus"] == "InService", described
    yield "Echo"
    smlocal.cleanup("Echo")


def invoke_error(smlocal: Smlocal, **kwargs: object) -> tuple[tuple[str, int, str], dict[str, object]]:
    with pytest.raises(ClientError) as exc:
        smlocal.rt.invoke_endpoint(**kwargs)
    return error_of(exc), exc.value.response


def test_round_trip_and_response_headers(smlocal: Smlocal, echo: str) -> None:
    response = smlocal.rt.invoke_endpoint(EndpointName=echo, Body=b'{"x": 1}', ContentType="application/json")
    assert response["Body"].read() == b'{"x": 1}'
    assert response["ContentType"] == "application/json"
    assert response["InvokedProductionVariant"] == "AllTraffic"
    assert response["ResponseMetadata"]["RequestId"]
    assert response["ResponseMetadata"]["RetryAttempts"] == 0


def test_custom_attributes_round_trip(smlocal: Smlocal, echo: str) -> None:
    response = smlocal.rt.invoke_endpoint(
        EndpointName=echo, Body=b"x", CustomAttributes="reply-attrs=trace-id=42,content-type=text/csv"
    )
    assert response["CustomAttributes"] == "trace-id=42"
    assert response["ContentType"] == "text/csv"


def test_only_sagemaker_headers_reach_the_container(smlocal: Smlocal, echo: str) -> None:
    response = smlocal.rt.invoke_endpoint(
        EndpointName=echo,
        Body=b"x",
        ContentType="text/plain",
        Accept="application/json",
        CustomAttributes="headers=1",
        InferenceId="inference-7",
    )
    received = json.loads(response["Body"].read())
    assert received["content-type"] == "text/plain"
    assert received["accept"] == "application/json"
    assert received["x-amzn-sagemaker-custom-attributes"] == "headers=1"
    assert received["x-amzn-sagemaker-inference-id"] == "inference-7"
    leaked = {"authorization", "x-amz-date", "amz-sdk-invocation-id", "amz-sdk-request", "user-agent"} & set(
        received
    )
    assert not leaked


def test_no_content_type_is_invented(smlocal: Smlocal, echo: str) -> None:
    received = json.loads(
        smlocal.rt.invoke_endpoint(EndpointName=echo, Body=b"x", CustomAttributes="headers=1")["Body"].read()
    )
    assert "content-type" not in received
    assert "accept" not in received


def test_environment_and_read_only_model_dir(smlocal: Smlocal, echo: str) -> None:
    env = smlocal.rt.invoke_endpoint(EndpointName=echo, Body=b"x", CustomAttributes="env=GREETING")
    assert env["Body"].read() == b"hello from Environment"
    model = json.loads(
        smlocal.rt.invoke_endpoint(EndpointName=echo, Body=b"x", CustomAttributes="model=1")["Body"].read()
    )
    assert set(model["files"]) == {"config.json", "sub/w.bin"}
    assert model["writable"] is False
    assert model["uid"] == 0


def test_requests_are_spread_over_instances(smlocal: Smlocal, echo: str) -> None:
    hosts = {
        smlocal.rt.invoke_endpoint(EndpointName=echo, Body=b"x", CustomAttributes="env=CONTAINER_ID")[
            "Body"
        ].read()
        for _ in range(20)
    }
    assert len(hosts) == 2


def test_body_at_the_cap_is_accepted(smlocal: Smlocal, echo: str) -> None:
    body = bytes(range(256)) * (CAP // 256)
    assert len(body) == CAP
    response = smlocal.rt.invoke_endpoint(
        EndpointName=echo, Body=body, ContentType="application/octet-stream"
    )
    assert response["Body"].read() == body


def test_body_over_the_cap_is_refused(smlocal: Smlocal, echo: str) -> None:
    (code, status, message), response = invoke_error(smlocal, EndpointName=echo, Body=b"x" * (CAP + 1))
    assert (code, status, message) == ("413", 413, f"HTTP content length exceeded {CAP} bytes.")
    assert response["ResponseMetadata"]["RetryAttempts"] == 0


def test_response_over_the_cap_is_a_model_error(smlocal: Smlocal, echo: str) -> None:
    (code, status, message), response = invoke_error(
        smlocal, EndpointName=echo, Body=b"x", CustomAttributes=f"size={CAP + 1}"
    )
    assert (code, status) == ("ModelError", 424)
    assert response["OriginalStatusCode"] == 0
    assert (
        response["OriginalMessage"]
        == f"The response from container primary exceeded the maximum payload size of {CAP} bytes."
    )
    ok = smlocal.rt.invoke_endpoint(EndpointName=echo, Body=b"x", CustomAttributes=f"size={CAP}")
    assert len(ok["Body"].read()) == CAP


@pytest.mark.parametrize("status", [400, 404, 500, 503])
def test_container_error_status_is_a_model_error(smlocal: Smlocal, echo: str, status: int) -> None:
    (code, http_status, message), response = invoke_error(
        smlocal, EndpointName=echo, Body=b"x", CustomAttributes=f"status={status}"
    )
    kind = "client" if status < 500 else "server"
    assert (code, http_status) == ("ModelError", 424)
    assert message == (
        f'Received {kind} error ({status}) from primary with message "error body {status}". '
        f"See {CONSOLE} in account 123456789012 for more information."
    )
    assert response["OriginalStatusCode"] == status
    assert response["OriginalMessage"] == f"error body {status}"
    assert response["LogStreamArn"] == LOG_GROUP_ARN
    assert response["ResponseMetadata"]["RetryAttempts"] == 0  # 424: boto3 must not retry


def test_model_error_body_has_sagemakers_five_keys(smlocal: Smlocal, echo: str) -> None:
    raw = httpx.post(
        f"{smlocal.server.url}/endpoints/{echo}/invocations",
        content=b"x",
        headers={"X-Amzn-SageMaker-Custom-Attributes": "status=404"},
    )
    assert raw.status_code == 424
    assert (
        raw.headers["x-amzn-ErrorType"] == "ModelError:http://internal.amazon.com/coral/com.amazon.sagemaker/"
    )
    body = raw.json()
    assert set(body) == {"ErrorCode", "LogStreamArn", "Message", "OriginalMessage", "OriginalStatusCode"}
    assert body["ErrorCode"] == "CLIENT_ERROR_FROM_MODEL"


def test_slow_container_times_out_as_model_error(smlocal: Smlocal, echo: str) -> None:
    (code, status, message), response = invoke_error(
        smlocal, EndpointName=echo, Body=b"x", CustomAttributes="sleep=5"
    )
    assert (code, status) == ("ModelError", 424)
    assert response["OriginalStatusCode"] == 0
    assert message.startswith(
        'Received server error (0) from primary with message "Your invocation timed out while waiting for a '
        "response from container primary. Review the latency metrics for each container in Amazon CloudWatch, "
        'resolve the issue, and try again.". See https://'
    )
    assert response["ResponseMetadata"]["RetryAttempts"] == 0
    # the server keeps serving
    assert smlocal.rt.invoke_endpoint(EndpointName=echo, Body=b"after")["Body"].read() == b"after"


def test_unknown_endpoint(smlocal: Smlocal) -> None:
    (code, status, message), _ = invoke_error(smlocal, EndpointName="Missing", Body=b"x")
    assert (code, status, message) == (
        "ValidationError",
        400,
        "Endpoint Missing of account 123456789012 not found.",
    )


def test_endpoint_names_are_case_sensitive_on_invoke(smlocal: Smlocal, echo: str) -> None:
    (code, status, message), _ = invoke_error(smlocal, EndpointName="echo", Body=b"x")
    assert (code, status, message) == (
        "ValidationError",
        400,
        "Endpoint echo of account 123456789012 not found.",
    )


def test_unknown_target_variant(smlocal: Smlocal, echo: str) -> None:
    (code, status, message), _ = invoke_error(smlocal, EndpointName=echo, Body=b"x", TargetVariant="Nope")
    assert (code, status, message) == ("ValidationError", 400, "Variant Nope not found for endpoint Echo.")
    served = smlocal.rt.invoke_endpoint(EndpointName=echo, Body=b"x", TargetVariant="AllTraffic")
    assert served["InvokedProductionVariant"] == "AllTraffic"


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        (
            {"TargetVariant": "v" * 100},
            "at 'targetVariant' failed to satisfy constraint: Member must have length less than or equal to 63",
        ),
        (
            {"InferenceId": "i" * 65},
            "at 'inferenceId' failed to satisfy constraint: Member must have length less than or equal to 64",
        ),
        (
            {"ContentType": "t" * 1025},
            "at 'contentType' failed to satisfy constraint: "
            "Member must have length less than or equal to 1024",
        ),
    ],
)
def test_header_constraints(smlocal: Smlocal, echo: str, kwargs: dict[str, str], fragment: str) -> None:
    (code, status, message), _ = invoke_error(smlocal, EndpointName=echo, Body=b"x", **kwargs)
    assert (code, status) == ("ValidationError", 400)
    assert fragment in message


def test_inference_component_header_is_refused(smlocal: Smlocal, echo: str) -> None:
    (code, status, message), _ = invoke_error(
        smlocal, EndpointName=echo, Body=b"x", InferenceComponentName="ic"
    )
    assert (code, status) == ("ValidationError", 400)
    assert message.startswith("Inference Component Name header is not allowed")


def test_invoke_endpoint_async_on_a_real_time_endpoint_is_refused(smlocal: Smlocal, echo: str) -> None:
    with pytest.raises(ClientError) as exc:
        smlocal.rt.invoke_endpoint_async(EndpointName=echo, InputLocation="s3://b/k")
    assert error_of(exc) == (
        "ValidationError",
        400,
        f"Endpoint {echo} is not an asynchronous endpoint: InvokeEndpointAsync needs an endpoint config "
        "with AsyncInferenceConfig. Call InvokeEndpoint.",
    )


def test_logs_are_kept_per_variant_and_instance(smlocal: Smlocal, echo: str) -> None:
    smlocal.rt.invoke_endpoint(EndpointName=echo, Body=b"log me")
    text = httpx.get(f"{smlocal.server.url}/_smlocal/endpoints/{echo}/logs").text
    streams = {line.split(" ", 1)[0] for line in text.splitlines()}
    instance_streams = {s for s in streams if s.startswith("AllTraffic/i-")}
    cold_starts = {s for s in instance_streams if s.endswith("/_cold-start")}  # each one's start, profiled
    assert len(instance_streams - cold_starts) == 2 and len(cold_starts) == 2
    assert "echo: listening on 8080" in text


def test_logs_outlive_the_endpoint(smlocal: Smlocal) -> None:
    smlocal.deploy("Archived")
    smlocal.rt.invoke_endpoint(EndpointName="Archived", Body=b"x")
    smlocal.cleanup("Archived")
    files = list((smlocal.state_dir / "logs" / "Archived" / "AllTraffic").glob("i-*.log"))
    assert len(files) == 1
    assert "echo: listening on 8080" in files[0].read_text()
    text = httpx.get(f"{smlocal.server.url}/_smlocal/endpoints/Archived/logs").text
    assert f"AllTraffic/{files[0].stem} echo: SIGTERM" in text
    assert "_smlocal " in text and "endpoint deleted" in text


def test_crashing_container_gets_a_prompt_model_error(smlocal: Smlocal) -> None:
    smlocal.deploy("Crashy")
    try:
        (code, status, _), response = invoke_error(
            smlocal, EndpointName="Crashy", Body=b"x", CustomAttributes="crash=1"
        )
        assert (code, status) == ("ModelError", 424)
        assert response["OriginalStatusCode"] == 0
        assert str(response["OriginalMessage"]).startswith(
            "Container primary closed the connection before sending an HTTP status line: "
        )
    finally:
        smlocal.cleanup("Crashy")


def test_ecr_style_image_uri_resolves_to_the_local_image(smlocal: Smlocal, tmp_path: Path) -> None:
    ecr = "123456789012.dkr.ecr.us-east-1.amazonaws.com/smlocal-test/echo:latest"
    described = smlocal.deploy("Ecr", image=ecr)
    try:
        assert described["EndpointStatus"] == "InService"
        assert described["ProductionVariants"][0]["DeployedImages"][0]["SpecifiedImage"] == ecr
        assert smlocal.rt.invoke_endpoint(EndpointName="Ecr", Body=b"ecr")["Body"].read() == b"ecr"
    finally:
        smlocal.cleanup("Ecr")
