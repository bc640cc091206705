"""InvokeEndpoint on multi-container endpoints through unchanged boto3: Direct (TargetContainerHostname
picks the container) and Serial (each container's answer is the next one's request), their errors."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.fixtures.smlocal_server import Smlocal, error_of
from tests.integration.test_multi_container_instances import deploy_multi

pytestmark = pytest.mark.docker

CONSOLE = (
    "See https://us-east-1.console.aws.amazon.com/cloudwatch/home?region=us-east-1#logEventViewer:"
    "group=/aws/sagemaker/Endpoints/{name} in account 123456789012 for more information."
)


def stage(image: str, name: str, content_type: str | None = None, **env: str) -> dict[str, Any]:
    environment = {"STAGE": name, **env}
    if content_type:
        environment["STAGE_CONTENT_TYPE"] = content_type
    return {"Image": image, "Environment": environment}


@pytest.fixture(scope="module")
def direct(smlocal: Smlocal, echo_bind_image: str) -> Iterator[str]:
    containers = [
        {**stage(echo_bind_image, "alpha", "text/alpha"), "ContainerHostname": "alpha"},
        {**stage(echo_bind_image, "beta", "text/beta"), "ContainerHostname": "beta"},
    ]
    described = deploy_multi(smlocal, "mc-direct", containers, mode="Direct")
    assert described["EndpointStatus"] == "InService", described.get("FailureReason")
    yield "mc-direct"
    smlocal.cleanup("mc-direct")


@pytest.fixture(scope="module")
def serial(smlocal: Smlocal, echo_bind_image: str) -> Iterator[str]:
    containers = [
        stage(echo_bind_image, "one", "text/csv"),
        stage(echo_bind_image, "two", "application/json; charset=utf-8"),
        stage(echo_bind_image, "three", "application/x-final"),
    ]
    described = deploy_multi(smlocal, "mc-serial", containers)
    assert described["EndpointStatus"] == "InService", described.get("FailureReason")
    yield "mc-serial"
    smlocal.cleanup("mc-serial")


def test_direct_calls_reach_the_container_they_name(smlocal: Smlocal, direct: str) -> None:
    for target in ("alpha", "beta", "beta", "alpha"):
        got = smlocal.rt.invoke_endpoint(
            EndpointName=direct, Body=b"hi", ContentType="text/plain", TargetContainerHostname=target
        )
        assert got["Body"].read() == f"hi|{target}:text/plain;accept=-".encode()
        assert got["ContentType"] == f"text/{target}"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            None,
            "Endpoint mc-direct is a multi-container endpoint with Direct invocation: specify the "
            "TargetContainerHostname of the container to invoke.",
        ),
        ("gamma", "TargetContainerHostname gamma does not match any container of endpoint mc-direct."),
    ],
)
def test_direct_refuses_a_missing_or_unknown_hostname(
    smlocal: Smlocal, direct: str, target: str | None, message: str
) -> None:
    extra = {"TargetContainerHostname": target} if target else {}
    with pytest.raises(ClientError) as info:
        smlocal.rt.invoke_endpoint(EndpointName=direct, Body=b"x", **extra)
    assert error_of(info) == ("ValidationError", 400, message)


def test_a_hostname_given_to_a_serial_or_single_container_endpoint_is_refused(
    smlocal: Smlocal, serial: str
) -> None:
    smlocal.deploy("mc-single")
    try:
        for name in (serial, "mc-single"):
            with pytest.raises(ClientError) as info:
                smlocal.rt.invoke_endpoint(
                    EndpointName=name, Body=b"x", TargetContainerHostname="container-1"
                )
            assert error_of(info) == (
                "ValidationError",
                400,
                "TargetContainerHostname is only allowed for multi-container endpoints with Direct "
                f"invocation; endpoint {name} is not one.",
            )
        assert smlocal.rt.invoke_endpoint(EndpointName="mc-single", Body=b"plain")["Body"].read() == b"plain"
    finally:
        smlocal.cleanup("mc-single")


def test_serial_chains_the_containers_in_order_handing_on_content_type(smlocal: Smlocal, serial: str) -> None:
    got = smlocal.rt.invoke_endpoint(
        EndpointName=serial,
        Body=b"in",
        ContentType="application/x-start",
        Accept="application/x-final",
        CustomAttributes="trace=1",
    )
    assert got["Body"].read() == (
        b"in|one:application/x-start;accept=-"
        b"|two:text/csv;accept=-"
        b"|three:application/json; charset=utf-8;accept=application/x-final"
    )
    assert got["ContentType"] == "application/x-final"


def test_a_failing_middle_container_is_named(smlocal: Smlocal, echo_bind_image: str) -> None:
    containers = [
        stage(echo_bind_image, "one"),
        stage(echo_bind_image, "two", INVOKE_STATUS="500", INVOKE_STATUS_BODY="middle broke"),
        stage(echo_bind_image, "three"),
    ]
    assert deploy_multi(smlocal, "mc-fail", containers)["EndpointStatus"] == "InService"
    try:
        with pytest.raises(ClientError) as info:
            smlocal.rt.invoke_endpoint(EndpointName="mc-fail", Body=b"x")
        assert error_of(info) == (
            "ModelError",
            424,
            'Received server error (500) from container-2 with message "middle broke". '
            + CONSOLE.format(name="mc-fail"),
        )
        assert info.value.response["OriginalStatusCode"] == 500
    finally:
        smlocal.cleanup("mc-fail")


def test_an_intermediate_payload_over_5_mb_is_a_model_error_naming_both(
    smlocal: Smlocal, echo_bind_image: str
) -> None:
    tag = len(b"a|first:application/octet-stream;accept=-")
    limit = 5 * 1024 * 1024
    containers = [
        {**stage(echo_bind_image, "first", STAGE_GROW=str(limit - tag + 1)), "ContainerHostname": "first"},
        {**stage(echo_bind_image, "second"), "ContainerHostname": "second"},
    ]
    assert deploy_multi(smlocal, "mc-big", containers)["EndpointStatus"] == "InService"
    try:
        with pytest.raises(ClientError) as info:
            smlocal.rt.invoke_endpoint(
                EndpointName="mc-big", Body=b"a", ContentType="application/octet-stream"
            )
        assert error_of(info) == (
            "ModelError",
            424,
            f"Received response from first with status code 200. However, the request payload from first "
            f"to second is {limit + 1} bytes, which has exceeded the maximum limit of 5 MB.",
        )
        # exactly at the limit passes (one byte less from the first container)
        got = smlocal.rt.invoke_endpoint(
            EndpointName="mc-big", Body=b"", ContentType="application/octet-stream"
        )["Body"].read()
        assert len(got) == limit + len(b"|second:application/octet-stream;accept=-")
    finally:
        smlocal.cleanup("mc-big")


def test_an_intermediate_payload_over_the_6_mb_cap_gets_the_pipeline_text(
    smlocal: Smlocal, echo_bind_image: str
) -> None:
    """An intermediate answer over the client's 6,291,456-byte cap is still the pipeline's case (it
    got the generic "The response from container first exceeded the maximum payload size" text)."""
    tag = len(b"a|first:application/octet-stream;accept=-")
    size = 7 * 1024 * 1024
    containers = [
        {**stage(echo_bind_image, "first", STAGE_GROW=str(size - tag)), "ContainerHostname": "first"},
        {**stage(echo_bind_image, "second"), "ContainerHostname": "second"},
    ]
    assert deploy_multi(smlocal, "mc-huge", containers)["EndpointStatus"] == "InService"
    try:
        with pytest.raises(ClientError) as info:
            smlocal.rt.invoke_endpoint(
                EndpointName="mc-huge", Body=b"a", ContentType="application/octet-stream"
            )
        assert error_of(info) == (
            "ModelError",
            424,
            f"Received response from first with status code 200. However, the request payload from first "
            f"to second is {size} bytes, which has exceeded the maximum limit of 5 MB.",
        )
        assert info.value.response["OriginalStatusCode"] == 200
    finally:
        smlocal.cleanup("mc-huge")


def test_the_invocation_budget_is_end_to_end(smlocal: Smlocal, echo_bind_image: str) -> None:
    """Each container answers within the test server's 2 s, the two together do not."""
    containers = [stage(echo_bind_image, n, INVOKE_SLEEP_S="1.2") for n in ("one", "two")]
    assert deploy_multi(smlocal, "mc-slow", containers)["EndpointStatus"] == "InService"
    try:
        started = time.monotonic()
        with pytest.raises(ClientError) as info:
            smlocal.rt.invoke_endpoint(EndpointName="mc-slow", Body=b"x")
        assert time.monotonic() - started < 4
        code, status, message = error_of(info)
        assert (code, status) == ("ModelError", 424)
        assert message.startswith(
            'Received server error (0) from container-2 with message "Your invocation timed out while '
            "waiting for a response from container container-2."
        ), message
    finally:
        smlocal.cleanup("mc-slow")


