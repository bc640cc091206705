"""Following an endpoint's live container logs (`smlocal logs --follow`): the history, then each new
line as the container writes it, prefixed by its CloudWatch-style stream name (`variant/instance-id`).

The containers are found by label through the engine (this server's endpoint containers), again each
second the stream is quiet, so instances started later join in (scale-out, replacement, an update's
new fleet); one thread per container reads the engine's follow stream and hands whole lines to the
event loop. The follow ends when every container has stopped with none taking its place.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator

from emulator.runtime import labels
from emulator.runtime.base import ContainerHandle, ContainerRuntime

_FOLLOW_END = object()
#: How often a quiet follow looks for new containers and lets its reader check on its client.
QUIET_S = 1.0


def selector(owner: str, endpoint: str, variant: str | None, instance: str | None) -> dict[str, str]:
    """The labels of this server's containers of an endpoint (optionally one variant or instance)."""
    found = {labels.MANAGED: "true", labels.OWNER: owner, labels.ROLE: "endpoint", labels.ENDPOINT: endpoint}
    if variant:
        found[labels.VARIANT] = variant
    if instance:
        found[labels.INSTANCE] = instance
    return found


class LogFollow:
    """One follow: `lines()` yields each line (with its newline) and None after each quiet second,
    so the reader can check on its client; `close()` ends the engine streams."""

    def __init__(
        self, runtime: ContainerRuntime, wanted: dict[str, str], first: list[ContainerHandle]
    ) -> None:
        self._runtime = runtime
        self._selector = wanted
        self._first = first
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._streams: list[Iterator[bytes]] = []
        self._stopping = threading.Event()
        self._following: set[str] = set()
        self._loop = asyncio.get_running_loop()

    @classmethod
    async def open(cls, runtime: ContainerRuntime, wanted: dict[str, str]) -> LogFollow | None:
        """A follow of the containers with these labels; None when none is running."""
        handles = await asyncio.to_thread(runtime.list, wanted)
        return cls(runtime, wanted, handles) if handles else None

    async def lines(self) -> AsyncIterator[str | None]:
        loop = self._loop
        open_streams = self._start(self._first)
        next_scan = loop.time() + QUIET_S
        while True:
            try:
                item = await asyncio.wait_for(self._queue.get(), QUIET_S)
            except TimeoutError:
                item = None
                yield None  # a quiet second
            if item is _FOLLOW_END:
                open_streams -= 1
            elif item is not None:
                yield str(item)
            if loop.time() >= next_scan or not open_streams:
                open_streams += self._start(await asyncio.to_thread(self._runtime.list, self._selector))
                next_scan = loop.time() + QUIET_S
                if not open_streams:
                    return  # every container stopped and none took their place

    def close(self) -> None:
        self._stopping.set()
        for stream in self._streams:
            close = getattr(stream, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # noqa: BLE001 - best effort: the thread is a daemon
                    pass

    def _start(self, found: list[ContainerHandle]) -> int:
        started = 0
        for h in found:
            if h.id in self._following:
                continue
            self._following.add(h.id)
            stream_name = f"{h.labels.get(labels.VARIANT, '')}/{h.labels.get(labels.INSTANCE, '')}"
            if labels.CONTAINER_HOSTNAME in h.labels:  # one stream per container of the instance
                stream_name += f"/{h.labels[labels.CONTAINER_HOSTNAME]}"
            threading.Thread(
                target=self._pump, args=(h.id, stream_name), name=f"follow-{h.name}", daemon=True
            ).start()
            started += 1
        return started

    def _pump(self, container_id: str, stream_name: str) -> None:
        loop, queue, stopping = self._loop, self._queue, self._stopping
        pending = b""
        try:
            stream = self._runtime.follow_logs(container_id)
            self._streams.append(stream)
            for chunk in stream:
                if stopping.is_set():
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    text = f"{stream_name} {line.decode('utf-8', errors='replace')}\n"
                    loop.call_soon_threadsafe(queue.put_nowait, text)
        except Exception:  # noqa: BLE001 - the stream ends when the container or the engine goes away
            pass
        finally:
            if pending and not stopping.is_set():
                text = f"{stream_name} {pending.decode('utf-8', errors='replace')}\n"
                loop.call_soon_threadsafe(queue.put_nowait, text)
            if not stopping.is_set():
                loop.call_soon_threadsafe(queue.put_nowait, _FOLLOW_END)
