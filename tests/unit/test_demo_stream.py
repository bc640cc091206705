"""`smlocal demo --stream`'s reader: lines re-assembled across PayloadParts however they are cut, progress
callbacks as the lines arrive, the PNG from the image line, and a clear failure for anything else."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from rich.progress import Progress

from emulator.cli import build_parser
from emulator.demo import DemoOptions
from emulator.demo_stream import LineAssembler, StepsBar, StreamFailed, read_stream

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))


def line(**document: Any) -> bytes:
    return json.dumps(document).encode() + b"\n"


def answer(steps: int = 3) -> bytes:
    progress = b"".join(line(event="progress", step=i, steps=steps) for i in range(1, steps + 1))
    image = line(event="image", content_type="image/png", image=base64.b64encode(PNG).decode(), seed=0)
    return progress + image


def parts(data: bytes, *cuts: int) -> list[dict[str, Any]]:
    """`data` as PayloadPart events cut at these offsets."""
    edges = [0, *cuts, len(data)]
    return [{"PayloadPart": {"Bytes": data[a:b]}} for a, b in zip(edges, edges[1:], strict=False)]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        self.now += 0.25
        return self.now


def test_lines_span_parts_and_parts_hold_several_lines() -> None:
    lines = LineAssembler()
    assert lines.feed(b'{"a"') == []
    assert lines.feed(b": 1}\n{") == [b'{"a": 1}']
    assert lines.feed(b"") == []
    assert lines.feed(b'"b": 2}\n\n{"c": 3}\n') == [b'{"b": 2}', b"", b'{"c": 3}']
    assert lines.finish() == b""
    assert lines.feed(b"tail") == [] and lines.finish() == b"tail"


@pytest.mark.parametrize(
    "cuts",
    [(), (1,), (5, 6, 7), tuple(range(1, 200, 3)), (len(answer()) - 1,)],
    ids=["one-part", "first-byte", "tiny", "every-3-bytes", "last-byte"],
)
def test_the_stream_reads_the_same_however_it_is_cut(cuts: tuple[int, ...]) -> None:
    seen: list[tuple[int, int]] = []
    streamed = read_stream(
        parts(answer(), *cuts), lambda step, steps: seen.append((step, steps)), 100.0, Clock()
    )
    assert seen == [(1, 3), (2, 3), (3, 3)]
    assert streamed.png == PNG
    assert (streamed.progress_lines, streamed.steps, streamed.parts) == (3, 3, len(cuts) + 1)
    assert streamed.first_part_s == 0.25  # the clock read once, at the first part


def test_progress_is_reported_as_each_line_arrives() -> None:
    seen: list[int] = []

    def events() -> Iterator[dict[str, Any]]:
        yield from parts(line(event="progress", step=1, steps=2))
        assert seen == [1]  # reported before the next part was asked for
        yield from parts(line(event="progress", step=2, steps=2) + answer(2).split(b"\n")[-2] + b"\n")

    assert read_stream(events(), lambda step, steps: seen.append(step), 0.0).png == PNG
    assert seen == [1, 2]


def test_unknown_events_and_fields_are_skipped() -> None:
    events = [{"SomethingNew": {}}, *parts(line(event="queued", position=1) + answer(1))]
    assert read_stream(events, lambda step, steps: None, 0.0).png == PNG


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            line(event="progress", step=1, steps=2) + line(event="error", error="generation failed: OOM"),
            "The endpoint's stream reported: generation failed: OOM",
        ),
        (
            line(event="progress", step=1, steps=2),
            "The stream ended without an image line, after 1 part(s) and 1 progress line(s).",
        ),
        (
            line(event="progress", step=1, steps=2) + b'{"event": "ima',
            'The stream ended without an image line, after 1 part(s) and 1 progress line(s); it ended inside a line: b\'{"event": "ima\'.',
        ),
        (b"not json\n", "The stream sent a line that is not JSON: b'not json'"),
        (b"[1, 2]\n", "The stream sent a line that is not a JSON object: b'[1, 2]'"),
        (
            line(event="progress", step="one", steps=2),
            "The stream sent a progress line whose 'step' is not an integer",
        ),
        (line(event="image", image="%%%"), "The stream's image line holds no base64 image"),
        (
            line(event="image", content_type="image/jpeg", image=base64.b64encode(b"JFIF").decode()),
            "The stream's image (image/jpeg, 4 bytes) is not a PNG.",
        ),
    ],
    ids=["error-line", "no-image", "cut-line", "not-json", "not-object", "bad-step", "bad-base64", "not-png"],
)
def test_what_is_not_the_samples_stream_fails_clearly(data: bytes, message: str) -> None:
    with pytest.raises(StreamFailed) as raised:
        read_stream(parts(data), lambda step, steps: None, 0.0)
    assert raised.value.message.startswith(message)


def test_an_empty_stream_fails_clearly() -> None:
    with pytest.raises(StreamFailed, match=r"without an image line, after 0 part\(s\) and 0 progress"):
        read_stream([], lambda step, steps: None, 0.0)


def test_the_bar_shows_steps_only_for_a_counted_task() -> None:
    progress = Progress()
    spinner = progress.add_task("Docker engine", total=None)
    counted = progress.add_task("Streaming", total=5, completed=2)
    bar = StepsBar()
    assert bar.render(progress.tasks[spinner]).plain == ""
    shown = bar.render(progress.tasks[counted]).plain
    assert shown == "━" * 30 + " 2/5 steps"
    assert [span.style for span in bar.render(progress.tasks[counted]).spans] == ["green", "dim"]


def test_demo_stream_is_an_option_off_by_default() -> None:
    assert DemoOptions().stream is False
    assert build_parser().parse_args(["demo"]).stream is False
    assert build_parser().parse_args(["demo", "--stream"]).stream is True


def test_the_command_passes_stream_on(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[DemoOptions] = []
    monkeypatch.setattr("emulator.demo.run_demo", lambda options: seen.append(options) or 0)
    args = build_parser().parse_args(["demo", "--stream", "--steps", "6"])
    assert args.func(args) == 0
    assert (seen[0].stream, seen[0].steps, seen[0].image_tag) == (True, 6, "smlocal-sample/sd:latest")