def test_fifteen_containers_start_and_answer_in_order(smlocal: Smlocal, echo_bind_image: str) -> None:
    containers = [stage(echo_bind_image, f"s{i}") for i in range(1, 16)]
    started = time.monotonic()
    described = deploy_multi(smlocal, "mc-15", containers)
    took = time.monotonic() - started
    try:
        assert described["EndpointStatus"] == "InService", described.get("FailureReason")
        body = smlocal.rt.invoke_endpoint(EndpointName="mc-15", Body=b"", ContentType="a/b")["Body"].read()
        assert [part.split(b":")[0] for part in body.split(b"|")[1:]] == [
            f"s{i}".encode() for i in range(1, 16)
        ]
        print(f"15-container endpoint InService in {took:.1f} s")  # 2.1 s measured: not slow
    finally:
        smlocal.cleanup("mc-15")


def test_a_blue_green_update_from_one_container_to_a_pipeline_fails_no_request(
    smlocal: Smlocal, echo_bind_image: str
) -> None:
    assert smlocal.deploy("mc-update")["EndpointStatus"] == "InService"
    smlocal.sm.create_model(
        ModelName="mc-update-2", Containers=[stage(echo_bind_image, "one"), stage(echo_bind_image, "two")]
    )
    smlocal.sm.create_endpoint_config(
        EndpointConfigName="mc-update-2",
        ProductionVariants=[
            {"VariantName": "AllTraffic", "ModelName": "mc-update-2", "InitialInstanceCount": 1}
        ],
    )
    answers: list[bytes] = []
    errors: list[Exception] = []
    stop = threading.Event()

    def hammer() -> None:
        while not stop.is_set():
            try:
                got = smlocal.rt.invoke_endpoint(EndpointName="mc-update", Body=b"q", ContentType="t/q")
                answers.append(got["Body"].read())
            except Exception as exc:  # every failure is the test's finding
                errors.append(exc)

    worker = threading.Thread(target=hammer)
    worker.start()
    try:
        while not answers:
            time.sleep(0.01)
        smlocal.sm.update_endpoint(EndpointName="mc-update", EndpointConfigName="mc-update-2")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            described = smlocal.sm.describe_endpoint(EndpointName="mc-update")
            if described["EndpointStatus"] != "Updating":
                break
            time.sleep(0.05)
        assert described["EndpointStatus"] == "InService", described.get("FailureReason")
        assert described["EndpointConfigName"] == "mc-update-2"
        seen = len(answers)
        while len(answers) < seen + 3:
            time.sleep(0.01)
    finally:
        stop.set()
        worker.join()
        smlocal.cleanup("mc-update")
        for call, key in (
            (smlocal.sm.delete_endpoint_config, "EndpointConfigName"),
            (smlocal.sm.delete_model, "ModelName"),
        ):
            call(**{key: "mc-update-2"})
    assert errors == []
    assert answers[0] == b"q" and answers[-1] == b"q|one:t/q;accept=-|two:application/octet-stream;accept=-"
    assert set(answers) == {answers[0], answers[-1]}


