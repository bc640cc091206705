"""The sample's aiohttp server on the host with the tiny random pipeline (CPU torch): no Docker.

The pipeline is built and loaded once per module; tests that need to see the server before the model is
loaded, or while a generation runs, pass a loader or a generate function that waits on an event.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestClient, TestServer

from sample_container.sd_server.inputs import GenerationRequest
from sample_container.sd_server.server import (
    CUSTOM_ATTRIBUTES,
    MAX_BODY_BYTES,
    STATE,
    Server,
    make_app,
)

pytest.importorskip("diffusers")
pytest.importorskip("torch")
Image = pytest.importorskip("PIL.Image")

from sample_container.model_builder import build_tiny_model  # noqa: E402
from sample_container.sd_server.pipeline import generate as generate_png  # noqa: E402
from sample_container.sd_server.pipeline import load_pipeline  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SMALL = {"prompt": "a red bicycle", "num_inference_steps": 2, "height": 64, "width": 64}
#: bound on every wait in these tests (none is expected to come near it)
WAIT_S = 30.0


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("sd") / "model", seed=0)


@pytest.fixture(scope="module")
def pipe(model_dir: Path) -> Iterator[Any]:
    import torch

    threads = torch.get_num_threads()
    yield load_pipeline(model_dir, "cpu")  # one thread: the tiny model runs faster (see cpu_threads_for)
    torch.set_num_threads(threads)


def test_the_tiny_model_runs_on_one_cpu_thread(pipe: Any) -> None:
    import torch

    if not os.environ.get("OMP_NUM_THREADS"):
        assert torch.get_num_threads() == 1


def loaded(pipe: Any) -> Callable[[Path, str | None], Any]:
    return lambda model_dir, device: pipe


async def in_thread(event: threading.Event) -> None:
    """Wait for a threading.Event without blocking the loop."""
    assert await asyncio.to_thread(event.wait, WAIT_S), "timed out"


async def settled(client: TestClient) -> None:
    await asyncio.wait_for(client.app[STATE].settled.wait(), WAIT_S)  # type: ignore[index]


@pytest.fixture
async def client(model_dir: Path, pipe: Any) -> AsyncIterator[TestClient]:
    async with TestClient(TestServer(make_app(model_dir, loader=loaded(pipe)))) as c:
        await settled(c)
        yield c


class Gate:
    """A generate function that announces each call and waits to be released; counts overlaps."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.running = 0
        self.most_at_once = 0
        self.lock = threading.Lock()

    def __call__(self, pipe: Any, request: GenerationRequest) -> bytes:
        with self.lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        try:
            self.started.set()
            assert self.release.wait(WAIT_S)
            return generate_png(pipe, request)
        finally:
            with self.lock:
                self.running -= 1


# ------------------------------------------------------------------------------------------- /ping


async def test_ping_is_503_until_the_pipeline_is_loaded_then_200(model_dir: Path, pipe: Any) -> None:
    gate = threading.Event()

    def slow_loader(path: Path, device: str | None) -> Any:
        assert gate.wait(WAIT_S)
        return pipe

    async with TestClient(TestServer(make_app(model_dir, loader=slow_loader))) as c:
        r = await c.get("/ping")
        assert (r.status, await r.read()) == (503, b"")
        r = await c.post("/invocations", json=SMALL)
        assert r.status == 503
        assert "still loading" in (await r.json())["error"]
        gate.set()
        await settled(c)
        r = await c.get("/ping")
        assert (r.status, await r.read()) == (200, b"")


async def test_the_real_loader_loads_the_tiny_model(model_dir: Path) -> None:
    async with TestClient(TestServer(make_app(model_dir, device="cpu"))) as c:
        await settled(c)
        assert (await c.get("/ping")).status == 200
        assert c.app[STATE].load_seconds is not None  # type: ignore[index]


async def test_a_failed_load_answers_ping_500_with_the_reason(tmp_path: Path) -> None:
    reasons: list[str] = []
    app = make_app(tmp_path / "empty", device="cpu", on_load_failure=reasons.append)
    async with TestClient(TestServer(app)) as c:
        await settled(c)
        r = await c.get("/ping")
        assert r.status == 500
        assert "model_index.json" in (await r.json())["error"]
        r = await c.post("/invocations", json=SMALL)
        assert r.status == 500
        assert len(reasons) == 1 and "ModelLoadError" in reasons[0]


# ------------------------------------------------------------------------------------ /invocations


