"""Asynchronous inference end to end: real containers, moto's S3 server, unchanged boto3."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import botocore.session
import httpx
import pytest
from botocore.exceptions import ClientError

from emulator.config import ContractLimits
from tests.fixtures.smlocal_server import CREDENTIALS, Smlocal, error_of, start_smlocal
from tests.fixtures.streaming import stream_script

LIMITS = ContractLimits(startup_timeout_s=20.0, invocation_timeout_s=5.0, stop_grace_s=2.0)


@pytest.fixture(scope="module")
def bucket(s3_server: str) -> Iterator[str]:
    from tests.fixtures.s3server import make_s3_client

    name = f"smlocal-async-{uuid.uuid4().hex[:12]}"
    make_s3_client(s3_server).create_bucket(Bucket=name)
    yield name


@pytest.fixture(scope="module")
def env(
    tmp_path_factory: pytest.TempPathFactory, echo_image: str, s3_server: str, aws_credentials: None
) -> Iterator[Smlocal]:
    smlocal = start_smlocal(
        tmp_path_factory.mktemp("async"),
        echo_image,
        limits=LIMITS,
        s3_endpoint_url=s3_server,
        sns_endpoint_url=s3_server,  # moto's server speaks SNS too
    )
    try:
        yield smlocal
    finally:
        smlocal.server.stop()


def deploy_async(
    env: Smlocal,
    name: str,
    bucket: str,
    image: str | None = None,
    concurrency: int | None = None,
    notification: dict[str, Any] | None = None,
) -> dict[str, Any]:
    env.sm.create_model(ModelName=name, PrimaryContainer={"Image": image or env.image})
    config: dict[str, Any] = {
        "OutputConfig": {
            "S3OutputPath": f"s3://{bucket}/{name}/out",
            "S3FailurePath": f"s3://{bucket}/{name}/err",
        }
    }
    if concurrency is not None:
        config["ClientConfig"] = {"MaxConcurrentInvocationsPerInstance": concurrency}
    if notification is not None:
        config["OutputConfig"]["NotificationConfig"] = notification
    env.sm.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": name,
                "InitialInstanceCount": 1,
                "InstanceType": "ml.m5.large",
            }
        ],
        AsyncInferenceConfig=config,
    )
    env.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    return env.wait(name)


def s3_object(s3: Any, url: str, timeout_s: float = 20.0) -> dict[str, Any]:
    """The object at an s3:// URL once it exists (polled: the worker writes it later)."""
    bucket, key = url.removeprefix("s3://").split("/", 1)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            got: dict[str, Any] = s3.get_object(Bucket=bucket, Key=key)
            return got
        except s3.exceptions.NoSuchKey:
            assert time.monotonic() < deadline, f"nothing at {url}"
            time.sleep(0.05)


def put_input(s3: Any, bucket: str, key: str, data: bytes) -> str:
    s3.put_object(Bucket=bucket, Key=key, Body=data)
    return f"s3://{bucket}/{key}"


