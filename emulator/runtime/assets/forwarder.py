"""smlocal's forwarder for a network-isolated model container (run as `python3 -I -c`).

argv: TARGET_HOST TARGET_PORT LISTEN_PORT [TARGET_PORT LISTEN_PORT ...]. Listens on each LISTEN_PORT
and relays each TCP connection, byte for byte, to TARGET_HOST and its TARGET_PORT (the model container
on its internal network; a multi-container instance's network container has one port per container).
Half-closes are passed on (a container that closes an idle keep-alive connection closes the caller's), a reset
becomes a reset, and a refused upstream connection is an abortive close, as docker-proxy does when
nothing listens. Standard library only: it runs on the plain Python base image. SIGTERM ends it.
"""

import asyncio
import signal
import socket
import struct
import sys

HOST = sys.argv[1]
#: (target port, listen port) pairs
PAIRS = [(int(sys.argv[i]), int(sys.argv[i + 1])) for i in range(2, len(sys.argv) - 1, 2)]
CHUNK = 1 << 16


def _abort(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.transport.abort()


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, peer: asyncio.StreamWriter) -> None:
    try:
        while data := await src.read(CHUNK):
            dst.write(data)
            await dst.drain()
    except OSError:  # reset on the reading side: reset the other side too
        _abort(dst)
        _abort(peer)
        return
    try:
        if dst.can_write_eof():
            dst.write_eof()
    except OSError:
        _abort(peer)


async def _relay(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter, port: int) -> None:
    try:
        up_r, up_w = await asyncio.open_connection(HOST, port)
    except OSError:
        _abort(client_w)
        return
    for writer in (client_w, up_w):
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        await asyncio.gather(_pipe(client_r, up_w, client_w), _pipe(up_r, client_w, up_w))
    finally:
        for writer in (client_w, up_w):
            writer.close()


async def main() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    servers = []
    for port, listen in PAIRS:

        async def relay(r: asyncio.StreamReader, w: asyncio.StreamWriter, port: int = port) -> None:
            await _relay(r, w, port)

        servers.append(await asyncio.start_server(relay, "0.0.0.0", listen, backlog=1024))
    shown = ", ".join(f":{listen} -> {HOST}:{port}" for port, listen in PAIRS)
    print(f"smlocal forwarder: {shown}", flush=True)
    await stop.wait()
    for server in servers:
        server.close()


asyncio.run(main())
