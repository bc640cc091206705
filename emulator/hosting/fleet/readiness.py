"""Waiting for a container to become healthy: GET /ping until HTTP 200, with a budget.

A wait is an object with a deadline, a per-attempt timeout, a poll interval and evidence, so a
failure says what it saw. It also ends at once when the container exits.
"""

from __future__ import annotations

import asyncio
import enum
import time
from dataclasses import dataclass

import aiohttp


class Outcome(enum.Enum):
    HEALTHY = "healthy"
    EXITED = "exited"
    TIMED_OUT = "timed out"


#: How an observation of a /ping that got an HTTP answer starts (any status).
_ANSWERED = "/ping answered HTTP"


@dataclass(frozen=True)
class Readiness:
    outcome: Outcome
    elapsed_s: float
    attempts: int
    last_observation: str
    #: monotonic times: the wait's start, and the first HTTP answer of any status (the first TCP
    #: connect that was answered: a published port accepts TCP with nothing listening); None: none
    started: float = 0.0
    first_answer: float | None = None

    @property
    def ended(self) -> float:
        return self.started + self.elapsed_s

    @property
    def http_answered(self) -> bool:
        """Whether the last /ping that counted got an HTTP answer (of any status)."""
        return answered(self.last_observation)


def answered(observation: str | None) -> bool:
    """Whether ping_once's result is an HTTP answer: None (200) or a status."""
    return observation is None or observation.startswith(_ANSWERED)


@dataclass(frozen=True)
class PingPolicy:
    deadline_s: float
    attempt_timeout_s: float
    interval_s: float


async def ping_once(session: aiohttp.ClientSession, url: str, timeout_s: float) -> str | None:
    """None when healthy (HTTP 200), else what was observed. A redirect is not followed: a 3xx is
    not healthy (following it would let a container point smlocal at any URL the host reaches)."""
    try:
        async with session.get(
            url, timeout=aiohttp.ClientTimeout(total=timeout_s), allow_redirects=False
        ) as resp:
            await resp.read()
            return None if resp.status == 200 else f"{_ANSWERED} {resp.status}"
    except TimeoutError:
        return _no_answer(timeout_s)
    except aiohttp.ClientError as exc:
        return f"/ping failed: {type(exc).__name__}: {exc}"


_NO_ATTEMPT = "no /ping attempt yet"


def _no_answer(timeout_s: float) -> str:
    return f"/ping did not answer within {timeout_s:g} s"


def _cut_short(attempt_timeout_s: float, policy: PingPolicy) -> bool:
    return attempt_timeout_s < policy.attempt_timeout_s


async def wait_until_healthy(
    session: aiohttp.ClientSession,
    base_url: str,
    policy: PingPolicy,
    exited: asyncio.Event,
) -> Readiness:
    url = f"{base_url}/ping"
    started = time.monotonic()
    deadline = started + policy.deadline_s
    attempts = 0
    observation = _NO_ATTEMPT
    first_answer: float | None = None
    while True:
        if exited.is_set():
            elapsed = time.monotonic() - started
            return Readiness(Outcome.EXITED, elapsed, attempts, "container exited", started, first_answer)
        now = time.monotonic()
        if now >= deadline:
            return Readiness(Outcome.TIMED_OUT, now - started, attempts, observation, started, first_answer)
        attempts += 1
        attempt_timeout_s = min(policy.attempt_timeout_s, deadline - now)
        attempt = asyncio.ensure_future(ping_once(session, url, attempt_timeout_s))
        exit_wait = asyncio.ensure_future(exited.wait())
        done, _ = await asyncio.wait({attempt, exit_wait}, return_when=asyncio.FIRST_COMPLETED)
        if attempt not in done:
            attempt.cancel()
            continue  # exited: reported at the top of the loop
        exit_wait.cancel()
        result = attempt.result()
        answered_at = time.monotonic()
        if first_answer is None and answered(result):
            first_answer = answered_at
        if result is None:
            elapsed = answered_at - started
            return Readiness(Outcome.HEALTHY, elapsed, attempts, f"{_ANSWERED} 200", started, first_answer)
        if observation == _NO_ATTEMPT or not (
            _cut_short(attempt_timeout_s, policy) and result == _no_answer(attempt_timeout_s)
        ):
            # a last attempt the deadline cut short proves nothing: keep what the full ones saw
            observation = result
        remaining = deadline - time.monotonic()
        try:
            await asyncio.wait_for(exited.wait(), timeout=max(0.0, min(policy.interval_s, remaining)))
        except TimeoutError:
            pass
