"""One asynchronous endpoint's requests, waiting and running, in arrival order, persisted.

A restart of smlocal finds every request it accepted: STATE_DIR/async/{endpoint}/ holds a snapshot,
`queue.json` (`{"generation": g, "requests": [...]}`, replaced in one rename), and a journal,
`queue.{g}.log`: one JSON line per change since that snapshot (a request queued, started or ended),
appended before the change is acknowledged. A change costs one short append whatever the backlog
(rewriting the whole queue per change cost 100 ms at 5,000 waiting requests, in the event loop: see
docs/performance.md). When the journal outgrows the queue, the snapshot is rewritten as generation
g + 1 and the old journal removed; a journal of another generation is stale and ignored, so a stop
between the two steps loses and repeats nothing. A torn last line (a crash mid-append) is skipped. A
request that was running when the server stopped waits again; its `runs` says it was started before
(the worker logs the second start: a model may see it twice, and the log says so).
"""

from __future__ import annotations

import bisect
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
    #: the queue's own name for it (InferenceIds may repeat), given when it is queued
    key: str = ""


#: The journal is compacted into a new snapshot once it has this many lines and more than twice as
#: many as the queue has requests.
COMPACT_MIN_LINES = 1000


class RequestQueue:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._inputs = path.parent / "inputs"
        self._waiting: list[AsyncRequest] = []
        self._running: dict[str, AsyncRequest] = {}
        self._generation = 0
        self._journal_lines = 0
        self._load()

    def _journal_path(self, generation: int) -> Path:
        return self._path.with_name(f"{self._path.stem}.{generation}.log")

    def _load(self) -> None:
        requests: dict[str, AsyncRequest] = {}
        rewrite = False  # a snapshot of the queue as loaded follows (old format, a torn line)
        if self._path.exists():
            snapshot = json.loads(self._path.read_text())
            if isinstance(snapshot, list):  # the format before the journal: the whole queue
                snapshot = {"generation": 0, "requests": snapshot}
            self._generation = int(snapshot["generation"])
            for item in snapshot["requests"]:
                request = AsyncRequest(**item)
                if not request.key:  # saved before requests had keys
                    request.key, rewrite = uuid.uuid4().hex, True
                requests[request.key] = request
        journal = self._journal_path(self._generation)
        if journal.exists():
            for line in journal.read_text().splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:  # torn by a crash mid-append: the next append must not join it
                    log.warning("%s: a torn journal line skipped", journal)
                    rewrite = True
                    continue
                self._journal_lines += 1
                if entry["op"] == "put":
                    request = AsyncRequest(**entry["request"])
                    requests[request.key] = request
                elif entry["op"] == "start" and entry["key"] in requests:
                    requests[entry["key"]].runs = entry["runs"]
                elif entry["op"] == "end":
                    requests.pop(entry["key"], None)
        for stale in self._path.parent.glob(f"{self._path.stem}.*.log"):
            if stale != journal:
                stale.unlink(missing_ok=True)
        self._waiting = sorted(requests.values(), key=lambda r: r.received_at)  # a running one waits again
        if rewrite:
            self._compact()

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
        request.key = uuid.uuid4().hex
        if inline_body is not None:
            request.inline_input = uuid.uuid4().hex
            write_atomically(self._inputs / request.inline_input, inline_body)
        self._waiting.append(request)
        self._append({"op": "put", "request": dataclasses.asdict(request)})

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
        self._running[request.key] = request
        self._append({"op": "start", "key": request.key, "runs": request.runs})

    def requeue(self, request: AsyncRequest) -> None:
        """A running request waits again, in its arrival place (its instance was retired by smlocal
        mid-run). Nothing is journalled: a request started and not ended already waits again when
        the queue is loaded, and its `runs` stays counted."""
        self._running.pop(request.key, None)
        bisect.insort(self._waiting, request, key=lambda r: r.received_at)

    def drop(self, request: AsyncRequest) -> None:
        """A waiting request leaves the queue without running (expired)."""
        self._waiting.remove(request)
        self._append({"op": "end", "key": request.key})
        self._forget_input(request)

    def finish(self, request: AsyncRequest) -> None:
        self._running.pop(request.key, None)
        self._append({"op": "end", "key": request.key})
        self._forget_input(request)

    def _append(self, entry: dict[str, object]) -> None:
        # opened per change (a few microseconds): no file handle outlives the call
        self._path.parent.mkdir(parents=True, exist_ok=True)
        with self._journal_path(self._generation).open("a", encoding="utf-8") as journal:
            journal.write(json.dumps(entry, separators=(",", ":")) + "\n")
        self._journal_lines += 1
        if self._journal_lines >= COMPACT_MIN_LINES and self._journal_lines > 2 * len(self):
            self._compact()

    def _compact(self) -> None:
        """The queue as snapshot generation g + 1; then generation g's journal goes."""
        old = self._journal_path(self._generation)
        items = [dataclasses.asdict(r) for r in (*self._running.values(), *self._waiting)]
        self._generation += 1
        write_atomically(self._path, json.dumps({"generation": self._generation, "requests": items}))
        old.unlink(missing_ok=True)
        self._journal_lines = 0
