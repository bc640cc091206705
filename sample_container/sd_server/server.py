"""The HTTP server: SageMaker's /ping and /invocations in front of one Stable Diffusion pipeline.

When and why:
- It listens at once and loads the pipeline in a background (daemon) thread: GET /ping answers 503
  with an empty body while the model loads, then 200 with an empty body, so SageMaker (and smlocal)
  see a live container that is not yet healthy rather than a refused connection.
- If loading fails, the error is logged with its traceback and /ping answers 500 with the reason in a
  JSON body. `make_app` only records the failure (and calls `on_load_failure`); `serve`, which runs the
  container, then stops and exits 1 at once: waiting for the startup health-check timeout (8 minutes on
  SageMaker) would tell nothing more. SageMaker reports either way that the primary container "did not
  pass the ping health check", and the container's log (CloudWatch, `smlocal logs`) holds the reason.
- POST /invocations parses the body on the event loop, then runs the generation in a single-worker
  thread pool: one GPU (or CPU) job at a time, later requests wait their turn, and the loop keeps
  answering /ping and accepting connections meanwhile (the contract's 2 s ping and 250 ms accept rules).
- With `Accept: application/x-ndjson` (or "stream": true in the body) the answer streams (chunked): a
  JSON line per denoising step as it ends, then the image (streaming.py). The status and headers go out
  with the first step's line, so a failure before it is still an ordinary 500. A client that leaves
  mid-stream stops the generation at its next step, and the worker takes the next request.
- On SIGTERM `serve` stops listening, lets the requests in flight finish (at most DRAIN_S, inside
  SageMaker's 30 s grace period), and returns 0.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import logging
import signal
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from .inputs import (
    DEFAULT_LIMITS,
    NDJSON,
    GenerationRequest,
    Limits,
    RequestError,
    check_content_type,
    output_format,
)
from .inputs import parse_request as parse_body
from .pipeline import generate as generate_png
from .pipeline import load_pipeline
from .streaming import StepRelay, StreamCancelled, error_line, image_line, progress_line

log = logging.getLogger("sd_server")

#: SageMaker's request and response payload cap; a body of exactly this size must be accepted.
MAX_BODY_BYTES = 6 * 1024 * 1024
#: How long requests in flight may run after SIGTERM (SageMaker kills the container 30 s after it).
DRAIN_S = 25.0
DEFAULT_PORT = 8080
#: SageMaker returns this response header to the caller as InvokeEndpoint's CustomAttributes.
CUSTOM_ATTRIBUTES = "X-Amzn-SageMaker-Custom-Attributes"

Loader = Callable[[Path, str | None], Any]
#: generate(pipe, request) -> PNG bytes; a streamed request also passes on_step= (pipeline.generate)
Generate = Callable[..., bytes]


@dataclass
class ModelState:
    """The pipeline's lifecycle as the handlers see it; changed only on the event loop."""

    status: Literal["loading", "ready", "failed"] = "loading"
    pipe: Any = None
    error: str | None = None
    load_seconds: float | None = None
    in_flight: int = 0
    #: requests whose handler runs, from the end of their headers (a body may still be arriving)
    active: int = 0
    #: set while no request is active (the drain waits on it)
    quiet: asyncio.Event = field(default_factory=asyncio.Event)
    #: the last /ping status logged (see QuietAccessLogger)
    last_ping_status: int | None = None
    #: set once loading has ended, either way (tests and the GPU check wait on it)
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="sd-generate")
    )


STATE = web.AppKey("sd_state", ModelState)


def json_error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


