"""The async room's queue and dispatch rules, with a fake fleet (no containers: pure logic)."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pytest

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


def _ids(queue: RequestQueue) -> list[str]:
    out = []
    while (first := queue.peek()) is not None:
        out.append(first.inference_id)
        queue.start(first)
    return out


def test_each_change_is_one_journal_line_and_a_reload_replays_them(tmp_path: Path) -> None:
    path = tmp_path / "queue.json"
    queue = RequestQueue(path)
    for i in range(5):
        queue.put(request(f"r{i}", float(i)))
    done = queue.peek()
    assert done is not None
    queue.start(done)
    queue.finish(done)
    journal = tmp_path / "queue.0.log"
    assert not path.exists() and len(journal.read_text().splitlines()) == 7  # 5 puts, a start, an end
    again = RequestQueue(path)
    assert _ids(again) == ["r1", "r2", "r3", "r4"]


def test_repeated_inference_ids_are_kept_apart(tmp_path: Path) -> None:
    path = tmp_path / "queue.json"
    queue = RequestQueue(path)
    first, second = request("same", 1.0), request("same", 2.0)
    queue.put(first)
    queue.put(second)
    queue.start(first)
    queue.finish(first)  # ends the first, not both
    again = RequestQueue(path)
    assert len(again) == 1 and again.peek() is not None and again.peek().received_at == 2.0  # type: ignore[union-attr]


def test_the_journal_is_compacted_into_a_new_snapshot_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("emulator.hosting.async_inference.queue.COMPACT_MIN_LINES", 10)
    path = tmp_path / "queue.json"
    queue = RequestQueue(path)
    for i in range(12):  # 12 puts, then 12 starts and ends of the first 6 ... until the journal outgrows it
        queue.put(request(f"r{i:02}", float(i)))
    for _ in range(6):
        first = queue.peek()
        assert first is not None
        queue.start(first)
        queue.finish(first)
    snapshot = json.loads(path.read_text())
    assert snapshot["generation"] >= 1
    logs = sorted(p.name for p in tmp_path.glob("queue.*.log"))
    assert logs in ([], [f"queue.{snapshot['generation']}.log"])  # only the current generation's
    assert _ids(RequestQueue(path)) == [f"r{i:02}" for i in range(6, 12)]


def test_a_stale_journal_and_a_torn_line_lose_nothing(tmp_path: Path) -> None:
    """A stop between the new snapshot's rename and the old journal's removal leaves a journal of an
    older generation: ignored (its changes are in the snapshot) and removed. A crash mid-append leaves
    a torn last line: skipped, and the queue rewritten so the next append starts a clean line."""
    path = tmp_path / "queue.json"
    queue = RequestQueue(path)
    queue.put(request("kept", 1.0))
    snapshot = {"generation": 1, "requests": [json.loads((tmp_path / "queue.0.log").read_text())["request"]]}
    path.write_text(json.dumps(snapshot))  # the compaction's rename happened; queue.0.log is still there
    with (tmp_path / "queue.1.log").open("a") as journal:
        journal.write(
            json.dumps(
                {
                    "op": "put",
                    "request": {
                        **snapshot["requests"][0],
                        "key": "k2",
                        "inference_id": "late",
                        "received_at": 2.0,
                    },
                }
            )
            + "\n"
        )
        journal.write('{"op": "put", "requ')  # torn
    again = RequestQueue(path)
    assert not (tmp_path / "queue.0.log").exists()
    assert json.loads(path.read_text())["generation"] == 2  # rewritten after the torn line
    again.put(request("after", 3.0))
    assert _ids(RequestQueue(path)) == ["kept", "late", "after"]


def test_a_queue_saved_before_the_journal_loads(tmp_path: Path) -> None:
    path = tmp_path / "queue.json"
    old = [dataclasses.asdict(request("a", 1.0)), dataclasses.asdict(request("b", 2.0))]
    for item in old:
        item.pop("key")
    path.write_text(json.dumps(old, indent=1))
    queue = RequestQueue(path)
    first = queue.peek()
    assert first is not None and first.key
    queue.start(first)
    queue.finish(first)
    assert _ids(RequestQueue(path)) == ["b"]


def test_a_requeued_request_waits_in_its_arrival_place_and_keeps_its_run(tmp_path: Path) -> None:
    """A request interrupted because smlocal retired its instance goes back before later arrivals;
    a reload (nothing journalled for it) finds it waiting with its run counted."""
    path = tmp_path / "queue.json"
    queue = RequestQueue(path)
    for i in range(3):
        queue.put(request(f"r{i}", float(i)))
    first = queue.peek()
    assert first is not None
    queue.start(first)
    queue.requeue(first)
    assert queue.waiting == 3 and queue.peek() is first and first.runs == 1
    again = RequestQueue(path)
    reloaded = again.peek()
    assert reloaded is not None and reloaded.inference_id == "r0" and reloaded.runs == 1
    assert _ids(queue) == ["r0", "r1", "r2"]


def test_the_time_in_backlog_samples_are_bounded(tmp_path: Path) -> None:
    from emulator.hosting.async_inference.counters import BACKLOG_SAMPLES

    worker = endpoint(RequestQueue(tmp_path / "queue.json"), [])
    for i in range(BACKLOG_SAMPLES + 10):
        worker.counters.time_in_backlog_s.append(float(i))
    assert len(worker.counters.time_in_backlog_s) == BACKLOG_SAMPLES
    assert worker.counters.time_in_backlog_s[-1] == float(BACKLOG_SAMPLES + 9)
