"""How should smlocal's invoker talk to containers? Three aiohttp client strategies, measured.

    python3 bench/keepalive_experiment.py [--quick] [--json PATH]

Standalone: starts two echo containers itself (no smlocal), both published on 127.0.0.1:
  nagle        NAGLE=1: response headers and body in two sends, Nagle on, listen backlog 5
               (what Python's plain http.server does: the keep-alive trap)
  nodelay      the default: TCP_NODELAY and one send per response, backlog 128
and, for contrast, the same server.py with NAGLE=1 run as a plain process on the host:
  nagle-host   bound to 127.0.0.1, no container, so no docker-proxy between client and server
and calls each with three client strategies:
  keep-alive           aiohttp's pooled connections (TCP_NODELAY is already on: aiohttp sets it)
  new connection       TCPConnector(force_close=True): connect, one request, close
  keep-alive+QUICKACK  pooled connections; TCP_QUICKACK set on the socket each time data arrives,
                       so the client ACKs the header segment at once instead of delaying it
for concurrency 1 (p50/p99) and concurrency 32 and 64 (throughput, failures).

A port published on 127.0.0.1 is served by docker-proxy (dockerd's userland proxy, the default):
the client's TCP connection ends at the proxy, and the proxy keeps its own connection to the
container. Whatever the client sets on its socket then acts on the client-proxy leg only.

The stall: the server sends the headers; Nagle holds the body until that segment is ACKed; the
client, a pooled connection out of quick-ACK mode, delays its ACK (~40 ms on Linux). A fresh
connection starts in quick-ACK mode, which is why "new connection" escapes it.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp  # noqa: E402
from aiohttp.client_proto import ResponseHandler  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench._harness import HOST, IMAGE, REPO, Run, docker_client, free_port, poster, run_load  # noqa: E402

KB = b"x" * 1024
LABELS = {"smlocal.managed": "true", "smlocal.role": "bench", "smlocal.bench": "keepalive-experiment"}


class QuickAckHandler(ResponseHandler):
    """aiohttp's client protocol, re-arming TCP_QUICKACK whenever a segment arrives."""

    _sock: Any = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._sock = transport.get_extra_info("socket")

    def data_received(self, data: bytes) -> None:
        if self._sock is not None:
            try:
                self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
            except OSError:
                pass
        super().data_received(data)


def session(strategy: str) -> aiohttp.ClientSession:
    kwargs: dict[str, Any] = {"limit": 0}
    if strategy == "new connection":
        kwargs["force_close"] = True
    connector = aiohttp.TCPConnector(**kwargs)
    if strategy == "keep-alive+QUICKACK":
        connector._factory = functools.partial(QuickAckHandler, loop=asyncio.get_running_loop())
    return aiohttp.ClientSession(
        connector=connector, auto_decompress=False, skip_auto_headers=("User-Agent", "Accept-Encoding")
    )


def start_container(name: str, env: dict[str, str]) -> tuple[Any, str]:
    client = docker_client()
    c = client.containers.run(
        IMAGE,
        ["serve"],
        detach=True,
        environment=env,
        labels=LABELS,
        name=f"smlocal-bench-{name}-{int(time.time())}",
        ports={"8080/tcp": (HOST, None)},
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        c.reload()
        bindings = (c.attrs["NetworkSettings"]["Ports"] or {}).get("8080/tcp") or []
        if bindings:
            url = f"http://{HOST}:{bindings[0]['HostPort']}"
            try:
                with socket.create_connection((HOST, int(bindings[0]["HostPort"])), timeout=0.5) as s:
                    s.sendall(b"GET /ping HTTP/1.0\r\n\r\n")
                    if b" 200 " in s.recv(1024):
                        return c, url
            except OSError:
                pass
        time.sleep(0.1)
    c.remove(force=True)
    raise RuntimeError(f"container {name} did not answer /ping in 30 s")


_HOST_SERVER = """
import sys
sys.path.insert(0, sys.argv[1])
import server

class Loopback(server.Server):  # server.py binds 0.0.0.0; keep this one on 127.0.0.1
    def __init__(self, address, handler):
        super().__init__(("127.0.0.1", address[1]), handler)

server.Server = Loopback
sys.exit(server.main(["server.py", "serve"]))
"""


def start_host_server() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "NAGLE": "1", "SAGEMAKER_BIND_TO_PORT": str(port)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOST_SERVER, str(REPO / "tests/fixtures/images/echo")],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                return proc, f"http://{HOST}:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("host echo server did not listen in 15 s")


STRATEGIES = ("keep-alive", "new connection", "keep-alive+QUICKACK")


async def measure(urls: dict[str, str], quick: bool, console: Console) -> dict[str, dict[str, Run]]:
    n1 = 100 if quick else 400
    tput_s = 2.0 if quick else 5.0
    out: dict[str, dict[str, Run]] = {}
    for server, url in urls.items():
        for strategy in STRATEGIES:
            key = f"{server} / {strategy}"
            console.log(key)
            async with session(strategy) as s:
                call = poster(s, f"{url}/invocations", KB, timeout_s=30)
                await run_load(call, 1, 5, 5)
                out[key] = {
                    "c1": await run_load(call, 1, n1, 20),
                    "c32": await run_load(call, 32, 50_000, tput_s),
                    "c64": await run_load(call, 64, 50_000, tput_s),
                }
            await asyncio.sleep(1)  # let TIME_WAIT/backlog settle between strategies
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    console = Console(width=max(120, Console().width))
    containers = []
    host_proc = None
    try:
        nagle, nagle_url = start_container("nagle", {"NAGLE": "1"})
        containers.append(nagle)
        nodelay, nodelay_url = start_container("nodelay", {})
        containers.append(nodelay)
        host_proc, host_url = start_host_server()
        urls = {"nagle": nagle_url, "nodelay": nodelay_url, "nagle-host": host_url}
        console.log(f"load average before: {os.getloadavg()}")
        results = asyncio.run(measure(urls, args.quick, console))
    finally:
        for c in containers:
            c.remove(force=True)
        if host_proc is not None:
            host_proc.terminate()
            try:
                host_proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                host_proc.kill()
    table = Table(title="Client strategy vs server behaviour (echo container, 1 KB body, direct)")
    for col in (
        "server / client",
        "c=1 p50",
        "c=1 p99",
        "c=32 req/s",
        "c=32 p99",
        "c=64 req/s",
        "c=64 p99",
        "failures",
    ):
        table.add_column(col, justify="left" if col == "server / client" else "right")
    summary: dict[str, Any] = {}
    for key, r in results.items():
        fails = {str(k): v for run in r.values() for k, v in run.statuses.items() if k != 200}
        table.add_row(
            key,
            f"{r['c1'].p50:.2f} ms",
            f"{r['c1'].p99:.2f} ms",
            f"{r['c32'].rps:,.0f}",
            f"{r['c32'].p99:.1f} ms",
            f"{r['c64'].rps:,.0f}",
            f"{r['c64'].p99:.1f} ms",
            str(fails or 0),
        )
        summary[key] = {
            "c1_p50_ms": r["c1"].p50,
            "c1_p99_ms": r["c1"].p99,
            "c1_n": r["c1"].ok,
            "c32_rps": r["c32"].rps,
            "c32_p99_ms": r["c32"].p99,
            "c64_rps": r["c64"].rps,
            "c64_p99_ms": r["c64"].p99,
            "failures": fails,
        }
    console.print(table)
    left = docker_client().containers.list(all=True, filters={"label": "smlocal.bench=keepalive-experiment"})
    console.print(f"experiment containers left: {[c.name for c in left] or 'none'}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
