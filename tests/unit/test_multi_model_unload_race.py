"""A multi-model load of a model whose unload is still under way waits for the unload to end.

Before, the load's POST could reach the container while the DELETE was still being handled: the
container answered 409 (still loaded), smlocal counted the model loaded, and the DELETE then
unloaded it, so the next invocation got the container's 404 "model ... is not loaded" as a 424
(the lifecycle suite: 1 of 324 calls while scaling a multi-model endpoint). A real HTTP container
on 127.0.0.1 (aiohttp) whose DELETE takes 0.3 s; ContainerModels as smlocal drives it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from emulator.hosting.fleet.invoker import FaultContext
from emulator.hosting.multi_model.cache import InstanceModels
from emulator.hosting.multi_model.container import ContainerModels
from emulator.model.arns import Account


class _Container:
    """The MME container API's load and unload, with a slow DELETE; what it holds."""

    def __init__(self) -> None:
        self.loaded: set[str] = set()

    async def load(self, request: web.Request) -> web.Response:
        name = (await request.json())["model_name"]
        if name in self.loaded:
            return web.json_response({"message": "already loaded"}, status=409)
        self.loaded.add(name)
        return web.json_response({"status": "loaded"})

    async def unload(self, request: web.Request) -> web.Response:
        await asyncio.sleep(0.3)
        self.loaded.discard(request.match_info["name"])
        return web.json_response({"status": "unloaded"})


class _Instance:
    instance_id = "i-1"

    def __init__(self, port: int) -> None:
        self.base_url = f"http://127.0.0.1:{port}"


@pytest.fixture
async def container() -> AsyncIterator[tuple[_Container, int]]:
    fake = _Container()
    app = web.Application()
    app.router.add_post("/models", fake.load)
    app.router.add_delete("/models/{name}", fake.unload)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield fake, int(runner.addresses[0][1])
    finally:
        await runner.cleanup()


async def test_a_load_waits_for_the_same_models_unload(
    tmp_path: Path, container: tuple[_Container, int]
) -> None:
    fake, port = container
    instance: Any = _Instance(port)
    models = InstanceModels("ep", "v", tmp_path, memory_budget=100, disk_budget=100)
    model = models.get("a.tar.gz")
    context = FaultContext(Account("us-east-1", "123456789012"), "ep")
    async with aiohttp.ClientSession() as session:
        api = ContainerModels(5.0, lambda: session, lambda *_: None)
        await api.load(instance, models, model, context)
        assert model.loaded and fake.loaded == {model.name}
        unloading = asyncio.create_task(api.unload(instance, models, model))
        await asyncio.sleep(0.05)  # the DELETE is with the container
        await api.load(instance, models, model, context)  # a call for it came meanwhile
        await unloading
    assert model.loaded
    assert fake.loaded == {model.name}, "smlocal counts the model loaded; the container must hold it"
