"""The sample server's streamed answer (Accept: application/x-ndjson) without torch: the line format, the
relay from the generation thread to the event loop, and the real aiohttp server writing each line as its
step ends, with a generate function whose steps a test releases one by one."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestClient, TestServer

from sample_container.sd_server.inputs import NDJSON, GenerationRequest
from sample_container.sd_server.server import CUSTOM_ATTRIBUTES, STATE, Server, make_app
from sample_container.sd_server.streaming import (
    StepRelay,
    StreamCancelled,
    error_line,
    image_line,
    progress_line,
)

WAIT_S = 30.0
FAKE_PNG = b"\x89PNG\r\n\x1a\nnot really an image"
SMALL = {"prompt": "a red bicycle", "num_inference_steps": 2, "height": 64, "width": 64, "seed": 7}
STREAM = {"Accept": NDJSON}


# ------------------------------------------------------------------------------------ the lines


def test_each_line_is_one_compact_json_object_ending_in_a_newline() -> None:
    assert progress_line(3, 21) == b'{"event":"progress","step":3,"steps":21}\n'
    assert error_line('generation failed: "x"') == b'{"event":"error","error":"generation failed: \\"x\\""}\n'
    line = image_line({"image": "aGk=", "content_type": "image/png", "seed": 7})
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {"event": "image", "image": "aGk=", "content_type": "image/png", "seed": 7}


def test_a_prompt_with_newlines_still_gives_one_line() -> None:
    line = error_line("generation failed: line one\nline two")
    assert line.count(b"\n") == 1 and json.loads(line)["error"].endswith("line one\nline two")


# ------------------------------------------------------------------------------------ the relay


async def test_steps_from_a_thread_arrive_in_order_and_close_ends_them() -> None:
    relay = StepRelay(asyncio.get_running_loop())

    def work() -> None:
        for step in range(1, 6):
            relay.on_step(step, 5)

    await asyncio.to_thread(work)
    relay.close()
    assert [(s.step, s.steps) async for s in relay.steps()] == [(i, 5) for i in range(1, 6)]


async def test_after_cancel_the_next_step_raises_in_the_generation_thread() -> None:
    relay = StepRelay(asyncio.get_running_loop())
    relay.on_step(1, 4)
    relay.cancel()
    assert relay.cancelled
    with pytest.raises(StreamCancelled, match="stopped after step 1 of 4"):
        relay.on_step(2, 4)


def test_a_step_after_the_loop_closed_stops_the_generation() -> None:
    loop = asyncio.new_event_loop()
    relay = StepRelay(loop)
    loop.close()
    with pytest.raises(StreamCancelled, match="the server stopped"):
        relay.on_step(1, 2)
    assert relay.cancelled


# ----------------------------------------------------------------------- the server, step by step


class Stepper:
    """A generate function with `steps` steps, each waiting for its gate; records what happened."""

    def __init__(self, steps: int = 3, fail_before: int | None = None) -> None:
        self.steps = steps
        self.fail_before = fail_before
        self.gates = [threading.Event() for _ in range(steps)]
        self.reported: list[int] = []
        self.outcome: BaseException | bytes | None = None
        self.done = threading.Event()

    def release(self, *steps: int) -> None:
        for step in steps or range(1, self.steps + 1):
            self.gates[step - 1].set()

    def __call__(
        self, pipe: Any, request: GenerationRequest, on_step: Callable[[int, int], None] | None = None
    ) -> bytes:
        self.done.clear()
        try:
            for step, gate in enumerate(self.gates, 1):
                assert gate.wait(WAIT_S)
                if step == self.fail_before:
                    raise RuntimeError("CUDA out of memory")
                if on_step is not None:
                    on_step(step, self.steps)
                self.reported.append(step)
            self.outcome = FAKE_PNG
            return FAKE_PNG
        except BaseException as exc:
            self.outcome = exc
            raise
        finally:
            self.done.set()


class LogEvent(logging.Handler):
    """Sets `seen` when the sd_server logger emits a record containing `text`."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.DEBUG)
        self.text = text
        self.seen = threading.Event()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        if self.text in record.getMessage():
            self.seen.set()


async def in_thread(event: threading.Event) -> None:
    assert await asyncio.to_thread(event.wait, WAIT_S), "timed out"


async def until(condition: Callable[[], bool]) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.005)  # polls a condition the server sets; bounded below

    await asyncio.wait_for(poll(), WAIT_S)


def serve(stepper: Stepper) -> TestServer:
    return TestServer(make_app(Path("/nonexistent"), loader=lambda path, device: object(), generate=stepper))


@pytest.fixture
async def sd_logs() -> AsyncIterator[LogEvent]:
    handler = LogEvent("went away")
    logger = logging.getLogger("sd_server")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


async def started(client: TestClient) -> None:
    await asyncio.wait_for(client.app[STATE].settled.wait(), WAIT_S)  # type: ignore[index]


async def test_each_line_is_written_when_its_step_ends() -> None:
    stepper = Stepper(steps=3)
    async with TestClient(serve(stepper)) as client:
        await started(client)
        answer = asyncio.create_task(client.post("/invocations", json=SMALL, headers=STREAM))
        await asyncio.sleep(0)
        assert not answer.done()
        stepper.release(1)
        response = await asyncio.wait_for(answer, WAIT_S)  # the headers go out with the first line
        assert response.status == 200
        assert response.content_type == NDJSON
        assert response.headers["Transfer-Encoding"] == "chunked"
        assert response.headers[CUSTOM_ATTRIBUTES] == "seed=7"
        for step in (1, 2, 3):
            line = await asyncio.wait_for(response.content.readline(), WAIT_S)
            assert json.loads(line) == {"event": "progress", "step": step, "steps": 3}
            if step < 3:  # the line arrived while the next step was held: written as its step ended
                assert not stepper.done.is_set()
                stepper.release(step + 1)
        last = json.loads(await asyncio.wait_for(response.content.readline(), WAIT_S))
        assert last["event"] == "image" and base64.b64decode(last["image"]) == FAKE_PNG
        assert {k: last[k] for k in ("content_type", "seed", "height", "width", "num_inference_steps")} == {
            "content_type": "image/png",
            "seed": 7,
            "height": 64,
            "width": 64,
            "num_inference_steps": 2,
        }
        assert await response.content.read() == b""  # the stream ended there
        assert client.app[STATE].in_flight == 0  # type: ignore[index]