def test_an_async_request_is_answered_202_and_its_output_lands_in_s3(
    env: Smlocal, bucket: str, s3_client: Any
) -> None:
    name = "async-echo"
    assert deploy_async(env, name, bucket)["EndpointStatus"] == "InService"
    try:
        described = env.sm.describe_endpoint_config(EndpointConfigName=name)["AsyncInferenceConfig"]
        assert described == {
            "OutputConfig": {
                "S3OutputPath": f"s3://{bucket}/{name}/out",
                "S3FailurePath": f"s3://{bucket}/{name}/err",
            }
        }
        location = put_input(s3_client, bucket, "inputs/one.json", b'{"x": 1}')
        answer = env.rt.invoke_endpoint_async(
            EndpointName=name,
            InputLocation=location,
            ContentType="application/json",
            InferenceId="first-1",
            RequestTTLSeconds=600,  # header integers reach the queue as numbers
            InvocationTimeoutSeconds=30,
        )
        assert answer["ResponseMetadata"]["HTTPStatusCode"] == 202
        assert answer["InferenceId"] == "first-1"
        assert answer["OutputLocation"] == f"s3://{bucket}/{name}/out/first-1.out"
        assert answer["FailureLocation"] == f"s3://{bucket}/{name}/err/first-1-error.out"
        output = s3_object(s3_client, answer["OutputLocation"])
        assert output["Body"].read() == b'{"x": 1}'  # the echo container's answer
        assert output["ContentType"] == "application/json"

        # a model's error goes to the failure location with its reason
        failing = env.rt.invoke_endpoint_async(
            EndpointName=name, InputLocation=location, CustomAttributes="status=500"
        )
        reason = s3_object(s3_client, failing["FailureLocation"])["Body"].read().decode()
        assert reason.startswith('Received server error (500) from primary with message "error body 500".')
        # an input that is not there
        missing = env.rt.invoke_endpoint_async(EndpointName=name, InputLocation=f"s3://{bucket}/nope.json")
        text = s3_object(s3_client, missing["FailureLocation"])["Body"].read().decode()
        assert text.startswith(f"Failed to download the input s3://{bucket}/nope.json: ")

        # an async endpoint takes only InvokeEndpointAsync
        with pytest.raises(ClientError) as refused:
            env.rt.invoke_endpoint(EndpointName=name, Body=b"{}")
        assert error_of(refused.value) == (
            "ValidationError",
            400,
            f"Endpoint {name} is an asynchronous endpoint (its endpoint config has AsyncInferenceConfig): "
            "call InvokeEndpointAsync.",
        )
        logs = httpx.get(f"{env.server.url}/_smlocal/endpoints/{name}/logs").text
        assert "inference first-1 completed" in logs
    finally:
        env.cleanup(name)


def test_a_real_time_endpoint_refuses_invoke_endpoint_async(env: Smlocal) -> None:
    env.deploy("rt-only")
    try:
        with pytest.raises(ClientError) as refused:
            env.rt.invoke_endpoint_async(EndpointName="rt-only", InputLocation="s3://b/k")
        assert error_of(refused.value) == (
            "ValidationError",
            400,
            "Endpoint rt-only is not an asynchronous endpoint: InvokeEndpointAsync needs an endpoint config "
            "with AsyncInferenceConfig. Call InvokeEndpoint.",
        )
        with pytest.raises(ClientError) as missing:
            env.rt.invoke_endpoint_async(EndpointName="nowhere", InputLocation="s3://b/k")
        assert error_of(missing.value)[:2] == ("ValidationError", 400)
    finally:
        env.cleanup("rt-only")


def test_max_concurrent_invocations_per_instance_is_honoured(
    env: Smlocal, bucket: str, s3_client: Any, streamer_image: str
) -> None:
    name = "async-peak"
    assert (
        deploy_async(env, name, bucket, image=streamer_image, concurrency=2)["EndpointStatus"] == "InService"
    )
    try:
        location = put_input(s3_client, bucket, "inputs/slow.json", stream_script(parts=1, first_delay_s=0.4))
        answers = [env.rt.invoke_endpoint_async(EndpointName=name, InputLocation=location) for _ in range(6)]
        for answer in answers:
            assert s3_object(s3_client, answer["OutputLocation"])["Body"].read() == b"part 000000\n"
        service = env.server.service
        assert service is not None
        (instance,) = service._fleets[name].all_instances()
        stats = httpx.get(f"{instance.base_url}/stats").json()
        assert stats["started"] == 6
        assert stats["peak"] == 2  # never more than MaxConcurrentInvocationsPerInstance at once
    finally:
        env.cleanup(name)


