"""The accept.* and invocations.* contract checks: each FAILS on its broken twin
(tests/fixtures/twins/<check-id>/, one env flag of the echo image) naming what it saw, and PASSES on the
good echo image; limits are read from the config, and accept.concurrent leaves the container healthy."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from contract_tests.registry import select
from contract_tests.result import CheckResult, Outcome
from contract_tests.runner import run_check
from contract_tests.target import CheckConfig, Target
from tests.fixtures.twins import FAST_LIMITS

pytestmark = pytest.mark.docker

RunOne = Callable[..., CheckResult]
TwinImage = Callable[[str], str]

CHECKS = [
    "accept.concurrent",
    "invocations.timely",
    "invocations.content-type",
    "invocations.extra-headers",
    "invocations.large-body",
    "invocations.response-size",
]


def failed(result: CheckResult, check_id: str) -> str:
    assert result.id == check_id
    assert result.outcome is Outcome.FAILED, f"{result.outcome}: {result.message}"
    assert "Fix: " in result.message
    return result.message


@pytest.mark.parametrize("check_id", CHECKS)
def test_good_image_passes(run_one: RunOne, echo_image: str, check_id: str) -> None:
    result = run_one(check_id, echo_image)
    assert result.id == check_id
    assert result.outcome is Outcome.PASSED, f"{result.outcome}: {result.message}"
    assert result.warnings == ()


def test_every_check_of_the_groups_has_a_twin() -> None:
    # media.py and keepalive.py checks (invocations.* too) are asserted in their own test files
    own = ("contract_tests.checks.accept", "contract_tests.checks.invocations")
    registered = [c.id for c in select(["accept", "invocations"]) if c.func.__module__ in own]
    assert registered == CHECKS
    twins = Path(__file__).parents[1] / "fixtures" / "twins"
    assert all((twins / check_id / "Dockerfile").is_file() for check_id in CHECKS)


# -------------------------------------------------------------------------------- accept.concurrent


def test_single_threaded_twin_fails_accept(run_one: RunOne, twin_image: TwinImage) -> None:
    result = run_one("accept.concurrent", twin_image("accept.concurrent"))
    message = failed(result, "accept.concurrent")
    assert "GET /ping on a second connection was not answered within 250 ms in 2 attempt(s)" in message
    assert "no answer within 2 s (answered " in message  # each measurement, and when it came at last
    assert "only once the held invocation completed" in message
    measurements = result.evidence["measurements"]
    assert len(measurements) == 2
    for m in measurements:
        assert m["answered_s"] is None and m["late_answer_s"] is not None
        assert m["held_on"] == "the keep-alive connection of an answered GET /ping"
        assert m["invocation"] == "HTTP 200" and not m["answered_early"]


def test_accept_reports_the_measurement(run_one: RunOne, echo_image: str) -> None:
    result = run_one("accept.concurrent", echo_image)
    assert result.outcome is Outcome.PASSED, result.message
    assert "answered HTTP 200 in" in result.message and "limit 250 ms" in result.message
    (m,) = result.evidence["measurements"]
    assert m["answered_s"] < 0.25 and m["invocation"] == "HTTP 200"


def test_accept_with_an_empty_payload_holds_the_headers(
    run_one: RunOne, echo_image: str, twin_image: TwinImage
) -> None:
    assert run_one("accept.concurrent", echo_image, payload=b"").outcome is Outcome.PASSED
    result = run_one("accept.concurrent", twin_image("accept.concurrent"), payload=b"")
    failed(result, "accept.concurrent")


@pytest.mark.parametrize("image", ["good", "twin"])
def test_accept_leaves_the_shared_container_healthy(
    image: str, echo_image: str, twin_image: TwinImage, tmp_path: Path
) -> None:
    tag = echo_image if image == "good" else twin_image("accept.concurrent")
    (check,) = select(["accept.concurrent"])
    target = Target(CheckConfig(image=tag, limits=FAST_LIMITS, cache_dir=tmp_path))
    try:
        run_check(check, target)
        container = target.healthy()
        with httpx.Client(base_url=container.base_url, timeout=2) as client:
            assert client.get("/ping").status_code == 200
            assert client.post("/invocations", content=b"{}").status_code == 200
    finally:
        target.close()


# -------------------------------------------------------------------------------- invocations.*


def test_slow_twin_fails_timely(run_one: RunOne, twin_image: TwinImage) -> None:
    message = failed(run_one("invocations.timely", twin_image("invocations.timely")), "invocations.timely")
    assert "POST /invocations with the configured payload (2 bytes, application/json)" in message
    assert "got no answer within 2 s; SageMaker allows 2 s" in message


def test_timely_reads_the_limit(run_one: RunOne, twin_image: TwinImage) -> None:
    result = run_one(
        "invocations.timely",
        twin_image("invocations.timely"),
        limits=FAST_LIMITS.replace(invocation_timeout_s=8),
    )
    assert result.outcome is Outcome.PASSED, result.message
    assert "answered HTTP 200 in" in result.message and "limit 8 s" in result.message


def test_twin_without_content_type_fails(run_one: RunOne, twin_image: TwinImage) -> None:
    result = run_one("invocations.content-type", twin_image("invocations.content-type"))
    message = failed(result, "invocations.content-type")
    seen = "POST /invocations with Content-Type: application/json was answered HTTP 200 with a 2-byte body"
    assert f"{seen} and no Content-Type header" in message
    assert result.evidence["answers"]["Content-Type: application/json"]["content_type"] is None


def test_content_type_pass_names_both_answers(run_one: RunOne, echo_image: str) -> None:
    result = run_one("invocations.content-type", echo_image, payload=b"a,b\n", content_type="text/csv")
    assert result.outcome is Outcome.PASSED, result.message
    assert "Content-Type 'text/csv'" in result.message and "Accept: text/csv" in result.message


def test_strict_headers_twin_fails_and_names_the_headers(run_one: RunOne, twin_image: TwinImage) -> None:
    result = run_one("invocations.extra-headers", twin_image("invocations.extra-headers"))
    message = failed(result, "invocations.extra-headers")
    assert "answered HTTP 200 without extra headers but HTTP 400" in message
    assert "echo: unexpected headers" in message  # the container's own words
    assert "X-Amzn-SageMaker-Inference-Id alone: HTTP 400" in message
    assert "X-Amzn-Trace-Id alone: HTTP 400" in message
    assert "X-Forwarded-For alone" not in message
    assert result.evidence["alone"]["X-Forwarded-For"] == 200


def test_body_limit_twin_fails_large_body(run_one: RunOne, twin_image: TwinImage) -> None:
    result = run_one("invocations.large-body", twin_image("invocations.large-body"))
    message = failed(result, "invocations.large-body")
    assert "with a 6,291,456-byte body" in message
    assert "was refused HTTP 413 ('echo: body over 1000000 bytes')" in message
    assert result.evidence["status"] == 413


def test_large_body_reads_the_limit(run_one: RunOne, echo_image: str, twin_image: TwinImage) -> None:
    lowered = FAST_LIMITS.replace(max_request_bytes=900_000)
    result = run_one("invocations.large-body", twin_image("invocations.large-body"), limits=lowered)
    assert result.outcome is Outcome.PASSED, result.message
    assert "900,000-byte body" in result.message


def test_padded_twin_fails_response_size(run_one: RunOne, twin_image: TwinImage) -> None:
    result = run_one("invocations.response-size", twin_image("invocations.response-size"))
    message = failed(result, "invocations.response-size")
    assert "answered HTTP 200 with a body of 7,000,000 bytes (Content-Length 7000000)" in message
    assert "over SageMaker's 6,291,456-byte cap" in message
    assert result.evidence["response_bytes"] == 7_000_000


def test_response_size_reads_the_limit(run_one: RunOne, echo_image: str) -> None:
    result = run_one(
        "invocations.response-size", echo_image, limits=FAST_LIMITS.replace(max_response_bytes=1)
    )
    message = failed(result, "invocations.response-size")
    assert "with a body of 2 bytes" in message and "over SageMaker's 1-byte cap" in message
