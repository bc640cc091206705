"""The checks the reviews of issue 24 found right on nginx (Debian's, in front of the echo model server:
tests/fixtures/images/debstacks), kept as regression twins with their fixes:

- start.bind-to-port FAILS on a labelled image whose nginx is hard-wired to `listen 8080;`
  (twins/start.bind-to-port.nginx) and PASSES once the entry script templates the port from
  SAGEMAKER_BIND_TO_PORT (twins/start.bind-to-port.nginx-templated);
- invocations.large-body FAILS, naming the 413 and the limit to raise, with `client_max_body_size 1m;`
  (twins/invocations.large-body.nginx) and PASSES at 6m (the image's own configuration);
- invocations.keepalive warns on nginx's delayed-ACK stall, `tcp_nodelay off;` with sendfile
  (twins/invocations.keepalive.nginx), and not on nginx's defaults.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from contract_tests.checks.bind_port import BIND_PORT
from contract_tests.checks.keepalive import PAIRS, ROUNDS
from contract_tests.result import CheckResult, Outcome
from emulator.config import ContractLimits

pytestmark = pytest.mark.docker

RunOne = Callable[..., CheckResult]
StackTwin = Callable[[str, str], str]
LABEL = "com.amazonaws.sagemaker.capabilities.accept-bind-to-port"
#: A startup timeout the failing twin must not wait out: it is judged on what 8080 answers.
PATIENT = ContractLimits(startup_timeout_s=30.0, invocation_timeout_s=2.0, stop_grace_s=3.0)


def _outcome(result: CheckResult, outcome: Outcome) -> str:
    assert result.outcome is outcome, f"{result.outcome}: {result.message} {dict(result.evidence)}"
    return result.message


def test_nginx_hard_wired_to_8080_fails_bind_to_port(
    run_one: RunOne, stack_twin_image: StackTwin, debian_stacks_image: str
) -> None:
    twin = stack_twin_image("start.bind-to-port.nginx", debian_stacks_image)
    result = run_one("start.bind-to-port", twin, limits=PATIENT)
    message = _outcome(result, Outcome.FAILED)
    assert f"carries {LABEL}=true and was started with SAGEMAKER_BIND_TO_PORT={BIND_PORT}" in message
    # nginx answers at once: 200, or 502 while the model server behind it is still starting
    assert re.search(
        r"the server ignores the variable: port 8080 answered GET /ping HTTP (200|502) ", message
    )
    assert f"while port {BIND_PORT} gave no HTTP answer" in message
    assert "Listen on $SAGEMAKER_BIND_TO_PORT only when it is set, or remove the label." in message
    assert result.evidence["default_port"]["first_status"] in (200, 502)
    assert result.evidence["bind_port"]["first_status"] is None
    assert result.duration_s < PATIENT.startup_timeout_s / 2  # decided on 8080's answer, not the deadline


def test_nginx_templated_from_the_variable_passes_bind_to_port(
    run_one: RunOne, stack_twin_image: StackTwin, debian_stacks_image: str
) -> None:
    twin = stack_twin_image("start.bind-to-port.nginx-templated", debian_stacks_image)
    result = run_one("start.bind-to-port", twin, limits=PATIENT)
    message = _outcome(result, Outcome.PASSED)
    assert f"GET /ping answered 200 on port {BIND_PORT}" in message
    assert "port 8080 gave no HTTP answer" in message
    assert "the image can join a multi-container model or an inference pipeline" in message
    assert result.evidence["default_port"]["first_status"] is None


def test_nginx_client_max_body_size_under_the_cap_fails_large_body(
    run_one: RunOne, stack_twin_image: StackTwin, debian_stacks_image: str
) -> None:
    twin = stack_twin_image("invocations.large-body.nginx", debian_stacks_image)
    message = _outcome(run_one("invocations.large-body", twin), Outcome.FAILED)
    assert "POST /invocations with a 6,291,456-byte body" in message
    assert "was refused HTTP 413 ('<html>" in message and "413 Request Entity Too Large" in message
    assert "or any proxy in front of it (nginx client_max_body_size" in message  # the limit to raise
    assert "client intended to send too large body: 6291456 bytes" in message  # nginx's own log line


def test_nginx_client_max_body_size_at_6m_passes_large_body(
    run_one: RunOne, debian_stacks_image: str
) -> None:
    result = run_one("invocations.large-body", debian_stacks_image)  # nginx/proxy.conf: 6m
    message = _outcome(result, Outcome.PASSED)
    assert message.startswith("a 6,291,456-byte body (the configured payload padded with spaces to the cap) ")
    assert result.evidence["status"] == 200


def test_nginx_without_tcp_nodelay_warns_keepalive(
    run_one: RunOne, stack_twin_image: StackTwin, debian_stacks_image: str
) -> None:
    result = run_one(
        "invocations.keepalive", stack_twin_image("invocations.keepalive.nginx", debian_stacks_image)
    )
    message = _outcome(result, Outcome.PASSED)  # a warning, not a failure: SageMaker serves it, slower
    assert message.startswith("kept-alive connections stall: median ")
    (text,) = result.warnings
    assert f"ms slower than on new connections in {ROUNDS} rounds of {PAIRS}" in text
    assert "each answer waits for a delayed ACK" in text
    assert "Fix: Send each response in one write, or set TCP_NODELAY" in text
    assert "nginx in front: keep `tcp_nodelay on;`" in " ".join(text.split())
    for r in result.evidence["rounds"]:
        assert sorted(r["kept_alive_ms"])[PAIRS // 2] > 30  # the ~40 ms delayed ACK, every round


def test_nginx_defaults_pass_keepalive_without_warning(run_one: RunOne, debian_stacks_image: str) -> None:
    result = run_one(
        "invocations.keepalive", debian_stacks_image
    )  # tcp_nodelay on for kept-alive connections
    message = _outcome(result, Outcome.PASSED)
    assert message.startswith("no keep-alive stall: median ")
    assert result.warnings == ()
