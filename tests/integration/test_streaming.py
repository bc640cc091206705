"""InvokeEndpointWithResponseStream end to end: real containers on three serving stacks (the streamer
image: uvicorn + FastAPI, gunicorn + Flask, aiohttp), the real server, unchanged boto3 EventStream."""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import EventStreamError

from emulator.config import ContractLimits
from tests.fixtures.smlocal_server import CREDENTIALS, Smlocal, error_of, start_smlocal
from tests.fixtures.streaming import SERVERS, expected_body, stream_script

#: The stream limits lowered so that the timeout paths take seconds.
LIMITS = ContractLimits(
    startup_timeout_s=20.0,
    invocation_timeout_s=5.0,
    stop_grace_s=2.0,
    stream_first_byte_timeout_s=2.0,
    stream_idle_timeout_s=3.0,
    stream_timeout_s=20.0,
)
LOGS = (
    "See https://us-east-1.console.aws.amazon.com/cloudwatch/home?region=us-east-1#logEventViewer:"
    "group=/aws/sagemaker/Endpoints/{name} in account 123456789012 for more information."
)


@pytest.fixture(scope="module")
def streaming(tmp_path_factory: pytest.TempPathFactory, streamer_image: str) -> Iterator[Smlocal]:
    env = start_smlocal(tmp_path_factory.mktemp("streaming"), streamer_image, limits=LIMITS)
    try:
        for server in SERVERS:
            described = env.deploy(f"st-{server}", env={"SERVER": server}, wait=False)
        for server in SERVERS:
            described = env.wait(f"st-{server}")
            assert described["EndpointStatus"] == "InService", described.get("FailureReason")
        yield env
    finally:
        env.server.stop()


def runtime(env: Smlocal, pool: int = 10) -> Any:
    """A runtime client that never retries (a failure is seen, not hidden)."""
    config = Config(retries={"mode": "standard", "max_attempts": 1}, max_pool_connections=pool)
    return boto3.client("sagemaker-runtime", endpoint_url=env.server.url, config=config, **CREDENTIALS)


def stream(rt: Any, name: str, **kwargs: Any) -> tuple[dict[str, Any], list[tuple[int, bytes]]]:
    """Call the operation; each PayloadPart with the time.time_ns() it reached this client."""
    response = rt.invoke_endpoint_with_response_stream(EndpointName=name, **kwargs)
    parts = [(time.time_ns(), e["PayloadPart"]["Bytes"]) for e in response["Body"] if "PayloadPart" in e]
    return response, parts


def joined(parts: list[tuple[int, bytes]]) -> bytes:
    return b"".join(data for _, data in parts)


def stats(env: Smlocal, name: str) -> dict[str, int]:
    """The streamer's own count of its streams (GET /stats on the container's port on 127.0.0.1)."""
    service = env.server.service
    assert service is not None
    (instance,) = service._fleets[name].all_instances()
    result: dict[str, int] = httpx.get(f"{instance.base_url}/stats").json()
    return result