async def test_png_by_default(client: TestClient) -> None:
    r = await client.post("/invocations", json={**SMALL, "seed": 7})
    assert r.status == 200
    assert r.content_type == "image/png"
    assert r.headers[CUSTOM_ATTRIBUTES] == "seed=7"
    image = Image.open(io.BytesIO(await r.read()))
    image.verify()
    assert (image.format, image.size) == ("PNG", (64, 64))


async def test_json_with_a_base64_png_when_accept_asks(client: TestClient) -> None:
    body = {**SMALL, "seed": 7, "height": 70}
    r = await client.post("/invocations", json=body, headers={"Accept": "application/json"})
    assert r.status == 200 and r.content_type == "application/json"
    answer = await r.json()
    assert {k: answer[k] for k in ("seed", "height", "width", "num_inference_steps", "guidance_scale")} == {
        "seed": 7,
        "height": 64,  # rounded down to a multiple of 8
        "width": 64,
        "num_inference_steps": 2,
        "guidance_scale": 7.5,
    }
    png = base64.b64decode(answer["image"])
    assert Image.open(io.BytesIO(png)).size == (64, 64)
    as_png = await client.post("/invocations", json={**body, "height": 64})
    assert await as_png.read() == png


async def test_same_seed_same_bytes_other_seed_other_bytes(client: TestClient) -> None:
    async def image(seed: int) -> bytes:
        r = await client.post("/invocations", json={**SMALL, "seed": seed})
        assert r.status == 200
        return await r.read()

    first = await image(11)
    assert await image(11) == first
    assert await image(12) != first


async def test_a_streamed_answer_has_a_line_per_step_then_the_same_png(client: TestClient, pipe: Any) -> None:
    """The real tiny pipeline, streamed: one progress line per denoising pass (diffusers'
    callback_on_step_end; SD 1.x's PNDM scheduler makes num_inference_steps + 1), then the image line
    whose PNG is byte for byte the image/png answer for the same seed."""
    body = {**SMALL, "seed": 7, "num_inference_steps": 4}
    r = await client.post("/invocations", json=body, headers={"Accept": "application/x-ndjson"})
    assert r.status == 200 and r.content_type == "application/x-ndjson"
    assert r.headers["Transfer-Encoding"] == "chunked" and r.headers[CUSTOM_ATTRIBUTES] == "seed=7"
    lines = [json.loads(line) for line in (await r.read()).splitlines()]
    *progress, last = lines
    steps = pipe.num_timesteps
    assert steps == 5
    assert progress == [{"event": "progress", "step": i, "steps": steps} for i in range(1, steps + 1)]
    assert last["event"] == "image" and last["content_type"] == "image/png"
    assert (last["seed"], last["num_inference_steps"], last["height"], last["width"]) == (7, 4, 64, 64)
    png = base64.b64decode(last["image"])
    assert Image.open(io.BytesIO(png)).size == (64, 64)
    whole = await client.post("/invocations", json=body)
    assert await whole.read() == png


async def test_a_random_seed_is_reported(client: TestClient) -> None:
    r = await client.post("/invocations", json=SMALL, headers={"Accept": "application/json"})
    seed = (await r.json())["seed"]
    assert r.headers[CUSTOM_ATTRIBUTES] == f"seed={seed}"
    again = await client.post(
        "/invocations", json={**SMALL, "seed": seed}, headers={"Accept": "application/json"}
    )
    assert (await again.json())["image"] == (await r.json())["image"]


async def test_a_missing_content_type_is_tolerated(client: TestClient) -> None:
    r = await client.post("/invocations", data=json.dumps(SMALL).encode(), skip_auto_headers=["Content-Type"])
    assert r.status == 200 and r.content_type == "image/png"


@pytest.mark.parametrize(
    ("body", "headers", "status", "reason"),
    [
        (b"{not json", {}, 400, "not valid JSON"),
        (b"", {}, 400, "the body is empty"),
        (b'{"prompt": "x", "steps": 3}', {}, 400, "unknown field(s) steps"),
        (b'{"num_inference_steps": 3}', {}, 400, '"prompt" is required'),
        (b'{"prompt": "x", "height": 4}', {}, 400, '"height" must be between 8'),
        (b'{"prompt": "x"}', {"Content-Type": "text/csv"}, 415, "application/json"),
        (
            b'{"prompt": "x"}',
            {"Accept": "text/csv"},
            406,
            "image/png, application/json or application/x-ndjson",
        ),
    ],
)
async def test_bad_requests_get_a_json_reason(
    client: TestClient, body: bytes, headers: dict[str, str], status: int, reason: str
) -> None:
    r = await client.post("/invocations", data=body, headers={"Content-Type": "application/json", **headers})
    assert r.status == status
    assert r.content_type == "application/json"
    assert reason in (await r.json())["error"]


