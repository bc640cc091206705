"""One asynchronous endpoint's requests, waiting and running, in arrival order, persisted.

STATE_DIR/async/{endpoint}/queue.json is rewritten whole (one rename) after each change, so a
restart of smlocal finds every request it accepted. A request that was running when the server
stopped waits again; its `runs` says it was started before (the worker logs the second start: a
model may see it twice, and the log says so).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import uuid
from dataclasses import dataclass
from pathlib import Path

from emulator.hosting.state_files import write_atomically

log = logging.getLogger(__name__)


@dataclass
class AsyncRequest:
    inference_id: str
    input_location: str
    output_location: str
    failure_location: str
    #: epoch seconds when InvokeEndpointAsync accepted it
    received_at: float
    ttl_s: int
    timeout_s: int
    content_type: str | None = None
    accept: str | None = None
    custom_attributes: str | None = None
    #: how many times a worker started it (more than once: after a restart)
    runs: int = 0
    #: an inline Body's file in the queue's `inputs/` folder (its input_location is then "")
    inline_input: str | None = None


class RequestQueue:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._inputs = path.parent / "inputs"
        self._waiting: list[AsyncRequest] = []
        self._running: dict[str, AsyncRequest] = {}
        if path.exists():
            items = [AsyncRequest(**item) for item in json.loads(path.read_text())]
            self._waiting = sorted(items, key=lambda r: r.received_at)  # a running one waits again

    def __len__(self) -> int:
        return len(self._waiting) + len(self._running)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def oldest_received(self) -> float | None:
        times = [r.received_at for r in (*self._waiting, *self._running.values())]
        return min(times) if times else None

    def put(self, request: AsyncRequest, inline_body: bytes | None = None) -> None:
        """Queue a request; an inline body is written first, so that a restart finds both."""
        if inline_body is not None:
            request.inline_input = uuid.uuid4().hex
            write_atomically(self._inputs / request.inline_input, inline_body)
        self._waiting.append(request)
        self._save()

    def inline_body(self, request: AsyncRequest) -> bytes:
        assert request.inline_input is not None
        return (self._inputs / request.inline_input).read_bytes()

    def _forget_input(self, request: AsyncRequest) -> None:
        if request.inline_input is not None:
            (self._inputs / request.inline_input).unlink(missing_ok=True)

    def peek(self) -> AsyncRequest | None:
        return self._waiting[0] if self._waiting else None

    def start(self, request: AsyncRequest) -> None:
        self._waiting.remove(request)
        request.runs += 1
        self._running[request.inference_id] = request
        self._save()

    def drop(self, request: AsyncRequest) -> None:
        """A waiting request leaves the queue without running (expired)."""
        self._waiting.remove(request)
        self._save()
        self._forget_input(request)

    def finish(self, request: AsyncRequest) -> None:
        self._running.pop(request.inference_id, None)
        self._save()
        self._forget_input(request)

    def _save(self) -> None:
        items = [dataclasses.asdict(r) for r in (*self._running.values(), *self._waiting)]
        write_atomically(self._path, json.dumps(items, indent=1))
