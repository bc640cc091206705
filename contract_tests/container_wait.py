"""A testcontainers wait strategy that follows SageMaker's health check (hosting contract §3.4).

Ready means HTTP 200 from `GET /ping` within the startup limit (ContractLimits.startup_timeout_s,
SageMaker's 8 minutes unless lowered), each ping given 2 s (ping_timeout_s). A TCP accept is not
ready: docker-proxy accepts on a published port before anything listens in the container, so only an
HTTP response counts. A container that exits first fails at once. Either failure is an error whose
message says what was seen last and ends with the container's last log lines (and the exit code):

    DeploymentFailed (emulator.errors)
    └── ContainerStartupFailed      never healthy: .exit_code, .logs, .last_observation, .elapsed_s
        ├── ContainerExited         it exited before /ping answered 200
        └── HealthCheckTimeout      no 200 within the startup limit (also a TimeoutError, as
                                    testcontainers' own strategies raise)

PingWaitStrategy plugs into testcontainers' `WaitStrategy`, so it also serves a plain DockerContainer:
`DockerContainer(image).with_command("serve").waiting_for(PingWaitStrategy())`.
"""

from __future__ import annotations

import time
from typing import Any, Self

from testcontainers.core.waiting_utils import WaitStrategy, WaitStrategyTarget

from contract_tests.http_client import container_client
from contract_tests.ping import ping_once
from emulator.config import ContractLimits
from emulator.errors import DeploymentFailed

#: How many of the container's last log lines a startup error carries.
LOG_LINES = 40
#: Pause between two pings (the contract tester polls as often).
POLL_INTERVAL_S = 0.05


class ContainerStartupFailed(DeploymentFailed):
    """The container never passed the ping health check."""

    def __init__(
        self, message: str, *, exit_code: int | None, logs: str, last_observation: str, elapsed_s: float
    ) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.logs = logs
        self.last_observation = last_observation
        self.elapsed_s = elapsed_s


class ContainerExited(ContainerStartupFailed):
    """The container exited before /ping answered 200."""


class HealthCheckTimeout(ContainerStartupFailed, TimeoutError):
    """No HTTP 200 from /ping within the startup limit."""


def published_port(attrs: dict[str, Any], container_port: int) -> int | None:
    """The host port of container_port's binding on 127.0.0.1 (None: not published, or gone)."""
    ports = (attrs.get("NetworkSettings") or {}).get("Ports") or {}
    for binding in ports.get(f"{container_port}/tcp") or []:
        if binding.get("HostIp") in ("127.0.0.1", "") and binding.get("HostPort"):
            return int(binding["HostPort"])
    return None


def log_tail(container: Any, lines: int = LOG_LINES) -> str:
    """The last lines of a docker SDK container's stdout and stderr, interleaved as written."""
    try:
        raw = container.logs(stdout=True, stderr=True, tail=lines)
    except Exception:  # noqa: BLE001 - evidence only: a removed container has no logs to add
        return ""
    return bytes(raw).decode("utf-8", errors="replace").rstrip()


class PingWaitStrategy(WaitStrategy):
    """Wait for HTTP 200 from GET /ping on the container's published `port`, as SageMaker does."""

    def __init__(self, port: int | None = None, limits: ContractLimits | None = None) -> None:
        super().__init__()
        limits = limits or ContractLimits()
        self.port = port if port is not None else limits.container_port
        self._startup_timeout = limits.startup_timeout_s
        self._poll_interval = POLL_INTERVAL_S
        self.ping_timeout_s = limits.ping_timeout_s
        self.host = "127.0.0.1"

    @property
    def startup_timeout_s(self) -> float:
        return self._startup_timeout

    def with_ping_timeout(self, seconds: float) -> Self:
        """Each /ping attempt's timeout (SageMaker's is 2 s)."""
        self.ping_timeout_s = seconds
        return self

    def wait_until_ready(self, container: WaitStrategyTarget) -> None:
        started = time.monotonic()
        deadline = started + self._startup_timeout
        observation, attempts = "no /ping attempt yet", 0
        wrapped = container.get_wrapped_container()
        with container_client(timeout=self.ping_timeout_s) as client:
            while True:
                wrapped.reload()
                state = wrapped.attrs.get("State") or {}
                if state.get("Status") in ("exited", "dead"):
                    self._exited(wrapped, state, observation, time.monotonic() - started)
                if time.monotonic() >= deadline:
                    self._timed_out(wrapped, observation, attempts, time.monotonic() - started)
                port = published_port(wrapped.attrs, self.port)
                if port is None:
                    observation = f"port {self.port} is not published on {self.host}"
                else:
                    attempts += 1
                    attempt = ping_once(client, f"http://{self.host}:{port}/ping", self.ping_timeout_s)
                    observation = attempt.observation
                    if attempt.status == 200:
                        return
                time.sleep(max(0.0, min(self._poll_interval, deadline - time.monotonic())))

    def _exited(self, wrapped: Any, state: dict[str, Any], observation: str, elapsed_s: float) -> None:
        code = state.get("ExitCode")
        oom = " (killed for memory: over its limit)" if state.get("OOMKilled") else ""
        logs = log_tail(wrapped)
        raise ContainerExited(
            f"The container {wrapped.name} exited with code {code}{oom} {elapsed_s:.1f} s after it "
            f"started, before /ping answered HTTP 200 (last seen: {observation}). "
            f"Its last log lines:\n{logs or '(no output)'}",
            exit_code=None if code is None else int(code),
            logs=logs,
            last_observation=observation,
            elapsed_s=elapsed_s,
        )

    def _timed_out(self, wrapped: Any, observation: str, attempts: int, elapsed_s: float) -> None:
        logs = log_tail(wrapped)
        raise HealthCheckTimeout(
            f"The container {wrapped.name} did not pass the ping health check: no HTTP 200 from "
            f"GET /ping within {self._startup_timeout:g} s ({attempts} attempts of "
            f"{self.ping_timeout_s:g} s each; last seen: {observation}). "
            f"Its last log lines:\n{logs or '(no output)'}",
            exit_code=None,
            logs=logs,
            last_observation=observation,
            elapsed_s=elapsed_s,
        )