async def test_a_failure_before_the_first_step_is_an_ordinary_500() -> None:
    stepper = Stepper(steps=2, fail_before=1)
    stepper.release()
    async with TestClient(serve(stepper)) as client:
        await started(client)
        response = await client.post("/invocations", json=SMALL, headers=STREAM)
        assert response.status == 500 and response.content_type == "application/json"
        assert await response.json() == {"error": "generation failed: RuntimeError: CUDA out of memory"}
        assert (await client.get("/ping")).status == 200


async def test_a_failure_after_the_first_step_ends_the_stream_with_an_error_line() -> None:
    stepper = Stepper(steps=3, fail_before=2)
    stepper.release()
    async with TestClient(serve(stepper)) as client:
        await started(client)
        response = await client.post("/invocations", json=SMALL, headers=STREAM)
        assert response.status == 200
        lines = [json.loads(line) for line in (await response.read()).splitlines()]
        assert lines == [
            {"event": "progress", "step": 1, "steps": 3},
            {"event": "error", "error": "generation failed: RuntimeError: CUDA out of memory"},
        ]
        assert (await client.get("/ping")).status == 200


@pytest.mark.parametrize(
    ("cancels_handlers", "steps_made"),
    [(False, [1, 2]), (True, [1])],
    ids=["server-as-in-the-image", "handler-cancellation"],
)
async def test_a_client_that_leaves_stops_the_generation_and_frees_the_worker(
    sd_logs: LogEvent, cancels_handlers: bool, steps_made: list[int]
) -> None:
    """The image's Server (aiohttp without handler cancellation) notices at its next write and the
    generation stops one step later; where aiohttp cancels the handler on disconnect (handler_cancellation,
    as its TestServer does) it stops at the next step."""
    stepper = Stepper(steps=4)
    loader = lambda path, device: object()  # noqa: E731
    if cancels_handlers:
        test_server = serve(stepper)
        await test_server.start_server()
        port, runner, state = test_server.port, test_server.runner, test_server.app[STATE]  # type: ignore[index]
    else:
        server = Server(Path("/nonexistent"), host="127.0.0.1", port=0, loader=loader, generate=stepper)
        port, runner, state = await server.start(), server.runner, server.state
    try:
        await asyncio.wait_for(state.settled.wait(), WAIT_S)
        url = f"http://127.0.0.1:{port}"
        async with ClientSession() as session:
            answer = asyncio.create_task(session.post(f"{url}/invocations", json=SMALL, headers=STREAM))
            stepper.release(1)
            response = await asyncio.wait_for(answer, WAIT_S)
            assert json.loads(await response.content.readline())["step"] == 1
            response.close()
            assert runner is not None and runner.server is not None
            # the server saw the connection go (its handler may still run, without a transport)
            await until(lambda: all(c.transport is None for c in runner.server.connections))  # type: ignore[union-attr]
            if not cancels_handlers:
                stepper.release(2)  # its line cannot be written: the handler notices and cancels
            await in_thread(sd_logs.seen)
            stepper.release()
            await in_thread(stepper.done)
            assert isinstance(stepper.outcome, StreamCancelled), stepper.outcome
            assert stepper.reported == steps_made
            await until(lambda: state.in_flight == 0)
            assert not [r for r in sd_logs.records if r.levelno >= logging.ERROR]
            # the server and its single worker carry on: a ping, then a whole image
            async with session.get(f"{url}/ping") as ping:
                assert ping.status == 200
            async with session.post(f"{url}/invocations", json=SMALL) as whole:
                assert whole.status == 200 and await whole.read() == FAKE_PNG
    finally:
        if cancels_handlers:
            await test_server.close()
        else:
            server.request_stop()
            assert await asyncio.wait_for(server.wait_and_drain(), WAIT_S) == 0


async def test_a_body_with_stream_true_streams_whatever_the_accept() -> None:
    """For clients that cannot set Accept (or that ask as LLM servers are asked): "stream": true."""
    stepper = Stepper(steps=2)
    stepper.release()
    async with TestClient(serve(stepper)) as client:
        await started(client)
        for headers in ({}, {"Accept": "image/png"}, {"Accept": "application/json"}):
            response = await client.post("/invocations", json={**SMALL, "stream": True}, headers=headers)
            assert response.status == 200 and response.content_type == NDJSON
            events = [json.loads(line)["event"] for line in (await response.read()).splitlines()]
            assert events == ["progress", "progress", "image"]
        response = await client.post("/invocations", json={**SMALL, "stream": False})
        assert response.status == 200 and await response.read() == FAKE_PNG


async def test_without_the_ndjson_accept_nothing_streams() -> None:
    stepper = Stepper(steps=2)
    stepper.release()
    async with TestClient(serve(stepper)) as client:
        await started(client)
        for accept in ("*/*", "application/*", "image/png"):
            response = await client.post("/invocations", json=SMALL, headers={"Accept": accept})
            assert response.status == 200 and response.content_type != NDJSON
            assert "Transfer-Encoding" not in response.headers
