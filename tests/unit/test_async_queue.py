"""The async room's queue and dispatch rules, with a fake fleet (no containers: pure logic)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from emulator.hosting.async_inference.queue import AsyncRequest, RequestQueue
from emulator.hosting.async_inference.worker import AsyncEndpoint
from emulator.hosting.fleet.invoker import FaultContext, Invoker
from emulator.model.arns import Account
from emulator.model.resources import AsyncInference


def request(inference_id: str, received_at: float, ttl_s: int = 60) -> AsyncRequest:
    return AsyncRequest(inference_id, "s3://b/in", "s3://b/out", "s3://b/err", received_at, ttl_s, 900)


async def _never(*_: Any) -> Any:
    raise AssertionError("no request should run")


def endpoint(queue: RequestQueue, lines: list[str]) -> AsyncEndpoint:
    return AsyncEndpoint(
        "e",
        AsyncInference("s3://b/out"),
        queue,
        lambda: None,  # no instance: nothing may start
        Invoker(1024, 1.0),
        FaultContext(Account("us-east-1", "123456789012"), "e"),
        _never,
        _never,
        lines.append,
    )


def test_the_queue_survives_a_reload_in_arrival_order(tmp_path: Path) -> None:
    path = tmp_path / "queue.json"
    queue = RequestQueue(path)
    later, earlier = request("b", 20.0), request("a", 10.0)
    queue.put(later)
    queue.put(earlier)
    queue.start(later)  # running when the server stopped
    again = RequestQueue(path)
    assert len(again) == 2 and again.waiting == 2
    first = again.peek()
    assert first is not None and first.inference_id == "a"
    again.start(first)
    second = again.peek()
    assert second is not None and second.inference_id == "b" and second.runs == 1  # started before


async def test_a_request_past_its_ttl_is_dropped_and_counted_and_none_starts_without_an_instance(
    tmp_path: Path,
) -> None:
    queue = RequestQueue(tmp_path / "queue.json")
    now = time.time()
    queue.put(request("old", now - 61, ttl_s=60))
    queue.put(request("fresh", now, ttl_s=60))
    lines: list[str] = []
    worker = endpoint(queue, lines)
    worker._dispatch()
    assert worker.counters.expired == 1
    assert lines == ["Inference old expired after 60 seconds in the queue (RequestTTLSeconds)."]
    # the fresh one waits: the endpoint has no instance (scaled to zero)
    assert queue.waiting == 1 and worker.instance_count() == 0
