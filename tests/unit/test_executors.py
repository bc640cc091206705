"""emulator.hosting.executors: each kind of blocking work on its own bounded pool."""

from __future__ import annotations

import asyncio
import threading

import pytest

from emulator.hosting.executors import Executors


def test_a_full_stop_pool_does_not_delay_engine_calls() -> None:
    async def main() -> None:
        pools = Executors(stop_threads=2, model_data_threads=1, engine_threads=2)
        release = threading.Event()
        try:
            stops = [asyncio.ensure_future(pools.stop(release.wait, 10)) for _ in range(3)]
            data = asyncio.ensure_future(pools.model_data(release.wait, 10))
            await asyncio.sleep(0.05)
            name = await asyncio.wait_for(pools.engine(lambda: threading.current_thread().name), 1.0)
            assert name.startswith("smlocal-engine")
            assert not any(s.done() for s in stops) and not data.done()
            release.set()
            assert await asyncio.gather(*stops, data) == [True, True, True, True]
        finally:
            release.set()
            pools.shutdown()

    asyncio.run(main())


def test_shutdown_refuses_new_work() -> None:
    async def main() -> None:
        pools = Executors()
        pools.shutdown()
        with pytest.raises(RuntimeError):
            await pools.engine(lambda: None)

    asyncio.run(main())
