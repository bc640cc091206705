"""Invocations waiting for an endpoint restored after a restart (emulator/hosting/endpoints/restoring.py)."""

from __future__ import annotations

import asyncio
from typing import cast

from emulator.hosting.endpoints.restoring import StatusSignals, serving_fleet
from emulator.hosting.fleet.variants import EndpointFleet
from emulator.model.resources import EndpointStatus


async def test_a_waiting_request_gets_the_fleet_once_the_endpoint_serves() -> None:
    fleets: dict[str, EndpointFleet] = {}
    signals, statuses = StatusSignals(), {"e": EndpointStatus.SYSTEM_UPDATING}
    fleet = cast(EndpointFleet, object())  # only its identity matters here
    waiting = asyncio.create_task(serving_fleet("e", fleets.get, statuses.get, signals, 30.0))
    await asyncio.sleep(0)
    assert not waiting.done()
    fleets["e"], statuses["e"] = fleet, EndpointStatus.IN_SERVICE
    signals.notify("e")
    assert await asyncio.wait_for(waiting, 5) is fleet


async def test_the_wait_ends_at_once_when_the_endpoint_is_deleted_or_fails() -> None:
    signals, statuses = StatusSignals(), {"e": EndpointStatus.SYSTEM_UPDATING}
    waiting = asyncio.create_task(serving_fleet("e", {}.get, statuses.get, signals, 30.0))
    await asyncio.sleep(0)
    statuses["e"] = EndpointStatus.DELETING
    signals.notify("e")
    assert await asyncio.wait_for(waiting, 5) is None


async def test_the_wait_is_bounded_by_the_window_and_only_for_system_updating() -> None:
    signals = StatusSignals()
    restoring = {"e": EndpointStatus.SYSTEM_UPDATING}
    assert await asyncio.wait_for(serving_fleet("e", {}.get, restoring.get, signals, 0.05), 5) is None
    creating = {"e": EndpointStatus.CREATING}
    assert await asyncio.wait_for(serving_fleet("e", {}.get, creating.get, signals, 30.0), 1) is None
    assert await asyncio.wait_for(serving_fleet("e", {}.get, {}.get, signals, 30.0), 1) is None