def wait_for(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.mark.parametrize("server", SERVERS)
def test_parts_concatenate_to_exactly_the_bytes_the_container_sent(streaming: Smlocal, server: str) -> None:
    rt = runtime(streaming)
    response, parts = stream(
        rt,
        f"st-{server}",
        Body=stream_script(parts=20, size=100, content_type="accept"),
        ContentType="application/json",
        Accept="application/x-wanted",
        CustomAttributes="trace=42",
    )
    assert joined(parts) == expected_body(20, 100)
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 200
    headers = response["ResponseMetadata"]["HTTPHeaders"]
    assert headers["content-type"] == "application/vnd.amazon.eventstream"
    assert response["ContentType"] == "application/x-wanted"  # X-Amzn-SageMaker-Accept reached it as Accept
    assert response["CustomAttributes"] == "trace=42"
    assert response["InvokedProductionVariant"] == "AllTraffic"


@pytest.mark.parametrize("server", ("uvicorn", "gunicorn"))
def test_each_part_reaches_the_client_as_the_container_writes_it(streaming: Smlocal, server: str) -> None:
    rt = runtime(streaming)
    _, parts = stream(rt, f"st-{server}", Body=stream_script(parts=6, interval_s=0.3, stamp=True))
    written = [int(data.split()[1]) for _, data in parts]  # each chunk's time.time_ns() in the container
    assert len(parts) == 6, "one PayloadPart per chunk when chunks are 0.3 s apart"
    # the first part was at the client long before the container wrote its last chunk
    assert written[-1] - parts[0][0] > 1.2e9
    delays_ms = [(arrived - w) / 1e6 for (arrived, _), w in zip(parts, written, strict=True)]
    assert statistics.median(delays_ms) < 100, delays_ms


@pytest.mark.parametrize(
    ("server", "end"), [("uvicorn", "close"), ("gunicorn", "close"), ("aiohttp", "close")]
)
def test_a_stream_broken_mid_answer_ends_with_model_stream_error(
    streaming: Smlocal, server: str, end: str
) -> None:
    rt = runtime(streaming)
    response = rt.invoke_endpoint_with_response_stream(
        EndpointName=f"st-{server}", Body=stream_script(parts=3, end=end, interval_s=0.05)
    )
    received = b""
    with pytest.raises(EventStreamError) as caught:
        for event in response["Body"]:
            received += event["PayloadPart"]["Bytes"]
    assert received == expected_body(3)
    error = caught.value.response["Error"]
    assert error["Code"] == "ModelStreamError"
    assert error["Message"].startswith(
        "Container primary closed the connection before the end of its streamed response ("
    )
    # the endpoint serves the next stream
    assert joined(stream(rt, f"st-{server}", Body=stream_script(parts=2))[1]) == expected_body(2)


def test_a_container_crashing_mid_stream_gives_the_parts_sent_then_model_stream_error(
    streaming: Smlocal,
) -> None:
    name = "st-crash"
    assert streaming.deploy(name)["EndpointStatus"] == "InService"
    try:
        rt = runtime(streaming)
        response = rt.invoke_endpoint_with_response_stream(
            EndpointName=name, Body=stream_script(parts=4, end="crash")
        )
        received = b""
        with pytest.raises(EventStreamError) as caught:
            for event in response["Body"]:
                received += event["PayloadPart"]["Bytes"]
        assert received == expected_body(4)
        assert caught.value.response["Error"]["Code"] == "ModelStreamError"
        assert "closed the connection before the end of its streamed response" in str(caught.value)
    finally:
        streaming.cleanup(name)


def test_a_container_gone_silent_mid_stream_gets_model_invocation_time_exceeded(streaming: Smlocal) -> None:
    rt = runtime(streaming)
    started = time.monotonic()
    response = rt.invoke_endpoint_with_response_stream(
        EndpointName="st-uvicorn", Body=stream_script(parts=2, end="stall", stall_s=30)
    )
    received = b""
    with pytest.raises(EventStreamError) as caught:
        for event in response["Body"]:
            received += event["PayloadPart"]["Bytes"]
    elapsed = time.monotonic() - started
    assert received == expected_body(2)
    assert caught.value.response["Error"] == {
        "Code": "ModelStreamError",
        "Message": "Your model primary did not complete sending the inference response in the allotted time.",
    }
    assert LIMITS.stream_idle_timeout_s <= elapsed < LIMITS.stream_idle_timeout_s + 2
    # the container's stream was ended by smlocal dropping the connection
    wait_for(lambda: stats(streaming, "st-uvicorn")["in_flight"] == 0, 5, "the stalled stream to end")


def test_errors_before_the_first_byte_are_ordinary_http_errors(streaming: Smlocal) -> None:
    rt = runtime(streaming)
    name = "st-aiohttp"
    with pytest.raises(rt.exceptions.ModelError) as model_error:
        rt.invoke_endpoint_with_response_stream(EndpointName=name, Body=stream_script(status=400))
    body = '{"error": "scripted status 400"}'
    assert error_of(model_error.value) == (
        "ModelError",
        424,
        f'Received client error (400) from primary with message "{body}". ' + LOGS.format(name=name),
    )
    assert model_error.value.response["OriginalStatusCode"] == 400
    with pytest.raises(rt.exceptions.ModelError) as late:
        rt.invoke_endpoint_with_response_stream(EndpointName=name, Body=stream_script(first_delay_s=4))
    assert error_of(late.value) == (
        "ModelError",
        424,
        'Received server error (0) from primary with message "Your invocation timed out while waiting for a '
        "response from container primary. Review the latency metrics for each container in Amazon CloudWatch, "
        'resolve the issue, and try again.". ' + LOGS.format(name=name),
    )
    with pytest.raises(rt.exceptions.ValidationError) as missing:
        rt.invoke_endpoint_with_response_stream(EndpointName="st-nowhere", Body=b"{}")
    assert error_of(missing.value) == (
        "ValidationError",
        400,
        "Endpoint st-nowhere of account 123456789012 not found.",
    )
    with pytest.raises(rt.exceptions.ValidationError) as new_session:  # the model's own pattern
        rt.invoke_endpoint_with_response_stream(EndpointName=name, Body=b"{}", SessionId="NEW_SESSION")
    assert error_of(new_session.value) == (
        "ValidationError",
        400,
        "1 validation error detected: Value 'NEW_SESSION' at 'sessionId' failed to satisfy constraint: "
        "Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9])*$",
    )


@pytest.mark.parametrize("length", [False, True], ids=["chunked", "content-length"])
def test_a_streamed_answer_over_6_mb_is_passed_on_whole(streaming: Smlocal, length: bool) -> None:
    rt = runtime(streaming)
    count, size = 128, 64 * 1024  # 8 MiB: over InvokeEndpoint's 6 MB cap, which streams do not have
    _, parts = stream(rt, "st-uvicorn", Body=stream_script(parts=count, size=size, length=length))
    assert joined(parts) == expected_body(count, size)
    assert len(parts) > 1


def test_fifty_concurrent_streams(streaming: Smlocal) -> None:
    rt = runtime(streaming, pool=60)
    name = "st-uvicorn"
    before = stats(streaming, name)["started"]
    barrier = threading.Barrier(50)
    bodies: list[bytes] = []
    failures: list[str] = []

    def one() -> None:
        barrier.wait()
        try:
            bodies.append(joined(stream(rt, name, Body=stream_script(parts=5, interval_s=0.3))[1]))
        except Exception as exc:  # noqa: BLE001 - counted and shown below
            failures.append(repr(exc))

    threads = [threading.Thread(target=one) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures
    assert bodies == [expected_body(5)] * 50
    after = stats(streaming, name)
    assert after["started"] - before == 50
    assert after["peak"] >= 25, after  # they were served together, not one after another


def _server_state(env: Smlocal, name: str) -> tuple[int, int, int]:
    """(asyncio tasks in the server's loop, the instance's outstanding requests, pooled connections
    in use by the invoker)."""
    service = env.server.service
    assert service is not None

    async def tasks() -> int:
        return len(asyncio.all_tasks())

    (instance,) = service._fleets[name].all_instances()
    connector = service.invoker.session.connector
    assert connector is not None
    in_use = sum(len(v) for v in connector._acquired_per_host.values())
    return env.server.call(tasks()), instance.outstanding, in_use


@pytest.mark.parametrize("silent", [False, True], ids=["writing", "silent"])
def test_a_client_closing_early_ends_the_container_call_and_frees_everything(
    streaming: Smlocal, silent: bool
) -> None:
    name = "st-uvicorn"
    rt = runtime(streaming)
    wait_for(lambda: stats(streaming, name)["in_flight"] == 0, 5, "earlier streams to end")
    base_tasks, _, _ = _server_state(streaming, name)
    before = stats(streaming, name)
    script = (
        stream_script(parts=1, end="stall", stall_s=30)
        if silent
        else stream_script(parts=200, interval_s=0.1)
    )
    response = rt.invoke_endpoint_with_response_stream(EndpointName=name, Body=script)
    events = iter(response["Body"])
    assert "PayloadPart" in next(events)
    assert stats(streaming, name)["in_flight"] == 1
    closed = time.monotonic()
    response["Body"].close()
    # the container sees its client leave: its stream is cancelled, long before it would have ended
    wait_for(
        lambda: stats(streaming, name)["disconnected"] == before["disconnected"] + 1, 2.5, "the disconnect"
    )
    assert time.monotonic() - closed < LIMITS.stream_idle_timeout_s
    assert stats(streaming, name)["completed"] == before["completed"]
    wait_for(lambda: _server_state(streaming, name) == (base_tasks, 0, 0), 5, "the server to free the stream")


def test_target_variant_chooses_the_variant_that_streams(streaming: Smlocal, streamer_image: str) -> None:
    name = "st-variants"
    streaming.sm.create_model(ModelName=name, PrimaryContainer={"Image": streamer_image})
    variants = [
        {"VariantName": v, "ModelName": name, "InitialInstanceCount": 1, "InstanceType": "ml.m5.large"}
        for v in ("one", "two")
    ]
    try:
        streaming.sm.create_endpoint_config(EndpointConfigName=name, ProductionVariants=variants)
        streaming.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
        assert streaming.wait(name)["EndpointStatus"] == "InService"
        rt = runtime(streaming)
        for variant in ("one", "two"):
            response, parts = stream(rt, name, Body=stream_script(parts=2), TargetVariant=variant)
            assert response["InvokedProductionVariant"] == variant
            assert joined(parts) == expected_body(2)
        with pytest.raises(rt.exceptions.ValidationError) as unknown:
            rt.invoke_endpoint_with_response_stream(EndpointName=name, Body=b"{}", TargetVariant="three")
        assert error_of(unknown.value)[:2] == ("ValidationError", 400)
    finally:
        streaming.cleanup(name)


def test_direct_and_serial_endpoints_stream(
    streaming: Smlocal, streamer_image: str, echo_bind_image: str
) -> None:
    rt = runtime(streaming)
    direct = [
        {"Image": streamer_image, "ContainerHostname": "fast", "Environment": {"SERVER": "uvicorn"}},
        {"Image": streamer_image, "ContainerHostname": "flask", "Environment": {"SERVER": "gunicorn"}},
    ]
    # Serial: the echo container hands the script on; the streamer's answer is streamed
    serial = [{"Image": echo_bind_image}, {"Image": streamer_image}]
    for name, containers, mode in (("st-direct", direct, "Direct"), ("st-serial", serial, "Serial")):
        streaming.sm.create_model(
            ModelName=name, Containers=containers, InferenceExecutionConfig={"Mode": mode}
        )
        streaming.sm.create_endpoint_config(
            EndpointConfigName=name,
            ProductionVariants=[
                {
                    "VariantName": "AllTraffic",
                    "ModelName": name,
                    "InitialInstanceCount": 1,
                    "InstanceType": "ml.m5.large",
                }
            ],
        )
        streaming.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    try:
        for name in ("st-direct", "st-serial"):
            described = streaming.wait(name)
            assert described["EndpointStatus"] == "InService", described.get("FailureReason")
        for host in ("fast", "flask"):
            _, parts = stream(rt, "st-direct", Body=stream_script(parts=3), TargetContainerHostname=host)
            assert joined(parts) == expected_body(3)
        with pytest.raises(rt.exceptions.ValidationError):
            rt.invoke_endpoint_with_response_stream(EndpointName="st-direct", Body=b"{}")
        _, parts = stream(
            rt, "st-serial", Body=stream_script(parts=4, interval_s=0.2), ContentType="application/json"
        )
        assert joined(parts) == expected_body(4)
        assert len(parts) == 4
    finally:
        streaming.cleanup("st-direct")
        streaming.cleanup("st-serial")


def _sums(env: Smlocal, name: str) -> tuple[float, float, int]:
    """(ModelLatency Sum, TimeToFirstByte Sum, TimeToFirstByte SampleCount) over all periods."""
    report = httpx.get(f"{env.server.url}/_smlocal/endpoints/{name}/metrics").json()
    latency = sum(p["Metrics"]["ModelLatency"]["Sum"] for p in report["Periods"])
    ttfb = [p["Metrics"]["TimeToFirstByte"] for p in report["Periods"] if "TimeToFirstByte" in p["Metrics"]]
    assert all(t["Namespace"] == "smlocal" and t["Unit"] == "Microseconds" for t in ttfb)
    return latency, sum(t["Sum"] for t in ttfb), sum(t["SampleCount"] for t in ttfb)


def test_stream_metrics_count_to_the_last_byte_and_time_the_first(streaming: Smlocal) -> None:
    name = "st-gunicorn"
    rt = runtime(streaming)
    latency_before, ttfb_before, count_before = _sums(streaming, name)
    started = time.monotonic()
    stream(rt, name, Body=stream_script(parts=3, interval_s=0.4))
    took_us = (time.monotonic() - started) * 1e6
    latency, ttfb, count = _sums(streaming, name)
    assert count == count_before + 1
    assert ttfb - ttfb_before < 0.4e6  # the first part, not the answer
    assert 0.8e6 <= latency - latency_before <= took_us  # ModelLatency runs to the last byte
    exposition = httpx.get(f"{streaming.server.url}/metrics").text
    line = (
        f'smlocal_time_to_first_byte_microseconds_count{{endpoint_name="{name}",variant_name="AllTraffic"}}'
    )
    assert f"{line} {count}" in exposition


def test_smlocal_invoke_stream_prints_each_part_as_it_arrives(streaming: Smlocal) -> None:
    command = [sys.executable, "-m", "emulator.cli", "invoke", "st-uvicorn", "--stream", "--endpoint-url"]
    body = stream_script(parts=3, interval_s=0.5).decode()
    started = time.monotonic()
    with subprocess.Popen(
        [*command, streaming.server.url, "--body", body], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        first_at = time.monotonic() - started
        rest, err = proc.communicate(timeout=30)
        done_at = time.monotonic() - started
    assert proc.returncode == 0, err
    assert first + rest == expected_body(3)
    assert done_at - first_at > 0.8  # the first line was out while the container was still writing

    # a ModelStreamError after some parts: the parts are out, the error on stderr, exit status 1
    broken = subprocess.run(
        [*command, streaming.server.url, "--body", stream_script(parts=2, end="close").decode()],
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert broken.stdout == expected_body(2)
    assert broken.returncode != 0
    assert b"ModelStreamError" in broken.stderr