async def test_a_body_at_the_payload_cap_is_accepted_one_byte_more_is_413(client: TestClient) -> None:
    raw = json.dumps({**SMALL, "seed": 1}).encode()
    padded = raw + b" " * (MAX_BODY_BYTES - len(raw))
    headers = {"Content-Type": "application/json"}
    r = await client.post("/invocations", data=padded, headers=headers)
    assert r.status == 200 and r.content_type == "image/png"
    r = await client.post("/invocations", data=padded + b" ", headers=headers)
    assert r.status == 413
    assert "larger than" in (await r.json())["error"]


async def test_generation_errors_are_500_with_a_reason(model_dir: Path, pipe: Any) -> None:
    def broken(pipe: Any, request: GenerationRequest) -> bytes:
        raise RuntimeError("CUDA out of memory")

    async with TestClient(TestServer(make_app(model_dir, loader=loaded(pipe), generate=broken))) as c:
        await settled(c)
        r = await c.post("/invocations", json=SMALL)
        assert r.status == 500
        assert (await r.json())["error"] == "generation failed: RuntimeError: CUDA out of memory"
        assert (await c.get("/ping")).status == 200


# ------------------------------------------------------------------------------------ concurrency


async def test_ping_is_answered_while_generations_run_one_at_a_time(model_dir: Path, pipe: Any) -> None:
    gate = Gate()
    async with TestClient(TestServer(make_app(model_dir, loader=loaded(pipe), generate=gate))) as c:
        await settled(c)
        first = asyncio.create_task(c.post("/invocations", json={**SMALL, "seed": 1}))
        await in_thread(gate.started)
        second = asyncio.create_task(c.post("/invocations", json={**SMALL, "seed": 2}))
        started = time.monotonic()
        r = await c.get("/ping")
        assert r.status == 200 and time.monotonic() - started < 0.25
        # the second request has been read and is waiting for the worker
        while c.app[STATE].in_flight < 2:  # type: ignore[index]
            await asyncio.sleep(0)
        assert gate.running == 1
        gate.release.set()
        answers = await asyncio.wait_for(asyncio.gather(first, second), WAIT_S)
        assert [a.status for a in answers] == [200, 200]
        assert gate.most_at_once == 1


# ------------------------------------------------------------------------------------- shutdown


@pytest.fixture
async def running(model_dir: Path, pipe: Any) -> AsyncIterator[tuple[Server, Gate]]:
    gate = Gate()
    server = Server(model_dir, host="127.0.0.1", port=0, loader=loaded(pipe), generate=gate, drain_s=WAIT_S)
    await server.start()
    await asyncio.wait_for(server.state.settled.wait(), WAIT_S)
    try:
        yield server, gate
    finally:
        gate.release.set()
        server.request_stop()
        await server.wait_and_drain()


async def test_stop_refuses_new_connections_and_answers_the_request_in_flight(
    running: tuple[Server, Gate],
) -> None:
    server, gate = running
    url = f"http://127.0.0.1:{server.port}"
    async with ClientSession() as session:
        in_flight = asyncio.create_task(session.post(f"{url}/invocations", json=SMALL))
        await in_thread(gate.started)
        server.request_stop("SIGTERM")
        drain = asyncio.create_task(server.wait_and_drain())
        await asyncio.wait_for(server.not_accepting.wait(), WAIT_S)
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", server.port)
        gate.release.set()
        answer = await asyncio.wait_for(in_flight, WAIT_S)
        assert answer.status == 200 and len(await answer.read()) > 0
        assert await asyncio.wait_for(drain, WAIT_S) == 0