def test_a_restart_keeps_the_queue_and_says_what_runs_again(
    tmp_path_factory: pytest.TempPathFactory,
    streamer_image: str,
    s3_server: str,
    aws_credentials: None,
    bucket: str,
    s3_client: Any,
) -> None:
    state = tmp_path_factory.mktemp("async-restart")
    first = start_smlocal(
        state, streamer_image, limits=LIMITS, s3_endpoint_url=s3_server, stop_containers=False
    )
    name = "async-restart"
    try:
        assert deploy_async(first, name, bucket, concurrency=1)["EndpointStatus"] == "InService"
        location = put_input(
            s3_client, bucket, "inputs/restart.json", stream_script(parts=1, first_delay_s=0.5)
        )
        answers = [
            first.rt.invoke_endpoint_async(EndpointName=name, InputLocation=location) for _ in range(4)
        ]
        # ... and one inline: its body is kept in the state dir until it has run
        inline = _inline_body_client(first, tmp_path_factory.mktemp("models"))
        answers.append(
            inline.invoke_endpoint_async(EndpointName=name, Body=stream_script(parts=1, first_delay_s=0.5))
        )
        s3_object(s3_client, answers[0]["OutputLocation"])  # one done, the others queued or running
    finally:
        first.server.stop()
    second = start_smlocal(state, streamer_image, limits=LIMITS, s3_endpoint_url=s3_server)
    try:
        assert second.wait(name)["EndpointStatus"] == "InService"
        for answer in answers:  # nothing lost
            assert s3_object(s3_client, answer["OutputLocation"])["Body"].read() == b"part 000000\n"
        logs = httpx.get(f"{second.server.url}/_smlocal/endpoints/{name}/logs").text
        assert "queued asynchronous request(s) loaded" in logs
        service = second.server.service
        assert service is not None
        (instance,) = service._fleets[name].all_instances()  # adopted: the same container
        started = httpx.get(f"{instance.base_url}/stats").json()["started"]
        # a request the model received before the stop and again after it is named in the log
        assert logs.count("started again (run ") >= started - len(answers)
    finally:
        second.cleanup(name)
        second.server.stop()


def _sns_sqs(s3_server: str) -> tuple[Any, Any]:
    import boto3

    kwargs: dict[str, Any] = {
        "endpoint_url": s3_server,
        "region_name": "us-east-1",
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    }
    return boto3.client("sns", **kwargs), boto3.client("sqs", **kwargs)


def _topic_with_queue(sns: Any, sqs: Any, name: str) -> tuple[str, str]:
    """An SNS topic and an SQS queue subscribed to it with raw delivery (the message as published)."""
    topic = sns.create_topic(Name=name)["TopicArn"]
    queue_url = sqs.create_queue(QueueName=name)["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sns.subscribe(
        TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"}
    )
    return topic, queue_url


def _received(sqs: Any, queue_url: str, timeout_s: float = 20.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=1).get("Messages", [])
        if got:
            document: dict[str, Any] = json.loads(got[0]["Body"])
            return document
    raise AssertionError(f"no message on {queue_url}")


def test_success_and_error_notifications_are_published_to_sns(
    env: Smlocal, bucket: str, s3_client: Any, s3_server: str
) -> None:
    sns, sqs = _sns_sqs(s3_server)
    success, success_queue = _topic_with_queue(sns, sqs, "async-ok")
    error, error_queue = _topic_with_queue(sns, sqs, "async-err")
    name = "async-notify"
    notification = {
        "SuccessTopic": success,
        "ErrorTopic": error,
        "IncludeInferenceResponseIn": ["SUCCESS_NOTIFICATION_TOPIC"],
    }
    assert deploy_async(env, name, bucket, notification=notification)["EndpointStatus"] == "InService"
    try:
        location = put_input(s3_client, bucket, "inputs/notify.json", b'{"n": 1}')
        ok = env.rt.invoke_endpoint_async(
            EndpointName=name, InputLocation=location, ContentType="application/json", InferenceId="n-ok"
        )
        message = _received(sqs, success_queue)
        assert message["inferenceId"] == "n-ok"
        assert message["invocationStatus"] == "Completed"
        assert message["eventName"] == "InferenceResult" and message["eventSource"] == "aws:sagemaker"
        assert message["requestParameters"] == {
            "contentType": "application/json",
            "endpointName": name,
            "inputLocation": location,
        }
        assert message["responseParameters"] == {
            "contentType": "application/json",
            "outputLocation": ok["OutputLocation"],
        }
        assert base64.b64decode(message["responseBody"]["content"]) == b'{"n": 1}'

        env.rt.invoke_endpoint_async(
            EndpointName=name, InputLocation=location, InferenceId="n-bad", CustomAttributes="status=500"
        )
        failed = _received(sqs, error_queue)
        assert failed["inferenceId"] == "n-bad" and failed["invocationStatus"] == "Failed"
        assert failed["failureReason"].startswith("Received server error (500) from primary")
        assert "responseBody" not in failed
    finally:
        env.cleanup(name)


