"""The echo test image, built and run on a real engine the way SageMaker runs a model container
(contract_tests.containers.SageMakerContainer)."""

from __future__ import annotations

import http.client
import time
from typing import Any

import pytest
from docker.models.containers import Container

from contract_tests.container_wait import ContainerExited
from contract_tests.containers import SageMakerContainer
from tests.fixtures.sagemaker_container import no_reaper  # noqa: F401

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("no_reaper")]

READY_BUDGET_S = 30.0


def request(port: int, method: str, path: str, body: bytes | None = None, **headers: str) -> Any:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.read(), dict(response.getheaders())
    finally:
        conn.close()


def exit_code(container: Container, timeout_s: float = 20) -> int:
    return int(container.wait(timeout=timeout_s)["StatusCode"])


def test_ping_and_echo_round_trip(echo_image: str) -> None:
    with SageMakerContainer(echo_image, startup_timeout_s=READY_BUDGET_S) as model:
        port = model.host_port
        status, body, _ = request(port, "GET", "/ping")
        assert (status, body) == (200, b"")

        payload = bytes(range(256)) * 10
        status, body, headers = request(
            port, "POST", "/invocations", payload, **{"Content-Type": "application/x-test"}
        )
        assert (status, body, headers["Content-Type"]) == (200, payload, "application/x-test")

        status, body, headers = request(
            port,
            "POST",
            "/invocations",
            b"{}",
            **{"X-Amzn-SageMaker-Custom-Attributes": "status=418,reply-attrs=seen"},
        )
        assert (status, body) == (418, b"error body 418")
        assert headers["X-Amzn-SageMaker-Custom-Attributes"] == "seen"
        assert request(port, "GET", "/nothing-here")[0] == 404
        assert "echo: listening on 8080" in model.logs()


def test_exit_at_start_exits_with_the_code(echo_image: str) -> None:
    with pytest.raises(ContainerExited) as raised:
        SageMakerContainer(echo_image, environment={"EXIT_AT_START": "7"}).start()
    assert raised.value.exit_code == 7
    assert "echo: exiting at start with 7" in raised.value.logs


def test_without_serve_it_exits_2(echo_image: str) -> None:
    with pytest.raises(ContainerExited) as raised:
        SageMakerContainer(echo_image).with_command("train").start()
    assert raised.value.exit_code == 2


def test_sigterm_exits_0_promptly(echo_image: str) -> None:
    model = SageMakerContainer(echo_image, startup_timeout_s=READY_BUDGET_S).start()
    started = time.monotonic()
    model.stop()  # SIGTERM, then the 30 s grace before any SIGKILL
    assert model.final_state is not None and model.final_state.exit_code == 0
    assert time.monotonic() - started < 3.0
    assert "echo: SIGTERM" in model.final_logs
