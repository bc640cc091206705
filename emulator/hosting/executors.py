"""The hosting service's own thread pools for blocking work, one per kind, each bounded.

Every runtime call and every model-data call blocks. On asyncio's default executor (min(32, cores + 4)
threads: 6 on a 2-core machine) a few container stops that wait out the 30 s SIGTERM grace took every
thread, and CreateModel (which resolves the image), container starts and the logs behind failure
messages waited behind them. Here long work cannot starve short work:

* `stop`: container stops (SIGTERM, grace, SIGKILL): up to STOP_THREADS at once; a stop beyond that
  waits for a free thread (it is late, nothing else is).
* `model_data`: downloads and archive extraction (minutes for a big model): MODEL_DATA_THREADS.
* `engine`: short engine and S3 calls (resolve an image, start, inspect, logs, remove, list, HEAD an
  object): ENGINE_THREADS; never shared with the others.
* `async_io`: asynchronous inference's S3 and SNS calls (an input read a chunk at a time, an output
  written a part at a time, a notification): ASYNC_IO_THREADS. Slow inputs once held every thread of
  the model-data pool, and a new endpoint waited 9.7 s for its model data behind them.

The event loop itself never blocks; the measurement is in docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

STOP_THREADS = 32
MODEL_DATA_THREADS = 4
ENGINE_THREADS = 16
ASYNC_IO_THREADS = 16


class Executors:
    def __init__(
        self,
        stop_threads: int = STOP_THREADS,
        model_data_threads: int = MODEL_DATA_THREADS,
        engine_threads: int = ENGINE_THREADS,
        async_io_threads: int = ASYNC_IO_THREADS,
    ) -> None:
        self._stop = ThreadPoolExecutor(stop_threads, thread_name_prefix="smlocal-stop")
        self._model_data = ThreadPoolExecutor(model_data_threads, thread_name_prefix="smlocal-model-data")
        self._engine = ThreadPoolExecutor(engine_threads, thread_name_prefix="smlocal-engine")
        self._async_io = ThreadPoolExecutor(async_io_threads, thread_name_prefix="smlocal-async-io")

    async def stop(self, fn: Callable[..., T], *args: Any) -> T:
        """A container stop (or other work that waits out a grace period)."""
        return await self._run(self._stop, fn, *args)

    async def model_data(self, fn: Callable[..., T], *args: Any) -> T:
        """Fetching or unpacking model data."""
        return await self._run(self._model_data, fn, *args)

    async def engine(self, fn: Callable[..., T], *args: Any) -> T:
        """A short blocking call (engine API, S3 HEAD, a small file)."""
        return await self._run(self._engine, fn, *args)

    async def async_io(self, fn: Callable[..., T], *args: Any) -> T:
        """One S3 or SNS call of an asynchronous inference (one chunk, one part, one publish)."""
        return await self._run(self._async_io, fn, *args)

    @staticmethod
    async def _run(pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(pool, functools.partial(fn, *args))

    def shutdown(self) -> None:
        """Refuse new work and drop queued work; calls already running finish in their threads."""
        for pool in (self._stop, self._model_data, self._engine, self._async_io):
            pool.shutdown(wait=False, cancel_futures=True)
