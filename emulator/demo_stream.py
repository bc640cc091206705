"""`smlocal demo --stream`: reading the sample's streamed answer out of InvokeEndpointWithResponseStream.

When and why: with `Accept: application/x-ndjson` the sample writes one JSON line per denoising step as
it ends, then the image (sample_container/sd_server/streaming.py). boto3 hands the answer over as an
EventStream of `{'PayloadPart': {'Bytes': ...}}` events, and SageMaker does not promise that a part is
a line (spec §2.3): a part may hold half a line or several. LineAssembler re-assembles the lines across
parts; read_stream turns them into progress callbacks and the PNG. Both are pure (any iterable of
events, any callback); invoke_streamed connects them to boto3 and to the demo's rich progress bar
(StepsBar: "━━━━━━━━━━━━━━━ 3/5 steps").
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rich.progress import Progress, ProgressColumn, Task
from rich.text import Text

from emulator.errors import SmlocalError

#: The Accept that asks the sample for a streamed answer.
NDJSON = "application/x-ndjson"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

OnProgress = Callable[[int, int], None]


class StreamFailed(SmlocalError):
    """The streamed answer was not the sample's line format, or reported a failure."""


class LineAssembler:
    """Bytes in, complete lines out: a line may span parts, a part may end several lines."""

    def __init__(self) -> None:
        self._pending = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """The lines `data` completes (without their newline), in order."""
        self._pending += data
        *lines, rest = bytes(self._pending).split(b"\n")
        self._pending = bytearray(rest)
        return lines

    def finish(self) -> bytes:
        """What is left after the last newline (b"" when the stream ended on a line's end)."""
        rest, self._pending = bytes(self._pending), bytearray()
        return rest


@dataclass(frozen=True)
class StreamedImage:
    png: bytes
    #: seconds from `started` (read_stream's argument) to the first PayloadPart
    first_part_s: float
    parts: int
    #: the progress lines read, and the step count they announced
    progress_lines: int
    steps: int


def read_stream(
    events: Iterable[Mapping[str, Any]],
    on_progress: OnProgress,
    started: float,
    clock: Callable[[], float] = time.monotonic,
) -> StreamedImage:
    """Read the sample's line stream from boto3's EventStream `events` until its image line.

    `on_progress(step, steps)` runs for each progress line as it arrives. Raises StreamFailed for an
    error line, a line that is not a JSON object, an image that is not a base64 PNG, or a stream that
    ends without an image. (A ModelStreamError event raises botocore's EventStreamError from the
    iterator itself; the caller reports it.)
    """
    lines = LineAssembler()
    first_part_s: float | None = None
    parts = progress = steps = 0
    for event in events:
        payload = event.get("PayloadPart")
        if payload is None:
            continue  # an event this reader does not know (botocore skips unknown types too)
        if first_part_s is None:
            first_part_s = clock() - started
        parts += 1
        for line in lines.feed(payload.get("Bytes", b"")):
            document = _parse(line)
            kind = document.get("event")
            if kind == "progress":
                step, steps = _int(document, "step"), _int(document, "steps")
                progress += 1
                on_progress(step, steps)
            elif kind == "image":
                png = _png(document)
                return StreamedImage(png, first_part_s, parts, progress, steps)
            elif kind == "error":
                raise StreamFailed(f"The endpoint's stream reported: {document.get('error')}")
    rest = lines.finish()
    tail = f"; it ended inside a line: {rest[:80]!r}" if rest.strip() else ""
    raise StreamFailed(
        f"The stream ended without an image line, after {parts} part(s) "
        f"and {progress} progress line(s){tail}."
    )


def _parse(line: bytes) -> dict[str, Any]:
    try:
        document = json.loads(line)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise StreamFailed(f"The stream sent a line that is not JSON: {line[:120]!r} ({exc})") from exc
    if not isinstance(document, dict):
        raise StreamFailed(f"The stream sent a line that is not a JSON object: {line[:120]!r}")
    return document


def _int(document: Mapping[str, Any], key: str) -> int:
    value = document.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise StreamFailed(f"The stream sent a progress line whose {key!r} is not an integer: {document}")
    return value


def _png(document: Mapping[str, Any]) -> bytes:
    try:
        png = base64.b64decode(str(document.get("image", "")), validate=True)
    except binascii.Error as exc:
        raise StreamFailed(f"The stream's image line holds no base64 image: {exc}") from exc
    if not png.startswith(PNG_MAGIC):
        content_type = document.get("content_type")
        raise StreamFailed(f"The stream's image ({content_type}, {len(png)} bytes) is not a PNG.")
    return png


# --- the demo's side: boto3 and the progress bar --------------------------------------------------


class StepsBar(ProgressColumn):
    """A bar and "k/n steps" for a task with a total (a streamed invocation); nothing for the spinners."""

    WIDTH = 30

    def render(self, task: Task) -> Text:
        if not task.total:
            return Text("")
        done = min(self.WIDTH, round(self.WIDTH * task.completed / task.total))
        return Text.assemble(
            ("━" * done, "green"),
            ("━" * (self.WIDTH - done), "dim"),
            f" {task.completed:.0f}/{task.total:.0f} steps",
        )


def invoke_streamed(
    rt: Any, endpoint: str, body: bytes, requests: int, progress: Progress
) -> list[tuple[float, StreamedImage]]:
    """`requests` InvokeEndpointWithResponseStream calls (Accept application/x-ndjson), each with a
    progress task whose bar follows the streamed steps; (seconds to the image, what came) for each."""
    from botocore.exceptions import EventStreamError

    runs: list[tuple[float, StreamedImage]] = []
    for number in range(1, requests + 1):
        task = progress.add_task(f"Streaming from {endpoint} (request {number}/{requests})", total=None)

        def advance(step: int, steps: int, task: Any = task) -> None:
            progress.update(task, total=steps, completed=step)

        try:
            started = time.monotonic()
            response = rt.invoke_endpoint_with_response_stream(
                EndpointName=endpoint, Body=body, ContentType="application/json", Accept=NDJSON
            )
            stream = response["Body"]
            try:
                streamed = read_stream(stream, advance, started)
            except EventStreamError as exc:
                error = exc.response.get("Error", {})
                raise StreamFailed(
                    f"The stream from {endpoint} broke: {error.get('Code')}: {error.get('Message')}"
                ) from exc
            finally:
                stream.close()
            runs.append((time.monotonic() - started, streamed))
        finally:
            progress.remove_task(task)
            progress.refresh()  # lines printed next must not carry the finished bar's last frame
    return runs
