"""The SIGTERM traps the reviews of issue 24 found shutdown.idle and shutdown.in-flight right about, on
real stacks (the sh + gunicorn and `tail -f` + gunicorn traps are in test_checks_shutdown.py):

- a language runtime as PID 1 with no SIGTERM handler, which the kernel then ignores: Node.js from
  Debian (twins/shutdown.idle.node-pid1), the reviews' R plumber server's trap without R's gigabyte;
- a bash `serve` launcher (PID 1) running uvicorn + FastAPI in the foreground (twins/shutdown.idle.bash-pid1);
- gunicorn + Flask with `--graceful-timeout 0`, whose SIGTERM kills the request in flight
  (twins/shutdown.in-flight.gunicorn-no-grace); with a grace (the keep-alive image's 5 s) it passes.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from contract_tests.result import CheckResult, Outcome
from emulator.config import ContractLimits
from tests.fixtures.twins import FAST_LIMITS

pytestmark = pytest.mark.docker

RunOne = Callable[..., CheckResult]
StackTwin = Callable[[str, str], str]
#: uvicorn + FastAPI and gunicorn + Flask take seconds to start on a loaded 2-core machine: more than
#: FAST_LIMITS' 6 s start (the grace, which these tests measure, is FAST_LIMITS' 3 s).
PATIENT = ContractLimits(startup_timeout_s=30.0, invocation_timeout_s=2.0, stop_grace_s=3.0)
GRACE = FAST_LIMITS.stop_grace_s


def _outcome(result: CheckResult, check_id: str, outcome: Outcome) -> str:
    assert result.id == check_id
    assert result.outcome is outcome, f"{result.outcome}: {result.message} {dict(result.evidence)}"
    return result.message


def test_node_pid1_without_a_handler_fails_idle(
    run_one: RunOne, stack_twin_image: StackTwin, debian_stacks_image: str
) -> None:
    result = run_one("shutdown.idle", stack_twin_image("shutdown.idle.node-pid1", debian_stacks_image))
    message = _outcome(result, "shutdown.idle", Outcome.FAILED)
    assert message.startswith("the idle container was still running ")
    assert f"s after SIGTERM: SageMaker would SIGKILL it after {GRACE:g} s" in message
    assert "PID 1 (`node /opt/program/server.js`) is the server, and it kept running" in message
    assert "has no handler for it (the kernel drops a signal that PID 1 does not handle)" in message
    assert "Fix: Handle SIGTERM in the server" in message
    assert result.evidence["sigterm_outcome"] == "ignored"
    assert result.evidence["processes_before"] == result.evidence["processes_after"]  # one process, unmoved


def test_bash_launcher_running_uvicorn_in_the_foreground_fails_idle(
    run_one: RunOne, stack_twin_image: StackTwin, fastapi_image: str
) -> None:
    result = run_one(
        "shutdown.idle", stack_twin_image("shutdown.idle.bash-pid1", fastapi_image), limits=PATIENT
    )
    message = _outcome(result, "shutdown.idle", Outcome.FAILED)
    assert (
        "PID 1 (`/bin/bash /opt/program/serve serve`) is a shell: it got SIGTERM and did not pass it on"
        in message
    )
    assert "so the server (`/opt/venv/bin/python3 /opt/venv/bin/uvicorn --host 0.0.0.0" in message
    assert "its child, never saw it and still runs" in message
    assert "Fix: Make the server PID 1: `exec` it" in message
    assert result.evidence["sigterm_outcome"] == "shell-no-forward"


def test_gunicorn_without_a_graceful_timeout_fails_in_flight(
    run_one: RunOne, stack_twin_image: StackTwin, keepalive_image: str
) -> None:
    twin = stack_twin_image("shutdown.in-flight.gunicorn-no-grace", keepalive_image)
    result = run_one("shutdown.in-flight", twin, limits=PATIENT)
    message = _outcome(result, "shutdown.in-flight", Outcome.FAILED)
    assert "a request in flight when SIGTERM arrived (headers and half its body sent" in message
    assert "got no answer: the connection was closed without a response" in message
    assert "[INFO] Handling signal: term" in message  # gunicorn's own log line
    assert "Fix: On SIGTERM stop accepting new connections but let the requests in flight finish" in message
    assert result.evidence["continue"] is True  # gunicorn had read the request's headers
    assert result.evidence["exit_code"] == 0 and result.evidence["seconds_to_answer"] is None


def test_gunicorn_with_a_graceful_timeout_passes_in_flight(run_one: RunOne, keepalive_image: str) -> None:
    result = run_one("shutdown.in-flight", keepalive_image, limits=PATIENT)  # --graceful-timeout 5
    message = _outcome(result, "shutdown.in-flight", Outcome.PASSED)
    assert message.startswith("the request in flight got HTTP 200 ")
    assert "after SIGTERM with code 0" in message