class QuietAccessLogger(AbstractAccessLogger):
    """One line per request, except pings: SageMaker sends one every few seconds, so a /ping is logged
    only when its status differs from the previous one's (503 while loading, then the first 200)."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        if request.path == "/ping" and isinstance(request, web.Request) and STATE in request.app:
            state = request.app[STATE]  # aiohttp makes one logger per connection: remember it here
            if response.status == state.last_ping_status:
                return
            state.last_ping_status = response.status
        self.logger.info(
            '%s "%s %s" %d %.3fs', request.remote, request.method, request.path_qs, response.status, time
        )


# -------------------------------------------------------------------------------------- handlers


async def ping(request: web.Request) -> web.Response:
    state = request.app[STATE]
    if state.status == "ready":
        return web.Response(status=200)
    if state.status == "loading":
        return web.Response(status=503)
    return json_error(500, f"the model failed to load: {state.error}")


def _make_invocations(limits: Limits, generate: Generate) -> Callable[[web.Request], Any]:
    async def invocations(request: web.Request) -> web.StreamResponse:
        state = request.app[STATE]
        try:
            check_content_type(request.headers.get("Content-Type"))
            fmt = output_format(request.headers.get("Accept"))
            body = await request.read()
            job = parse_body(body, limits)
        except RequestError as exc:
            return json_error(exc.status, exc.message)
        except web.HTTPRequestEntityTooLarge:
            return json_error(413, f"the body is larger than {MAX_BODY_BYTES} bytes")
        if state.status == "loading":
            return json_error(503, "the model is still loading: retry once GET /ping answers 200")
        if state.status == "failed":
            return json_error(500, f"the model failed to load: {state.error}")
        headers = {CUSTOM_ATTRIBUTES: f"seed={job.seed}"}
        if fmt == "ndjson" or job.stream:
            return await _stream(request, state, job, generate, headers)
        state.in_flight += 1
        started = time.monotonic()
        try:
            loop = asyncio.get_running_loop()
            png = await loop.run_in_executor(state.executor, generate, state.pipe, job)
        except Exception as exc:
            log.exception("generation failed for %s", job)
            return json_error(500, f"generation failed: {type(exc).__name__}: {exc}")
        finally:
            state.in_flight -= 1
        _log_generated(job, time.monotonic() - started, len(png))
        if fmt == "png":
            return web.Response(body=png, content_type="image/png", headers=headers)
        return web.json_response(_json_answer(job, png), headers=headers)

    return invocations


def _json_answer(job: GenerationRequest, png: bytes) -> dict[str, Any]:
    """The application/json answer (and the fields of a stream's image line)."""
    return {
        "image": base64.b64encode(png).decode("ascii"),
        "content_type": "image/png",
        "seed": job.seed,
        "height": job.height,
        "width": job.width,
        "num_inference_steps": job.num_inference_steps,
        "guidance_scale": job.guidance_scale,
    }


def _log_generated(job: GenerationRequest, seconds: float, size: int) -> None:
    log.info(
        "generated %dx%d, %d steps, guidance %g, seed %d in %.2f s (%d bytes)",
        job.width,
        job.height,
        job.num_inference_steps,
        job.guidance_scale,
        job.seed,
        seconds,
        size,
    )


async def _stream(
    request: web.Request,
    state: ModelState,
    job: GenerationRequest,
    generate: Generate,
    headers: dict[str, str],
) -> web.StreamResponse:
    """The streamed answer (streaming.py): a line per step as the worker reports it, then the image."""
    loop = asyncio.get_running_loop()
    relay = StepRelay(loop)
    started = time.monotonic()
    state.in_flight += 1
    work = functools.partial(generate, state.pipe, job, on_step=relay.on_step)
    future: asyncio.Future[bytes] = loop.run_in_executor(state.executor, work)

    def finished(done: asyncio.Future[bytes]) -> None:
        # Counted until the worker is done, also when the client left first (the worker stops at the
        # end of its current step); the exception is retrieved here, as nobody may await it.
        state.in_flight -= 1
        relay.close()
        error = None if done.cancelled() else done.exception()
        if isinstance(error, StreamCancelled):
            log.info("the streamed generation (seed %d) ended early: %s", job.seed, error)

    future.add_done_callback(finished)
    response: web.StreamResponse | None = None
    lines = 0

    async def start() -> web.StreamResponse:
        answer = web.StreamResponse(headers=headers)
        answer.content_type = NDJSON
        answer.enable_chunked_encoding()
        await answer.prepare(request)
        return answer

    try:
        async for step in relay.steps():
            response = response or await start()
            await response.write(progress_line(step.step, step.steps))
            lines += 1
        try:
            png = await future
        except Exception as exc:
            log.exception("generation failed for %s (streamed, after %d step line(s))", job, lines)
            message = f"generation failed: {type(exc).__name__}: {exc}"
            if response is None:
                return json_error(500, message)
            await response.write(error_line(message))
            await response.write_eof()
            return response
        response = response or await start()
        await response.write(image_line(_json_answer(job, png)))
        await response.write_eof()
        _log_generated(job, time.monotonic() - started, len(png))
        return response
    except (ConnectionError, asyncio.CancelledError) as exc:
        relay.cancel()
        log.info(
            "the client of a streamed answer went away after %d step line(s): the generation stops (%s)",
            lines,
            type(exc).__name__,
        )
        if isinstance(exc, asyncio.CancelledError):
            raise
        # aiohttp's own prepare/write_eof on it fails quietly (ConnectionError): the connection is gone
        return response or json_error(500, "the client went away")
    finally:
        if not future.done():
            relay.cancel()


# ------------------------------------------------------------------------------------ loading


def _start_loading(
    app: web.Application,
    model_dir: Path,
    device: str | None,
    loader: Loader,
    on_failure: Callable[[str], None],
) -> None:
    """Load in a daemon thread (a model still loading never holds up the exit) and report on the loop."""
    state = app[STATE]
    loop = asyncio.get_running_loop()

    def settle(pipe: Any, error: BaseException | None, seconds: float) -> None:
        state.load_seconds = seconds
        if error is None:
            state.pipe, state.status = pipe, "ready"
            log.info(
                "pipeline loaded from %s in %.2f s on %s (%s): /ping answers 200",
                model_dir,
                seconds,
                getattr(pipe, "device", "?"),
                getattr(pipe, "dtype", "?"),
            )
        else:
            state.error, state.status = f"{type(error).__name__}: {error}", "failed"
            log.error(
                "loading the pipeline from %s failed after %.2f s: /ping answers 500",
                model_dir,
                seconds,
                exc_info=error,
            )
            on_failure(state.error)
        state.settled.set()

    def work() -> None:
        started = time.monotonic()
        pipe: Any = None
        error: BaseException | None = None
        try:
            pipe = loader(model_dir, device)
        except BaseException as exc:  # noqa: BLE001 - reported to the loop, whatever it is
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is waiting any more
            loop.call_soon_threadsafe(settle, pipe, error, time.monotonic() - started)

    log.info("loading the pipeline from %s (device: %s)", model_dir, device or "auto")
    threading.Thread(target=work, name="sd-load", daemon=True).start()


@web.middleware
async def _count_active(request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
    """Count every request from the end of its headers, so a drain waits for one whose body is still
    arriving (aiohttp's own shutdown drops data that arrives after it starts)."""
    state = request.app[STATE]
    state.active += 1
    state.quiet.clear()
    try:
        response: web.StreamResponse = await handler(request)
        return response
    finally:
        state.active -= 1
        if state.active == 0:
            state.quiet.set()


def make_app(
    model_dir: Path,
    device: str | None = None,
    *,
    limits: Limits = DEFAULT_LIMITS,
    loader: Loader = load_pipeline,
    generate: Generate = generate_png,
    on_load_failure: Callable[[str], None] | None = None,
) -> web.Application:
    """The aiohttp application: /ping and /invocations for the pipeline in `model_dir`.

    Loading starts when the application starts (AppRunner.setup, or a test client). `loader` and
    `generate` are the pipeline module's functions unless a test replaces them (e.g. a loader that waits
    on an event, to observe /ping 503). `on_load_failure(reason)` runs on the loop when loading fails.
    """
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[_count_active])
    app[STATE] = ModelState()
    app[STATE].quiet.set()

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        _start_loading(app, Path(model_dir), device, loader, on_load_failure or (lambda reason: None))
        yield
        # a generation past the drain budget keeps its thread; the process exits without joining it
        app[STATE].executor.shutdown(wait=False, cancel_futures=True)

    app.cleanup_ctx.append(lifecycle)
    app.router.add_get("/ping", ping)
    app.router.add_post("/invocations", _make_invocations(limits, generate))
    return app


# ------------------------------------------------------------------------------------ serving


class Server:
    """One app served on host:port, stopped by `stop()` with a drain of at most `drain_s`."""

    def __init__(
        self,
        model_dir: Path,
        *,
        host: str = "0.0.0.0",
        port: int = DEFAULT_PORT,
        device: str | None = None,
        limits: Limits = DEFAULT_LIMITS,
        drain_s: float = DRAIN_S,
        loader: Loader = load_pipeline,
        generate: Generate = generate_png,
    ) -> None:
        self.host, self.port, self.drain_s = host, port, drain_s
        self.exit_code = 0
        self.stopping = asyncio.Event()
        #: set once the listening socket is closed (draining has begun)
        self.not_accepting = asyncio.Event()
        self.app = make_app(
            model_dir,
            device,
            limits=limits,
            loader=loader,
            generate=generate,
            on_load_failure=self._load_failed,
        )
        self.runner = web.AppRunner(
            self.app, handle_signals=False, shutdown_timeout=0.1, access_log_class=QuietAccessLogger
        )

    @property
    def state(self) -> ModelState:
        return self.app[STATE]

    def _load_failed(self, reason: str) -> None:
        log.error("exiting 1: the model failed to load (%s)", reason)
        self.exit_code = 1
        self.stopping.set()

    def request_stop(self, why: str = "stop requested") -> None:
        if not self.stopping.is_set():
            log.info("%s: no new connections; draining %d active request(s)", why, self.state.active)
        self.stopping.set()

    async def start(self) -> int:
        """Listen (port 0: any free port) and start loading; returns the port."""
        await self.runner.setup()
        site = web.TCPSite(self.runner, self.host, self.port, backlog=1024)
        await site.start()
        addresses = self.runner.addresses  # the bound port, when 0 was asked for
        if addresses:
            self.port = int(addresses[0][1])
        log.info("listening on %s:%d", self.host, self.port)
        return self.port

    async def wait_and_drain(self) -> int:
        """Wait for a stop request, stop listening, drain, clean up; returns the exit code."""
        await self.stopping.wait()
        started = time.monotonic()
        for site in list(self.runner.sites):
            await site.stop()  # closes the listening socket; open connections keep working
        self.not_accepting.set()
        # Drain here, not in runner.cleanup(): aiohttp's shutdown ignores data arriving after it
        # starts, so a request whose body is still on its way would never complete.
        try:
            await asyncio.wait_for(self.state.quiet.wait(), timeout=self.drain_s)
        except TimeoutError:
            log.warning(
                "%d request(s) still active after %.0f s: stopping anyway", self.state.active, self.drain_s
            )
        await self.runner.cleanup()
        log.info("stopped in %.2f s (exit %d)", time.monotonic() - started, self.exit_code)
        return self.exit_code


async def serve(
    model_dir: Path,
    *,
    host: str = "0.0.0.0",
    port: int = DEFAULT_PORT,
    device: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
    drain_s: float = DRAIN_S,
) -> int:
    """Run the server until SIGTERM (or SIGINT), then drain and return the exit code (0; 1: load failed)."""
    server = Server(model_dir, host=host, port=port, device=device, limits=limits, drain_s=drain_s)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, server.request_stop, signal.Signals(sig).name)
    await server.start()
    return await server.wait_and_drain()
