"""The echo test image, built and run on a real engine the way SageMaker runs a model container."""

from __future__ import annotations

import http.client
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import docker
import pytest
from docker.models.containers import Container

from emulator.runtime import labels

pytestmark = pytest.mark.docker

READY_BUDGET_S = 30.0


@contextmanager
def echo_container(
    client: docker.DockerClient, image: str, *, command: tuple[str, ...] = ("serve",), **env: str
) -> Iterator[tuple[Container, int]]:
    """Run the image with port 8080 published on 127.0.0.1 only; always removed afterwards."""
    container = client.containers.run(
        image,
        list(command),
        detach=True,
        environment=env,
        labels={labels.MANAGED: "true", labels.ROLE: "test"},
        ports={"8080/tcp": ("127.0.0.1", None)},
    )
    try:
        container.reload()
        bindings = container.attrs["NetworkSettings"]["Ports"].get("8080/tcp") or []
        port = int(bindings[0]["HostPort"]) if bindings else 0
        yield container, port
    finally:
        container.remove(force=True)


def request(port: int, method: str, path: str, body: bytes | None = None, **headers: str) -> Any:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.read(), dict(response.getheaders())
    finally:
        conn.close()


def wait_until_ready(container: Container, port: int) -> None:
    """Ready means an HTTP answer 200 arrived: docker-proxy accepts TCP before the server listens."""
    deadline = time.monotonic() + READY_BUDGET_S
    last: object = None
    while time.monotonic() < deadline:
        try:
            status, _, _ = request(port, "GET", "/ping")
            if status == 200:
                return
            last = status
        except (OSError, http.client.HTTPException) as exc:
            last = exc
        time.sleep(0.05)
    logs = container.logs(tail=20).decode(errors="replace")
    raise AssertionError(f"/ping not 200 within {READY_BUDGET_S} s (last: {last!r}); logs:\n{logs}")


def exit_code(container: Container, timeout_s: float = 20) -> int:
    return int(container.wait(timeout=timeout_s)["StatusCode"])


def test_ping_and_echo_round_trip(docker_engine: docker.DockerClient, echo_image: str) -> None:
    with echo_container(docker_engine, echo_image) as (container, port):
        wait_until_ready(container, port)
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
        assert b"echo: listening on 8080" in container.logs()


def test_exit_at_start_exits_with_the_code(docker_engine: docker.DockerClient, echo_image: str) -> None:
    with echo_container(docker_engine, echo_image, EXIT_AT_START="7") as (container, _):
        assert exit_code(container) == 7
        assert b"echo: exiting at start with 7" in container.logs()


def test_without_serve_it_exits_2(docker_engine: docker.DockerClient, echo_image: str) -> None:
    with echo_container(docker_engine, echo_image, command=("train",)) as (container, _):
        assert exit_code(container) == 2


def test_sigterm_exits_0_promptly(docker_engine: docker.DockerClient, echo_image: str) -> None:
    with echo_container(docker_engine, echo_image) as (container, port):
        wait_until_ready(container, port)
        started = time.monotonic()
        container.kill(signal="SIGTERM")
        assert exit_code(container, timeout_s=10) == 0
        assert time.monotonic() - started < 3.0
        assert b"echo: SIGTERM" in container.logs()