def test_a_container_dying_mid_pipeline_is_named_and_its_instance_replaced(
    smlocal: Smlocal, echo_bind_image: str
) -> None:
    # the middle container is the plain echo (no STAGE): the custom attribute crash=1 kills it
    containers = [stage(echo_bind_image, "one"), {"Image": echo_bind_image}, stage(echo_bind_image, "three")]
    assert deploy_multi(smlocal, "mc-die", containers)["EndpointStatus"] == "InService"
    try:
        with pytest.raises(ClientError) as info:
            smlocal.rt.invoke_endpoint(EndpointName="mc-die", Body=b"x", CustomAttributes="crash=1")
        code, status, message = error_of(info)
        assert (code, status) == ("ModelError", 424)
        assert message.startswith("Received server error (0) from container-2 with message"), message
        assert "container-2" in info.value.response["OriginalMessage"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the instance is replaced; the endpoint serves again
            try:
                got = smlocal.rt.invoke_endpoint(EndpointName="mc-die", Body=b"x", ContentType="t/x")
                break
            except ClientError:
                time.sleep(0.1)
        assert got["Body"].read() == b"x|one:t/x;accept=-|three:application/octet-stream;accept=-"
        assert smlocal.sm.describe_endpoint(EndpointName="mc-die")["EndpointStatus"] == "InService"
    finally:
        smlocal.cleanup("mc-die")
