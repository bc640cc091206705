"""emulator.hosting.fleet.variants and .health: live weight changes, rotation edits, summaries, health checks."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime

import aiohttp
from aiohttp import web

from emulator.hosting.endpoints import health
from emulator.hosting.fleet.variants import EndpointFleet, Instance, VariantFleet
from emulator.model.resources import DeployedImage, ProductionVariant
from emulator.model.routing import InstancePicker
from emulator.runtime.base import ContainerHandle


def instance(name: str, port: int = 1) -> Instance:
    return Instance(name, "v", ContainerHandle(name, name, port, {}))


def variant(name: str, weight: float, count: int = 1) -> VariantFleet:
    return VariantFleet(
        variant=ProductionVariant(name, "m", initial_instance_count=count, initial_variant_weight=weight),
        instances=[instance(f"{name}{i}") for i in range(count)],
        deployed_image=DeployedImage("img", "img@sha256:x", datetime.now(UTC)),
        weight=weight,
        picker=InstancePicker(),
    )


def test_set_weights_rebuilds_the_choice() -> None:
    fleet = EndpointFleet([variant("A", 1.0), variant("B", 1.0)])
    fleet.set_weights({"A": 0.0})
    assert Counter(fleet.choose(None).variant.variant_name for _ in range(500)) == {"B": 500}
    assert fleet.choose("A") is fleet.variants["A"]  # weight 0: reachable by TargetVariant only
    fleet.set_weights({"A": 3.0, "B": 1.0})
    got = Counter(fleet.choose(None).variant.variant_name for _ in range(4000))
    assert abs(got["A"] / 4000 - 0.75) < 0.04


def test_rotation_edits_replace_the_list() -> None:
    v = variant("A", 1.0, count=2)
    first = v.instances
    extra = instance("A2")
    v.add([extra])
    assert v.instances is not first and len(first) == 2  # a request holding the old list is unaffected
    v.remove([first[0]])
    assert v.instances == [first[1], extra]


def test_summary_desired_then_current() -> None:
    v = variant("A", 1.0)
    assert (v.summary().desired_weight, v.summary().desired_instance_count) == (1.0, 1)
    v.desired_weight, v.desired_count = 2.0, 3
    s = v.summary()
    assert (s.current_weight, s.desired_weight, s.current_instance_count, s.desired_instance_count) == (
        1.0,
        2.0,
        1,
        3,
    )


def test_health_checks() -> None:
    async def scenario() -> None:
        app = web.Application()

        async def pong(_: web.Request) -> web.Response:
            return web.Response(text="")

        app.router.add_get("/ping", pong)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        good, gone, dead = instance("good", port), instance("gone", 1), instance("dead", port)
        dead.exited.set()
        async with aiohttp.ClientSession() as session:
            assert await health.ping(session, good.base_url, 2.0)
            assert not await health.ping(session, gone.base_url, 2.0)
            assert await health.unhealthy(session, [good, gone, dead], 2.0, do_ping=False) == [dead]
            assert await health.unhealthy(session, [good, gone, dead], 2.0, do_ping=True) == [dead, gone]
        loop = asyncio.get_running_loop()
        started = loop.time()
        asyncio.get_running_loop().call_later(0.05, good.exited.set)
        await health.first_exit([good, gone], 10.0)
        assert loop.time() - started < 5.0
        await runner.cleanup()

    asyncio.run(scenario())