def test_a_failed_publish_is_counted_and_the_result_stands(env: Smlocal, bucket: str, s3_client: Any) -> None:
    name = "async-lost-topic"
    gone = "arn:aws:sns:us-east-1:123456789012:no-such-topic"
    assert (
        deploy_async(env, name, bucket, notification={"SuccessTopic": gone})["EndpointStatus"] == "InService"
    )
    try:
        location = put_input(s3_client, bucket, "inputs/lost.json", b"kept")
        answer = env.rt.invoke_endpoint_async(EndpointName=name, InputLocation=location)
        assert s3_object(s3_client, answer["OutputLocation"])["Body"].read() == b"kept"
        service = env.server.service
        assert service is not None
        endpoint = service.async_inference.endpoint(name)
        assert endpoint is not None
        deadline = time.monotonic() + 10
        while endpoint.counters.notification_failures < 1:
            assert time.monotonic() < deadline, "the failed publish was not counted"
            time.sleep(0.05)
        logs = httpx.get(f"{env.server.url}/_smlocal/endpoints/{name}/logs").text
        assert f"the notification to {gone} failed" in logs
    finally:
        env.cleanup(name)


def _inline_body_client(env: Smlocal, models: Path) -> Any:
    """A boto3 sagemaker-runtime client that can send InvokeEndpointAsync's inline `Body` (SageMaker's
    model since 2026-06: at most 128,000 bytes, InputLocation optional). The installed botocore's own
    client where its model has the member (botocore 1.44 does); otherwise the installed model with that
    change, found first on the loader's path, as a newer botocore would have it. Either way the test
    runs: it never depends on which botocore is installed."""
    session = botocore.session.get_session()
    loader = session.get_component("data_loader")
    data = loader.load_service_model("sagemaker-runtime", "service-2")
    shape = data["shapes"][data["operations"]["InvokeEndpointAsync"]["input"]["shape"]]
    if "Body" in shape["members"]:
        return env.rt
    version = data["metadata"]["apiVersion"]
    data = json.loads(json.dumps(data))
    shape = data["shapes"][data["operations"]["InvokeEndpointAsync"]["input"]["shape"]]
    data["shapes"]["InlineBody"] = {"type": "blob", "max": 128000, "sensitive": True}
    shape["members"]["Body"] = {"shape": "InlineBody"}
    shape["payload"] = "Body"
    shape["required"] = [m for m in shape["required"] if m != "InputLocation"]
    folder = models / "sagemaker-runtime" / version
    folder.mkdir(parents=True)
    (folder / "service-2.json").write_text(json.dumps(data))
    newer = botocore.session.Session()
    newer.get_component("data_loader").search_paths.insert(0, str(models))
    return boto3.Session(botocore_session=newer, **CREDENTIALS).client(
        "sagemaker-runtime", endpoint_url=env.server.url
    )


