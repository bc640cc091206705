"""What the start.* checks share in one run (contract_tests/checks/startup.py): the one container start
they all judge, Docker's reason when it could not start at all, the follow-up pings to the healthy
container, and the wording of what was seen (times, counts, evidence).
"""

from __future__ import annotations

import re
import time
import weakref
from dataclasses import dataclass

import httpx

from contract_tests.http_client import container_client
from contract_tests.result import CheckSkipped
from contract_tests.running import Startup
from contract_tests.target import CheckContext, Target

#: Pings sent to the healthy container after its first 200 (steady state: status, time, body).
FOLLOW_UP_PINGS = 5


@dataclass(frozen=True)
class Ping:
    """One follow-up GET /ping: status None when no HTTP answer came (error says why)."""

    status: int | None
    elapsed_s: float
    body: bytes = b""
    error: str | None = None
    timed_out: bool = False


@dataclass
class GroupRun:
    start_error: str | None = None
    follow_ups: list[Ping] | None = None


#: Per-run state of this group (a failed `docker run`, the follow-up pings), keyed by the run's Target.
_RUNS: weakref.WeakKeyDictionary[Target, GroupRun] = weakref.WeakKeyDictionary()


def run_of(ctx: CheckContext) -> GroupRun:
    run = _RUNS.get(ctx.target)
    if run is None:
        run = _RUNS[ctx.target] = GroupRun()
    return run


def startup_of(ctx: CheckContext) -> Startup:
    """The shared startup record; CheckSkipped when Docker could not start the container at all
    (start.no-exit reports that, once: the failed start is remembered, not retried)."""
    run = run_of(ctx)
    if run.start_error is None:
        startup = ctx.target.startup()
        if startup.start_error is None:
            return startup
        run.start_error = docker_reason(startup.start_error)
    raise CheckSkipped("Docker could not start the container; see start.no-exit")


def docker_reason(error: str) -> str:
    """The engine's own explanation from an EngineError text (`... Bad Request ("why")`), else all of it."""
    found = re.search(r'\("(.+)"\)\s*$', error, re.DOTALL) or re.match(
        r"Docker could not start \S+: (.+)$", error, re.DOTALL
    )
    return found.group(1) if found else error


def follow_ups(ctx: CheckContext) -> list[Ping]:
    """FOLLOW_UP_PINGS more pings to the shared healthy container, each on a new connection with the
    ping timeout (as SageMaker's health checker would); sent once per run. CheckSkipped when unhealthy."""
    run = run_of(ctx)
    if run.follow_ups is None:
        container = ctx.target.healthy()
        timeout = ctx.config.limits.ping_timeout_s
        pings = []
        fresh = httpx.Limits(max_keepalive_connections=0)  # a new connection per ping
        with container_client(base_url=container.base_url, timeout=timeout, limits=fresh) as client:
            for _ in range(FOLLOW_UP_PINGS):
                sent = time.monotonic()
                try:
                    response = client.get("/ping")
                    pings.append(Ping(response.status_code, time.monotonic() - sent, response.content))
                except httpx.TimeoutException:
                    took = time.monotonic() - sent
                    pings.append(Ping(None, took, error=f"no answer within {timeout:g} s", timed_out=True))
                except httpx.HTTPError as exc:
                    pings.append(Ping(None, time.monotonic() - sent, error=f"{type(exc).__name__}: {exc}"))
        run.follow_ups = pings
    return run.follow_ups


def dur(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def last_seen(startup: Startup) -> str:
    return startup.last_observation.rstrip(".")


def port_of(ctx: CheckContext) -> str:
    bind = ctx.config.environment.get("SAGEMAKER_BIND_TO_PORT")
    port = ctx.config.container_port
    return f"port {port} (SAGEMAKER_BIND_TO_PORT={bind})" if bind else f"port {port}"


def ping_evidence(pings: list[Ping]) -> list[dict[str, object]]:
    return [
        {"status": p.status, "elapsed_s": round(p.elapsed_s, 3), "body_bytes": len(p.body), "error": p.error}
        for p in pings
    ]


def describe_ping(p: Ping) -> str:
    return f"HTTP {p.status} in {dur(p.elapsed_s)}" if p.status is not None else f"{p.error}"


def startup_evidence(startup: Startup) -> dict[str, object]:
    return {
        "healthy": startup.healthy,
        "exited": startup.exited,
        "exit_code": startup.exit_code,
        "elapsed_s": round(startup.elapsed_s, 3),
        "first_response_s": None if startup.first_response_s is None else round(startup.first_response_s, 3),
        "first_healthy_s": None if startup.first_healthy_s is None else round(startup.first_healthy_s, 3),
        "attempts": startup.attempts,
        "last_observation": startup.last_observation,
        "slowest_ping_s": round(startup.slowest_ping_s, 3),
    }
