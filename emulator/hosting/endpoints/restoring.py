"""Invocations that arrive while an endpoint is being restored after `smlocal serve` restarted.

After a restart the server answers at once, but an endpoint that was serving shows SystemUpdating
until its containers are adopted (a crash: well under a second) or started again (a graceful stop
stopped them: the model's own start time). SageMaker serves an endpoint through SystemUpdating, so
a request for it waits, within its invocation window, until the endpoint serves again (or fails,
or is deleted), instead of being told at once that the endpoint does not exist. [U] After the
window, the answer is the one an endpoint without a fleet gets (ValidationError "not found").

`StatusSignals` is how the waiters learn of a change: every status change of an endpoint wakes
whoever waits on it, and they look again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from emulator.hosting.fleet.variants import EndpointFleet
from emulator.model.resources import EndpointStatus


class StatusSignals:
    """One asyncio.Event per endpoint with waiters, set (and dropped) on the endpoint's next status
    change: waiters wake, look again and wait on a fresh event. Bounded by the endpoints waited on."""

    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}

    def changed(self, name: str) -> asyncio.Event:
        return self._events.setdefault(name, asyncio.Event())

    def notify(self, name: str) -> None:
        event = self._events.pop(name, None)
        if event is not None:
            event.set()


async def serving_fleet(
    name: str,
    fleet_of: Callable[[str], EndpointFleet | None],
    status_of: Callable[[str], EndpointStatus | None],
    signals: StatusSignals,
    window_s: float,
) -> EndpointFleet | None:
    """The endpoint's fleet; while the endpoint is SystemUpdating without one (restored after a
    restart), wait up to `window_s` for it. None: no fleet (the caller answers "not found")."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + window_s
    while True:
        fleet = fleet_of(name)
        if fleet is not None or status_of(name) is not EndpointStatus.SYSTEM_UPDATING:
            return fleet
        remaining = deadline - loop.time()
        if remaining <= 0:
            return None
        try:
            await asyncio.wait_for(signals.changed(name).wait(), remaining)
        except TimeoutError:
            return fleet_of(name)
