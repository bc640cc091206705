"""Serving the application: in the foreground (`smlocal serve`) or in-process (tests, bench)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from aiohttp import web

from emulator.app import SERVICE, build_app
from emulator.config import ServerConfig
from emulator.hosting.endpoints.service import HostingService
from emulator.runtime.base import ContainerRuntime
from emulator.server_record import remove_record, write_record

log = logging.getLogger(__name__)
T = TypeVar("T")


def new_event_loop(kind: str = "auto") -> asyncio.AbstractEventLoop:
    """uvloop when asked for, or with "auto" when it is installed (a dependency, except on Windows);
    asyncio's own loop otherwise. docs/performance.md has the measurement behind this."""
    if kind in ("auto", "uvloop"):
        try:
            import uvloop
        except ImportError:
            if kind == "uvloop":
                raise
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def serve_forever(
    config: ServerConfig,
    keep_containers: bool = False,
    event_loop: str = "auto",
    runtime: ContainerRuntime | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM, then stop every container (unless keep_containers) and exit."""
    app = build_app(config, runtime=runtime, stop_containers_on_exit=not keep_containers)
    loop = new_event_loop(event_loop)
    asyncio.set_event_loop(loop)
    url = f"http://{config.host}:{config.port}"

    def announce(message: str) -> None:
        write_record(config.state_dir, url)  # `smlocal down --state-dir` finds this server by it
        log.info(
            "smlocal serving SageMaker APIs on http://%s:%d (state dir %s)",
            config.host,
            config.port,
            config.state_dir,
        )

    try:
        web.run_app(
            app,
            host=config.host,
            port=config.port,
            access_log=None,
            print=announce,
            shutdown_timeout=5.0,
            handle_signals=True,
            loop=loop,
        )
    finally:
        remove_record(config.state_dir, url)
    log.debug("event loop was %s", type(loop).__module__)


@asynccontextmanager
async def running_server(
    config: ServerConfig, runtime: ContainerRuntime | None = None, stop_containers: bool = True
) -> AsyncIterator[tuple[str, HostingService]]:
    """Serve in this event loop; yields (endpoint URL, service). Port 0 picks a free port."""
    app = build_app(config, runtime=runtime, stop_containers_on_exit=stop_containers)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, config.host, config.port)
    await site.start()
    port = runner.addresses[0][1]
    url = f"http://{config.host}:{port}"
    write_record(config.state_dir, url)
    try:
        yield url, app[SERVICE]
    finally:
        await runner.cleanup()
        remove_record(config.state_dir, url)


class BackgroundServer:
    """The server on its own event loop in a thread: for synchronous callers (boto3 tests, bench)."""

    def __init__(
        self, config: ServerConfig, runtime: ContainerRuntime | None = None, stop_containers: bool = True
    ) -> None:
        self._config = config
        self._runtime = runtime
        self._stop_containers = stop_containers
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopping: asyncio.Event | None = None
        self._error: BaseException | None = None
        self.url = ""
        self.service: HostingService | None = None

    def __enter__(self) -> BackgroundServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout_s: float = 120.0) -> str:
        self._thread = threading.Thread(target=self._main, name="smlocal-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise TimeoutError("smlocal server did not start")
        if self._error is not None:
            raise self._error
        return self.url

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
            self._error = exc
            self._ready.set()
        finally:
            loop.close()

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        async with running_server(self._config, self._runtime, self._stop_containers) as (url, service):
            self.url, self.service = url, service
            self._ready.set()
            await self._stopping.wait()

    def call(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run a coroutine on the server's loop (e.g. service.wait_idle()) and return its result."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout_s)

    def stop(self) -> None:
        if self._loop is not None and self._stopping is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
            self._thread.join()
            self._loop = None
