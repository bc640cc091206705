"""A streamed answer: one JSON line per denoising step as it finishes, then the image. No torch, no aiohttp.

When and why: SageMaker's InvokeEndpointWithResponseStream forwards each chunk a container writes to the
client as it arrives, so a client can show progress while the image is made. A request whose Accept names
application/x-ndjson (inputs.NDJSON) gets this answer, with HTTP/1.1 chunked encoding, each line its own
chunk written as soon as its step ends:

    {"event": "progress", "step": 1, "steps": 5}
    ...
    {"event": "progress", "step": 5, "steps": 5}
    {"event": "image", "content_type": "image/png", "image": "<base64 PNG>", "seed": 7, "height": 64,
     "width": 64, "num_inference_steps": 4, "guidance_scale": 7.5}

`steps` is the number of denoising passes the pipeline makes (pipeline.generate: SD 1.x's PNDM scheduler
makes num_inference_steps + 1). The image line holds the same fields as the application/json answer. A
generation that fails after the first line ends the stream with {"event": "error", "error": "..."} (the
status, 200, is already sent); one that fails before it is an ordinary 500 with a JSON reason.

The plumbing: the pipeline's callback runs in the generation thread; StepRelay hands each step to the
event loop (call_soon_threadsafe onto an asyncio.Queue), where the response writer awaits them. When the
client goes away, the writer's next write fails, it calls `cancel()`, and the generation's next step
raises StreamCancelled: the pipeline stops within one step and the single worker is free again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

EVENT_PROGRESS = "progress"
EVENT_IMAGE = "image"
EVENT_ERROR = "error"


def _line(document: Mapping[str, object]) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode("utf-8") + b"\n"


def progress_line(step: int, steps: int) -> bytes:
    """The line for a finished denoising step (1-based) of `steps`."""
    return _line({"event": EVENT_PROGRESS, "step": step, "steps": steps})


def image_line(answer: Mapping[str, object]) -> bytes:
    """The last line: the application/json answer's fields (base64 PNG, content_type, seed, ...)."""
    return _line({"event": EVENT_IMAGE, **answer})


def error_line(message: str) -> bytes:
    """The last line when the generation failed after the stream began."""
    return _line({"event": EVENT_ERROR, "error": message})


class StreamCancelled(Exception):
    """Raised in the generation thread, at the end of a step, once the stream's client has gone."""


@dataclass(frozen=True)
class Step:
    step: int
    steps: int


class StepRelay:
    """Steps from the generation thread to the response writer on the event loop.

    `on_step` is the pipeline's step callback (any thread); `close` ends the sequence (on the loop, once
    the generation has finished, either way); `cancel` (any thread) makes the next `on_step` raise
    StreamCancelled. Iterating yields the steps in order until `close`.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: asyncio.Queue[Step | None] = asyncio.Queue()
        self._cancelled = threading.Event()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel(self) -> None:
        self._cancelled.set()

    def on_step(self, step: int, steps: int) -> None:
        if self._cancelled.is_set():
            raise StreamCancelled(f"the client went away; stopped after step {step - 1} of {steps}")
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, Step(step, steps))
        except RuntimeError as exc:  # the loop is closed: nobody can read this stream any more
            self._cancelled.set()
            raise StreamCancelled("the server stopped") from exc

    def close(self) -> None:
        """End of the steps; call on the loop (e.g. from the generation future's done callback)."""
        with contextlib.suppress(asyncio.QueueFull):
            self._queue.put_nowait(None)

    async def steps(self) -> AsyncIterator[Step]:
        while (item := await self._queue.get()) is not None:
            yield item