async def test_the_drain_is_bounded(model_dir: Path, pipe: Any) -> None:
    gate = Gate()
    server = Server(model_dir, host="127.0.0.1", port=0, loader=loaded(pipe), generate=gate, drain_s=0.2)
    await server.start()
    await asyncio.wait_for(server.state.settled.wait(), WAIT_S)
    async with ClientSession() as session:
        in_flight = asyncio.create_task(
            session.post(f"http://127.0.0.1:{server.port}/invocations", json=SMALL)
        )
        await in_thread(gate.started)
        server.request_stop()
        started = time.monotonic()
        assert await asyncio.wait_for(server.wait_and_drain(), WAIT_S) == 0
        assert time.monotonic() - started < 2
        gate.release.set()  # the worker thread finishes on its own; its answer has nowhere to go
        with pytest.raises(Exception):  # noqa: B017 - the connection was closed under the request
            await (await asyncio.wait_for(in_flight, WAIT_S)).read()


def test_a_folder_packed_one_level_too_deep_is_explained(tmp_path: Path) -> None:
    from sample_container.sd_server.pipeline import ModelLoadError

    (tmp_path / "sd-v1-5").mkdir()
    (tmp_path / "sd-v1-5" / "model_index.json").write_text("{}")
    with pytest.raises(ModelLoadError, match=r"sd-v1-5/model_index.json is one level too deep"):
        load_pipeline(tmp_path, "cpu")


async def test_serve_exits_1_when_the_model_cannot_load(tmp_path: Path) -> None:
    server = Server(tmp_path, host="127.0.0.1", port=0, device="cpu")
    await server.start()
    assert await asyncio.wait_for(server.wait_and_drain(), WAIT_S) == 1


# ------------------------------------------------------------------------- the process, end to end


@pytest.fixture
def process(model_dir: Path) -> Iterator[subprocess.Popen[str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "sample_container"), "SAGEMAKER_BIND_TO_PORT": "0"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "sd_server", "serve", "--model-dir", str(model_dir), "--host", "127.0.0.1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(WAIT_S)
        assert proc.stdout is not None
        proc.stdout.close()


@pytest.mark.slow
def test_the_process_serves_and_exits_0_on_sigterm(process: subprocess.Popen[str]) -> None:
    import urllib.error
    import urllib.request

    assert process.stdout is not None
    lines: list[str] = []
    for line in process.stdout:  # bounded by the pytest timeout
        lines.append(line)
        if "listening on" in line:
            break
    assert lines and "listening on" in lines[-1], "".join(lines)
    port = int(lines[-1].rsplit(":", 1)[1])
    deadline = time.monotonic() + WAIT_S
    status = None
    while status != 200 and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2) as r:
                status = r.status
        except urllib.error.HTTPError as exc:
            status = exc.code
            assert status == 503
            time.sleep(0.05)  # polling interval while the model loads, not synchronisation
    assert status == 200
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/invocations",
        data=json.dumps({**SMALL, "seed": 5}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=WAIT_S) as r:
        assert r.headers["Content-Type"] == "image/png"
    process.send_signal(signal.SIGTERM)
    assert process.wait(WAIT_S) == 0
    rest = process.stdout.read()
    assert "SIGTERM: no new connections" in rest and "stopped in" in rest


def test_the_serve_command_is_the_only_command() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "sample_container")}
    done = subprocess.run(
        [sys.executable, "-m", "sd_server", "train"], env=env, capture_output=True, text=True, timeout=WAIT_S
    )
    assert done.returncode == 2 and "invalid choice: 'train'" in done.stderr


async def test_a_request_whose_body_is_still_arriving_at_sigterm_is_answered(
    model_dir: Path, pipe: Any
) -> None:
    """SageMaker's rule: a request in flight at SIGTERM that can finish in time gets its answer.
    aiohttp's own shutdown drops data arriving after it starts, so the drain must come first."""
    server = Server(model_dir, host="127.0.0.1", port=0, loader=loaded(pipe), drain_s=10.0)
    await server.start()
    await asyncio.wait_for(server.state.settled.wait(), WAIT_S)
    body = json.dumps(SMALL).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    head = (
        f"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    writer.write(head + body[:10])
    await writer.drain()

    async def handler_started() -> None:  # the request is in flight once its handler runs
        while server.state.active == 0:
            await asyncio.sleep(0.005)

    await asyncio.wait_for(handler_started(), WAIT_S)
    server.request_stop("SIGTERM")
    drain = asyncio.create_task(server.wait_and_drain())
    await asyncio.wait_for(server.not_accepting.wait(), WAIT_S)
    writer.write(body[10:])
    await writer.drain()
    status_line = await asyncio.wait_for(reader.readline(), WAIT_S)
    assert status_line.startswith(b"HTTP/1.1 200"), status_line
    writer.close()
    assert await asyncio.wait_for(drain, WAIT_S) == 0
