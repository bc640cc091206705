"""Instance health while an endpoint is InService: an exited container or a failed /ping.

The checks are pure helpers; HostingService owns the watching task and the replacements.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import aiohttp

from emulator.hosting.fleet import Instance

# How often an InService endpoint's instances are pinged: ServerConfig.health_check_interval_s
# (SageMaker's interval is unpublished [U]); an exited container is noticed at once, independently.

_in_flight: set[asyncio.Task[bool]] = set()


async def ping(session: aiohttp.ClientSession, base_url: str, timeout_s: float) -> bool:
    """One GET /ping attempt: healthy only on HTTP 200 within the contract's attempt timeout (a
    redirect is not followed, so a 3xx is unhealthy).

    A caller's cancellation (an update or deletion stops the watching) does not cut the attempt
    short: aiohttp can drop a half-open socket unclosed when cancelled mid-connect. The attempt is
    bounded by timeout_s, and closing the session ends it anyway."""
    attempt = asyncio.ensure_future(_ping(session, base_url, timeout_s))
    _in_flight.add(attempt)
    attempt.add_done_callback(_in_flight.discard)
    return await asyncio.shield(attempt)


async def _ping(session: aiohttp.ClientSession, base_url: str, timeout_s: float) -> bool:
    try:
        async with session.get(
            f"{base_url}/ping", timeout=aiohttp.ClientTimeout(total=timeout_s), allow_redirects=False
        ) as resp:
            await resp.read()
            return resp.status == 200
    except (aiohttp.ClientError, TimeoutError):
        return False


async def first_exit(instances: Sequence[Instance], timeout_s: float) -> None:
    """Return when any of the instances has exited, or after timeout_s."""
    if any(i.exited.is_set() for i in instances):
        return
    waiters = [asyncio.ensure_future(i.exited.wait()) for i in instances]
    try:
        await asyncio.wait(waiters, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


async def unhealthy(
    session: aiohttp.ClientSession, instances: Sequence[Instance], timeout_s: float, do_ping: bool
) -> list[Instance]:
    """The instances that exited, plus (when do_ping) those whose /ping failed."""
    dead = [i for i in instances if i.exited.is_set()]
    if do_ping:
        alive = [i for i in instances if not i.exited.is_set()]
        results = await asyncio.gather(*(ping(session, i.base_url, timeout_s) for i in alive))
        dead.extend(i for i, ok in zip(alive, results, strict=True) if not ok)
    return dead
