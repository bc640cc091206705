"""fleet/stream.py's limits and wire/runtime_stream.py's relay against small aiohttp servers on
127.0.0.1 (the integration tests cover the same path with real containers; these cover the total
limit and smlocal's own failure mid-stream, which no container can cause)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from botocore.eventstream import EventStreamBuffer
from multidict import CIMultiDict
from yarl import URL

from emulator.errors import ModelTimeout, StreamTimeExceeded
from emulator.hosting.endpoints.invoke import StreamInvocation
from emulator.hosting.fleet.invoker import FaultContext, Invoker
from emulator.hosting.fleet.stream import StreamLimits, open_stream
from emulator.model.arns import Account
from emulator.wire import runtime_stream

CONTEXT = FaultContext(Account("us-east-1", "123456789012"), "ep")


async def endless(request: web.Request) -> web.StreamResponse:
    """A container that writes a chunk every 50 ms until its client leaves."""
    resp = web.StreamResponse()
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    seq = 0
    try:
        while True:
            await resp.write(f"part {seq}\n".encode())
            seq += 1
            await asyncio.sleep(0.05)
    except ConnectionResetError:  # its client left: what the tests make it see
        return resp


async def late(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse()
    await resp.prepare(request)  # headers at once, the body's first byte never
    await asyncio.sleep(30)
    return resp


@asynccontextmanager
async def serve(app: web.Application) -> AsyncIterator[str]:
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


@asynccontextmanager
async def container() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/endless", endless)
    app.router.add_post("/late", late)
    async with serve(app) as url:
        yield url


@pytest.fixture
async def invoker() -> AsyncIterator[Invoker]:
    inv = Invoker(max_response_bytes=1024, timeout_s=5.0)
    await inv.start()
    yield inv
    await inv.close()


async def test_the_total_limit_ends_a_stream_that_never_stops(invoker: Invoker) -> None:
    limits = StreamLimits(first_byte_s=1.0, idle_s=1.0, total_s=0.6)
    async with container() as url:
        stream = await open_stream(invoker, URL(f"{url}/endless"), b"", CIMultiDict(), CONTEXT, limits)
        started = time.perf_counter()
        pieces = []
        with pytest.raises(StreamTimeExceeded) as caught:
            async for piece in stream.parts():
                pieces.append(piece)
        stream.close()
    assert str(caught.value) == (
        "Your model primary did not complete sending the inference response in the allotted time."
    )
    assert caught.value.error_code == "ModelInvocationTimeExceeded"
    assert 0.4 < time.perf_counter() - started < 1.0
    assert len(pieces) >= 5 and b"".join(pieces).startswith(b"part 0\npart 1\n")


async def test_headers_without_a_first_byte_are_the_invoke_timeout(invoker: Invoker) -> None:
    limits = StreamLimits(first_byte_s=0.3, idle_s=5.0, total_s=5.0)
    async with container() as url:
        with pytest.raises(ModelTimeout) as caught:
            await open_stream(invoker, URL(f"{url}/late"), b"", CIMultiDict(), CONTEXT, limits)
    assert caught.value.original_message.startswith("Your invocation timed out while waiting for a response")
    assert 0.3 <= caught.value.model_latency_s < 1.0


@dataclass
class _Counted:
    """What StreamInvocation needs of an instance: its count of outstanding requests."""

    outstanding: int = 1


async def test_smlocal_failing_mid_stream_sends_internal_stream_failure(
    invoker: Invoker, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = runtime_stream.eventstream.payload_parts
    calls = {"n": 0}

    def failing_second(data: bytes) -> bytes:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("an encoder bug")
        return real(data)

    monkeypatch.setattr(runtime_stream.eventstream, "payload_parts", failing_second)
    instance: Any = _Counted()
    limits = StreamLimits(first_byte_s=1.0, idle_s=1.0, total_s=5.0)
    async with container() as url:

        async def relay(request: web.Request) -> web.StreamResponse:
            stream = await open_stream(invoker, URL(f"{url}/endless"), b"", CIMultiDict(), CONTEXT, limits)
            opened = StreamInvocation(stream, "AllTraffic", instance)
            return await runtime_stream._relay(request, opened, None, time.perf_counter(), "rid")

        app = web.Application()
        app.router.add_post("/endpoints/{name}/stream", relay)
        async with serve(app) as front, aiohttp.ClientSession() as client:
            async with client.post(f"{front}/endpoints/ep/stream") as resp:
                assert resp.status == 200
                data = await resp.read()
    buffer = EventStreamBuffer()
    buffer.add_data(data)
    first, failure = list(buffer)
    assert first.headers[":event-type"] == "PayloadPart" and first.payload == b"part 0\n"
    assert failure.headers[":exception-type"] == "InternalStreamFailure"
    assert json.loads(failure.payload) == {
        "Message": "smlocal failed while streaming the response: RuntimeError: an encoder bug. Try your request again."
    }
    assert instance.outstanding == 0  # the container call was ended and counted down
