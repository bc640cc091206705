"""The shutdown.* contract checks: each FAILS on its broken twin (tests/fixtures/twins/shutdown.*) and
PASSES on the good echo image, which exits on SIGTERM after finishing the requests in flight.

The tests run with FAST_LIMITS (grace 3 s): a container that ignores SIGTERM costs 3 s, not 30."""

from __future__ import annotations

import os
from collections.abc import Callable

import docker
import pytest

from contract_tests.result import CheckResult, Outcome
from emulator.runtime import labels
from tests.fixtures.twins import FAST_LIMITS

pytestmark = pytest.mark.docker

RunOne = Callable[..., CheckResult]
TwinImage = Callable[[str], str]

GRACE = FAST_LIMITS.stop_grace_s


def _outcome(result: CheckResult, check_id: str, outcome: Outcome) -> str:
    assert result.id == check_id
    assert result.outcome is outcome, f"{result.outcome}: {result.message} {dict(result.evidence)}"
    return result.message


@pytest.fixture
def no_containers_left(docker_engine: docker.DockerClient) -> Callable[[], None]:
    """Asserts that the check removed every container it started (they are labelled with our pid)."""

    def check() -> None:
        owner = f"{labels.OWNER}=check-{os.getpid()}"
        left = docker_engine.containers.list(all=True, filters={"label": owner})
        assert left == [], f"containers left behind: {[c.name for c in left]}"

    return check


class TestIdle:
    CHECK = "shutdown.idle"

    def test_twin_ignoring_sigterm_fails(
        self, run_one: RunOne, twin_image: TwinImage, no_containers_left: Callable[[], None]
    ) -> None:
        result = run_one(self.CHECK, twin_image(self.CHECK))
        message = _outcome(result, self.CHECK, Outcome.FAILED)
        assert f"still running {GRACE:.1f} s after SIGTERM" in message
        assert f"SIGKILL it after {GRACE:g} s" in message
        assert "echo: listening on 8080" in message  # the last log lines
        assert "exec-form ENTRYPOINT" in message  # the fix
        assert result.evidence["exit_code"] is None
        assert result.evidence["seconds_to_exit"] >= GRACE
        no_containers_left()

    def test_good_image_passes(
        self, run_one: RunOne, echo_image: str, no_containers_left: Callable[[], None]
    ) -> None:
        result = run_one(self.CHECK, echo_image)
        message = _outcome(result, self.CHECK, Outcome.PASSED)
        assert message.startswith("exited ") and "after SIGTERM with code 0" in message
        assert result.evidence["exit_code"] == 0
        assert result.evidence["seconds_to_exit"] < 1.0
        no_containers_left()

    def test_never_healthy_is_skipped(self, run_one: RunOne, echo_image: str) -> None:
        result = run_one(self.CHECK, echo_image, environment={"EXIT_AT_START": "3"})
        message = _outcome(result, self.CHECK, Outcome.SKIPPED)
        assert "exited with code 3" in message and "start.healthy" in message


class TestInFlight:
    CHECK = "shutdown.in-flight"

    def test_twin_dropping_requests_fails(
        self, run_one: RunOne, twin_image: TwinImage, no_containers_left: Callable[[], None]
    ) -> None:
        result = run_one(self.CHECK, twin_image(self.CHECK))
        message = _outcome(result, self.CHECK, Outcome.FAILED)
        assert "got no answer" in message
        assert result.evidence["response"] in message  # what was seen: EOF or reset
        assert "exited" in message and "after SIGTERM with code 0" in message
        assert "the rest 0.5 s after SIGTERM" in message
        assert "echo: SIGTERM" in message  # the last log lines
        assert "finish" in message  # the fix
        no_containers_left()

    def test_good_image_answers_then_exits(
        self, run_one: RunOne, echo_image: str, no_containers_left: Callable[[], None]
    ) -> None:
        result = run_one(self.CHECK, echo_image)
        message = _outcome(result, self.CHECK, Outcome.PASSED)
        assert message.startswith("the request in flight got HTTP 200 ")
        assert "after SIGTERM with code 0" in message
        assert result.evidence["continue"] is True  # the server's 100 Continue proved it read the headers
        assert result.evidence["response"] == "HTTP 200 with a 2-byte body"  # the {} payload echoed
        assert result.evidence["exit_code"] == 0
        assert result.evidence["seconds_to_exit"] < GRACE
        no_containers_left()

    def test_answered_but_not_exiting_fails(self, run_one: RunOne, twin_image: TwinImage) -> None:
        # The shutdown.idle twin ignores SIGTERM: it answers the request, then keeps running.
        result = run_one(self.CHECK, twin_image("shutdown.idle"))
        message = _outcome(result, self.CHECK, Outcome.FAILED)
        assert "was answered (HTTP 200" in message
        assert f"still running {GRACE:.1f} s after SIGTERM" in message
        assert result.evidence["exit_code"] is None

    def test_a_larger_payload_is_held_and_answered(self, run_one: RunOne, echo_image: str) -> None:
        payload = b"x" * 100_000
        result = run_one(self.CHECK, echo_image, payload=payload, content_type="application/octet-stream")
        _outcome(result, self.CHECK, Outcome.PASSED)
        assert result.evidence["response"] == f"HTTP 200 with a {len(payload)}-byte body"