def test_an_inline_body_is_queued_kept_until_run_and_answered_like_an_s3_input(
    env: Smlocal, bucket: str, s3_client: Any, tmp_path: Path
) -> None:
    name = "async-inline"
    assert deploy_async(env, name, bucket)["EndpointStatus"] == "InService"
    rt = _inline_body_client(env, tmp_path / "models")
    try:
        body = b'{"inline": true}' + b"x" * 1000
        answer = rt.invoke_endpoint_async(EndpointName=name, Body=body, ContentType="application/json")
        assert answer["ResponseMetadata"]["HTTPStatusCode"] == 202
        assert s3_object(s3_client, answer["OutputLocation"])["Body"].read() == body
        inputs = env.state_dir / "async" / name / "inputs"
        deadline = time.monotonic() + 10  # the file goes once the request ended (after its upload)
        while inputs.exists() and list(inputs.iterdir()):
            assert time.monotonic() < deadline, list(inputs.iterdir())
            time.sleep(0.02)
        largest = rt.invoke_endpoint_async(EndpointName=name, Body=b"y" * 128000)
        assert len(s3_object(s3_client, largest["OutputLocation"])["Body"].read()) == 128000
        location = put_input(s3_client, bucket, "inputs/inline-both.json", b"{}")
        refusals = [
            (
                dict(Body=b"z" * 128001),
                "1 validation error detected: Value at 'body' failed to satisfy constraint: Member must have length less than or equal to 128000",
            ),
            (
                dict(Body=b"{}", InputLocation=location),
                "Provide exactly one of InputLocation and Body: the input in S3 (InputLocation) or inline (Body, up to 128000 bytes).",
            ),
            (
                {},
                "Provide exactly one of InputLocation and Body: the input in S3 (InputLocation) or inline (Body, up to 128000 bytes).",
            ),
        ]
        for params, message in refusals:
            with pytest.raises(ClientError) as refused:
                rt.invoke_endpoint_async(EndpointName=name, **params)
            assert error_of(refused.value) == ("ValidationError", 400, message), params
    finally:
        env.cleanup(name)


def test_https_s3_urls_are_read_and_written_like_s3_urls(env: Smlocal, bucket: str, s3_client: Any) -> None:
    """InputLocation and the output paths may be https:// URLs of S3 (virtual-hosted or path-style,
    the key percent-encoded); anything else is refused with what smlocal reads."""
    name = "async-https"
    env.sm.create_model(ModelName=name, PrimaryContainer={"Image": env.image})
    variant = {
        "VariantName": "AllTraffic",
        "ModelName": name,
        "InitialInstanceCount": 1,
        "InstanceType": "ml.m5.large",
    }
    with pytest.raises(ClientError) as bad_output:
        env.sm.create_endpoint_config(
            EndpointConfigName=name,
            ProductionVariants=[variant],
            AsyncInferenceConfig={"OutputConfig": {"S3OutputPath": "https://example.com/out"}},
        )
    assert error_of(bad_output.value) == (
        "ValidationException",
        400,
        "AsyncInferenceConfig.OutputConfig.S3OutputPath https://example.com/out is not an S3 location: use "
        "s3://bucket/prefix or https://bucket.s3.REGION.amazonaws.com/prefix.",
    )
    env.sm.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[variant],
        AsyncInferenceConfig={
            "OutputConfig": {"S3OutputPath": f"https://s3.us-east-1.amazonaws.com/{bucket}/{name}/out"}
        },
    )
    env.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    try:
        assert env.wait(name)["EndpointStatus"] == "InService"
        put_input(s3_client, bucket, "inputs/with space.json", b"https in")
        for location in (
            f"https://{bucket}.s3.amazonaws.com/inputs/with%20space.json",
            f"https://s3.us-east-1.amazonaws.com/{bucket}/inputs/with%20space.json",
        ):
            answer = env.rt.invoke_endpoint_async(EndpointName=name, InputLocation=location)
            assert answer["OutputLocation"].startswith(
                f"https://s3.us-east-1.amazonaws.com/{bucket}/{name}/out/"
            )
            key = answer["OutputLocation"].split(f"/{bucket}/", 1)[1]
            assert s3_object(s3_client, f"s3://{bucket}/{key}")["Body"].read() == b"https in", location
        with pytest.raises(ClientError) as refused:
            env.rt.invoke_endpoint_async(EndpointName=name, InputLocation="https://example.com/in.json")
        assert error_of(refused.value) == (
            "ValidationError",
            400,
            "InputLocation https://example.com/in.json is not an S3 object URL: smlocal reads asynchronous "
            "inputs from s3://bucket/key or https://bucket.s3.REGION.amazonaws.com/key (or "
            "https://s3.REGION.amazonaws.com/bucket/key) only.",
        )
    finally:
        env.cleanup(name)
