"""An asynchronous request whose container refuses the connection (killed, and smlocal has not yet
seen it exit) never reached the model: it waits in the queue again and runs on another instance,
instead of getting a failure object (the lifecycle suite: 1 of 48 requests around an instance
kill). Real HTTP on 127.0.0.1 (a closed port, an aiohttp server), a fake fleet."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from emulator.hosting.async_inference.queue import AsyncRequest, RequestQueue
from emulator.hosting.async_inference.s3_stream import BytesInput
from emulator.hosting.async_inference.transfer import ContainerCaller
from emulator.hosting.async_inference.worker import AsyncEndpoint
from emulator.hosting.fleet.invoker import FaultContext
from emulator.model.arns import Account
from emulator.model.resources import AsyncInference


class _Instance:
    def __init__(self, instance_id: str, port: int) -> None:
        self.instance_id = instance_id
        self.variant_name = "AllTraffic"
        self.invocations_url = f"http://127.0.0.1:{port}/invocations"
        self.outstanding = 0


class _Fleet:
    def __init__(self, *instances: _Instance) -> None:
        self.instances = list(instances)
        self.variants = {"AllTraffic": None}

    def all_instances(self) -> list[_Instance]:
        return self.instances


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again: a connection to it is refused


@pytest.fixture
async def live_port() -> AsyncIterator[int]:
    async def invocations(request: web.Request) -> web.Response:
        return web.Response(body=await request.read(), content_type="application/json")

    app = web.Application()
    app.router.add_post("/invocations", invocations)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield int(runner.addresses[0][1])
    finally:
        await runner.cleanup()


async def test_a_refused_request_waits_again_and_runs_on_another_instance(
    tmp_path: Path, live_port: int
) -> None:
    dead, live = _Instance("dead", _closed_port()), _Instance("live", live_port)
    fleet = _Fleet(dead, live)
    written: dict[str, bytes] = {}
    lines: list[str] = []

    async def get(url: str) -> BytesInput:
        return BytesInput(b'{"id": "a"}')

    async def put(url: str, data: bytes, content_type: str | None) -> None:
        written[url] = data

    class _Output:
        """An answer written whole at its finish (S3Output's interface, in memory)."""

        def __init__(self, url: str) -> None:
            self.url, self.size, self._pieces = url, 0, bytearray()

        async def write(self, data: bytes) -> None:
            self._pieces += data
            self.size += len(data)

        async def finish(self) -> bytes | None:
            written[self.url] = bytes(self._pieces)
            return None

        async def abort(self) -> None:
            pass

    invoker = ContainerCaller(1024)
    await invoker.start()
    worker = AsyncEndpoint(
        "e", AsyncInference("s3://b/out"), RequestQueue(tmp_path / "queue.json"), lambda: fleet,  # type: ignore[arg-type,return-value]
        invoker, FaultContext(Account("us-east-1", "123456789012"), "e"), get, put, lines.append,
        open_output=lambda url, content_type: _Output(url),  # type: ignore[arg-type,return-value]
    )  # fmt: skip
    worker.queue.put(
        AsyncRequest("a", "s3://b/in", "s3://b/out/a.out", "s3://b/err/a-error.out", time.time(), 60, 900)
    )
    worker.start()
    try:
        deadline = time.monotonic() + 10
        while "s3://b/out/a.out" not in written and "s3://b/err/a-error.out" not in written:
            assert time.monotonic() < deadline, (written, lines)
            await asyncio.sleep(0.01)
    finally:
        await worker.close()
        await invoker.close()
    assert written == {"s3://b/out/a.out": b'{"id": "a"}'}, lines
    assert worker.counters.failures == 0 and worker.counters.requeued == 1
    assert any("inference a interrupted: instance dead refused the connection" in line for line in lines), (
        lines
    )
    assert len(worker.queue) == 0
