"""The invoker against a real server on 127.0.0.1 that dies with a request in flight on a pooled
keep-alive connection, and then refuses connections (a killed container whose port is gone): the
fault says the connection was dropped in flight and the container is gone, not that a connection was
refused, and it is not a ClientConnectorError (which the invoke path would send to another instance)."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from multidict import CIMultiDict
from yarl import URL

from emulator.errors import ModelUnreachable
from emulator.hosting.fleet.invoker import DroppedInFlight, FaultContext, Invoker, with_exit_code
from emulator.model.arns import Account

CONTEXT = FaultContext(Account("us-east-1", "123456789012"), "e")
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"


async def _read_request(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        ),
        0,
    )
    await reader.readexactly(length)


class _Instance:
    def __init__(self) -> None:
        self.exited = asyncio.Event()
        self.exit_code: int | None = None


async def _scenario(exit_code: int | None) -> ModelUnreachable:
    """Answer one request (keep-alive), take the second one in and die: close the connection
    unanswered and stop listening."""
    second = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(ANSWER)
        await writer.drain()
        await _read_request(reader)
        second.set()
        writer.transport.abort()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    url = URL(f"http://127.0.0.1:{port}/invocations")
    invoker = Invoker(6_291_456, 10.0)
    await invoker.start()
    try:
        assert (await invoker.invoke(url, b"a", CIMultiDict(), CONTEXT)).body == b"ok"

        async def die() -> None:
            await second.wait()
            server.close()  # no longer listening: the retry's new connection is refused
            await server.wait_closed()

        dying = asyncio.ensure_future(die())
        with pytest.raises(ModelUnreachable) as info:
            await invoker.invoke(url, b"b", CIMultiDict(), CONTEXT)
        await dying
        instance = _Instance()
        if exit_code is not None:
            instance.exit_code = exit_code
            instance.exited.set()
        return await with_exit_code(info.value, instance, CONTEXT)
    finally:
        await invoker.close()
        server.close()


def test_a_container_gone_mid_request_is_not_reported_as_a_refused_connection() -> None:
    fault = asyncio.run(_scenario(None))
    assert fault.suspect
    assert isinstance(fault.__cause__, DroppedInFlight)
    assert not isinstance(fault.__cause__, aiohttp.ClientConnectorError)
    assert fault.original_message.startswith(
        "Container primary dropped the connection while the request was in flight and no longer accepts "
        "connections: the container exited or was stopped (ServerDisconnectedError: Server disconnected; "
        "then ClientConnectorError: "
    ), fault.original_message
    assert fault.message.startswith(
        'Received server error (0) from primary with message "Container primary dropped'
    )


def test_the_exit_code_is_named_when_the_exit_watcher_has_it() -> None:
    fault = asyncio.run(_scenario(137))
    assert fault.original_message.startswith(
        "Container primary dropped the connection while the request was in flight and no longer accepts "
        "connections: the container exited with code 137 (ServerDisconnectedError"
    ), fault.original_message
    assert fault.suspect and isinstance(fault.__cause__, DroppedInFlight)
