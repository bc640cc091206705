"""hosting/serverless/capacity.py's bookkeeping with a fake deployer (no engine): one cold start
shared by the requests that wait for it, the throttle, the idle stop and what close leaves behind.
The real containers are tests/integration/test_serverless.py's."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import pytest

from emulator.config import ServerConfig
from emulator.errors import DeploymentFailed, ModelFault, Throttled
from emulator.hosting.fleet.deployer import Deployer
from emulator.hosting.fleet.invoker import FaultContext
from emulator.hosting.fleet.variants import Instance, VariantFleet
from emulator.hosting.serverless.capacity import ServerlessHost
from emulator.model.arns import Account
from emulator.model.resources import DeployedImage, ProductionVariant, ServerlessConfig
from emulator.model.routing import InstancePicker
from emulator.runtime.base import ContainerHandle

CONTEXT = FaultContext(Account("us-east-1", "123456789012"), "ep")


class FakeDeployer:
    def __init__(self, fail: bool = False) -> None:
        self.started: list[Instance] = []
        self.stopped: list[Instance] = []
        self.release = asyncio.Event()
        self.fail = fail
        self.lines: list[str] = []

    async def start_instance(self, plan: Any) -> Instance:
        instance = Instance(f"i-{len(self.started)}", "v", ContainerHandle("c", "c", 1, {}))
        self.started.append(instance)
        return instance

    async def wait_healthy(self, plan: Any, instance: Instance) -> None:
        await self.release.wait()
        if self.fail:
            raise DeploymentFailed("no ping")

    async def stop_instances(self, instances: list[Instance]) -> None:
        self.stopped.extend(instances)

    def platform_log(self, endpoint: str, line: str) -> None:
        self.lines.append(line)


def variant(max_concurrency: int = 2) -> VariantFleet:
    pv = ProductionVariant("v", "m", 0, serverless=ServerlessConfig(1024, max_concurrency))
    image = DeployedImage("echo", "echo", cast(Any, None))
    return VariantFleet(pv, [], image, 1.0, InstancePicker("RANDOM"), plan=cast(Any, object()))


def host(tmp_path: Path, deployer: FakeDeployer, idle_s: float = 300.0) -> ServerlessHost:
    config = ServerConfig(state_dir=tmp_path, serverless_idle_s=idle_s, time_scale=100.0)
    return ServerlessHost(config, cast(Deployer, deployer))


async def call(h: ServerlessHost, v: VariantFleet, done: asyncio.Event | None = None) -> None:
    async with h.admitted("ep", v, CONTEXT, lambda: True):
        if done is not None:
            await done.wait()


async def test_waiting_requests_share_one_cold_start_and_the_next_one_is_throttled(tmp_path: Path) -> None:
    deployer = FakeDeployer()
    h, v = host(tmp_path, deployer), variant(max_concurrency=2)
    done = asyncio.Event()
    calls = [asyncio.ensure_future(call(h, v, done)) for _ in range(2)]
    await asyncio.sleep(0)
    with pytest.raises(Throttled):
        await call(h, v)
    deployer.release.set()
    done.set()
    await asyncio.gather(*calls)
    assert len(deployer.started) == 1 and v.instances == deployer.started
    assert h.capacity(v).in_flight == 0
    assert h.capacity(v).last_cold_start is not None


async def test_the_idle_stop_follows_the_last_request_after_the_scaled_idle_time(tmp_path: Path) -> None:
    deployer = FakeDeployer()
    deployer.release.set()
    h, v = host(tmp_path, deployer, idle_s=5.0), variant()  # 5 policy s at time scale 100: 50 ms
    await call(h, v)
    assert v.instances and not deployer.stopped
    for _ in range(100):
        if deployer.stopped:
            break
        await asyncio.sleep(0.01)
    assert deployer.stopped == deployer.started and v.instances == []
    await h.close()


async def test_a_failed_cold_start_fails_every_waiting_request_and_stops_its_container(
    tmp_path: Path,
) -> None:
    deployer = FakeDeployer(fail=True)
    h, v = host(tmp_path, deployer), variant()
    calls = [asyncio.ensure_future(call(h, v)) for _ in range(2)]
    await asyncio.sleep(0)
    deployer.release.set()
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(r, ModelFault) for r in results)
    assert "could not start its model container: no ping" in str(results[0])
    assert deployer.stopped == deployer.started and v.instances == []


async def test_close_during_a_cold_start_stops_what_it_started(tmp_path: Path) -> None:
    deployer = FakeDeployer()
    h, v = host(tmp_path, deployer), variant()
    waiting = asyncio.ensure_future(call(h, v))
    while not deployer.started:
        await asyncio.sleep(0)
    await h.close()
    assert deployer.stopped == deployer.started and v.instances == []
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
