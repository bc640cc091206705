"""A started container of the image under test: its URL, clients, logs and state, the wait for its first
200 from /ping (the evidence the start.* checks judge), and SIGTERM."""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx

from contract_tests.check_config import CheckConfig
from contract_tests.http_client import container_client
from contract_tests.ping import ping_once
from emulator.runtime.base import ContainerHandle, ContainerRuntime, ContainerState

#: ContainerState.status of a container the engine does not know (any more).
REMOVED_STATUS = "removed"
#: ... and of one it is removing (or failed to remove): never this run's doing before close().
GONE_STATUSES = frozenset({REMOVED_STATUS, "removing", "dead"})


@dataclass(frozen=True)
class Startup:
    """What happened while a container started: the evidence the start.* checks judge."""

    healthy: bool
    exited: bool
    exit_code: int | None
    elapsed_s: float
    #: seconds from start to the first HTTP response of any status on /ping (None: never)
    first_response_s: float | None
    #: seconds from start to the first 200 (None: never)
    first_healthy_s: float | None
    attempts: int
    last_observation: str
    #: the slowest /ping answer seen, in seconds
    slowest_ping_s: float
    ping_body: bytes
    #: the last log lines, for messages
    logs: str
    #: the whole log, for searching
    all_logs: str = ""
    #: why Docker could not start the container at all (then nothing else here was observed)
    start_error: str | None = None


class RunningContainer:
    def __init__(self, runtime: ContainerRuntime, handle: ContainerHandle, config: CheckConfig) -> None:
        self.runtime = runtime
        self.handle = handle
        self.config = config
        self.started_at = time.monotonic()
        #: seconds the engine's create and start took (the starter sets it)
        self.start_s = 0.0

    @property
    def base_url(self) -> str:
        return self.handle.base_url

    def url_of(self, container_port: int) -> str:
        """The loopback URL of a container port published at start (see Target.start's extra_ports)."""
        return f"http://127.0.0.1:{self.handle.published_ports[container_port]}"

    def client(self, timeout_s: float | None = None) -> httpx.Client:
        """A fresh HTTP client (own connections) for this container."""
        return container_client(
            base_url=self.base_url, timeout=timeout_s or self.config.limits.invocation_timeout_s
        )

    def logs(self, tail: int | None = None) -> str:
        return self.runtime.logs(self.handle.id, tail=tail)

    def state(self) -> ContainerState:
        return self.runtime.state(self.handle.id)

    def log_tail(self, lines: int = 15) -> str:
        return self.logs(tail=lines).rstrip()

    def wait_startup(self, deadline_s: float | None = None) -> Startup:
        """Poll GET /ping (2 s per attempt) until HTTP 200, the container exits, or the deadline."""
        limits = self.config.limits
        deadline = self.started_at + (deadline_s if deadline_s is not None else limits.startup_timeout_s)
        attempts, first_response, first_healthy, slowest = 0, None, None, 0.0
        observation, body = "no /ping attempt yet", b""
        exited, exit_code = False, None
        with container_client(timeout=limits.ping_timeout_s) as client:
            while True:
                state = self.state()
                if not state.running:
                    exited, exit_code = True, state.exit_code
                    observation = f"the container exited with code {state.exit_code}"
                    break
                now = time.monotonic()
                if now >= deadline:
                    break
                attempts += 1
                attempt = ping_once(client, f"{self.base_url}/ping", limits.ping_timeout_s)
                answered = time.monotonic() - self.started_at
                observation = attempt.observation
                if attempt.status is not None or attempt.timed_out:
                    slowest = max(slowest, attempt.took_s)
                if attempt.status is not None:
                    if first_response is None:
                        first_response = answered
                    if attempt.status == 200:
                        first_healthy, body = answered, attempt.body
                        break
                time.sleep(self.config.poll_interval_s)
        return Startup(
            healthy=first_healthy is not None,
            exited=exited,
            exit_code=exit_code,
            elapsed_s=time.monotonic() - self.started_at,
            first_response_s=first_response,
            first_healthy_s=first_healthy,
            attempts=attempts,
            last_observation=observation,
            slowest_ping_s=slowest,
            ping_body=body,
            logs=self.log_tail(),
            all_logs=self.logs(),
        )

    def terminate(self, grace_s: float | None = None) -> tuple[int | None, float]:
        """SIGTERM; returns (exit code or None if still running after the grace period, seconds taken)."""
        grace = self.config.limits.stop_grace_s if grace_s is None else grace_s
        sent = time.monotonic()
        self.runtime.signal(self.handle.id, "SIGTERM")
        code = self.runtime.wait_exit(self.handle.id, grace)
        return code, time.monotonic() - sent
