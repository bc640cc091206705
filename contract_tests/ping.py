"""One GET /ping as SageMaker's health check makes it (hosting contract §3.4): only an HTTP response
is an answer (docker-proxy accepts on a published port before anything listens), each attempt bounded
by the client's timeout (2 s). Shared by the contract tester's startup record (target.py) and
SageMakerContainer's wait strategy (container_wait.py), so both see and word a ping the same way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx


@dataclass(frozen=True)
class PingAttempt:
    """One GET /ping and what it showed (the contract tester's start.* evidence uses it too)."""

    #: the HTTP status, None when no HTTP response came (refused, reset, timed out)
    status: int | None
    took_s: float
    observation: str
    body: bytes = b""
    timed_out: bool = False


def ping_once(client: httpx.Client, url: str, timeout_s: float) -> PingAttempt:
    """GET url with the client (whose timeout is timeout_s): only an HTTP response is an answer."""
    sent = time.monotonic()
    try:
        response = client.get(url)
    except httpx.TimeoutException:
        took = time.monotonic() - sent
        return PingAttempt(None, took, f"/ping did not answer within {timeout_s:g} s", timed_out=True)
    except httpx.HTTPError as exc:  # refused or reset: nothing listens yet (docker-proxy accepted)
        return PingAttempt(None, time.monotonic() - sent, f"/ping failed: {type(exc).__name__}: {exc}")
    took = time.monotonic() - sent
    observation = f"/ping answered HTTP {response.status_code} in {took * 1000:.0f} ms"
    return PingAttempt(response.status_code, took, observation, response.content)
