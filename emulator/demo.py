"""`smlocal demo`: the Stable Diffusion sample, end to end, on a fresh machine.

Steps, each timed: a Docker engine (started, on Debian installed, when none answers), the base image,
the wheelhouse and the sample image (sample_container/Dockerfile), a tiny random-weight Stable
Diffusion model.tar.gz (sample_container.model_builder), then an smlocal server in this process, and
through boto3, exactly as a user would: CreateModel (ModelDataUrl = the tar.gz), CreateEndpointConfig
(ml.m5.xlarge, or ml.g5.xlarge with --gpu), CreateEndpoint, wait for InService, InvokeEndpoint with a
prompt, the PNG written to --out. Then the endpoint is deleted and the server stopped, unless --keep.
With --stream the invocations use InvokeEndpointWithResponseStream (Accept: application/x-ndjson): a
progress bar moves with each denoising step the container streams, and the summary gives the time to
the first part (emulator.demo_stream reads the stream).

The image build happens in a build folder (default .smlocal/build) that keeps the wheelhouse between
runs, so a second run builds from Docker's layer cache in seconds. emulator.commands.standalone builds
DemoOptions.

The image and its model: emulator.sample_image.
"""

from __future__ import annotations

import json
import logging
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from emulator.config import DEFAULT_REGION, ServerConfig
from emulator.demo_stream import StepsBar, StreamedImage, invoke_streamed
from emulator.errors import SmlocalError
from emulator.sample_image import (
    DEFAULT_TORCH_VARIANT,
    build_model,
    build_sample_image,
    check_variant,
    describe_torch_build,
    image_torch_build,
    require_sample_extra,
    sample_tag,
)

ENDPOINT_NAME = "sd-demo"
CPU_INSTANCE_TYPE = "ml.m5.xlarge"
GPU_INSTANCE_TYPE = "ml.g5.xlarge"
Log = Callable[[str], None]


class DemoFailed(SmlocalError):
    """The demo could not finish (the endpoint failed, an invocation failed)."""


@dataclass(frozen=True)
class DemoOptions:
    out: Path = Path(".smlocal/sd-demo.png")
    prompt: str = "a lighthouse on a cliff at sunset, oil painting"
    gpu: bool = False
    torch: str = DEFAULT_TORCH_VARIANT
    port: int = 8090
    keep: bool = False
    state_dir: Path = Path(".smlocal/demo")
    build_dir: Path = Path(".smlocal/build")
    width: int = 64
    height: int = 64
    steps: int = 4
    seed: int = 0
    requests: int = 3
    startup_timeout_s: float = 480.0
    #: invoke with InvokeEndpointWithResponseStream and show the streamed steps (--stream)
    stream: bool = False
    #: the sample image's tag (None: the torch variant's, emulator.sample_image.sample_tag)
    image: str | None = None

    @property
    def image_tag(self) -> str:
        return self.image or sample_tag(self.torch)


@dataclass
class Timings:
    steps: dict[str, float] = field(default_factory=dict)
    requests: list[float] = field(default_factory=list)
    #: --stream: seconds from each call to its first PayloadPart, and what the first stream held
    first_parts: list[float] = field(default_factory=list)
    streamed: StreamedImage | None = None
    #: the image's torch build, from its label
    torch_build: str = "unknown"


# --- the run -------------------------------------------------------------------------------------


class _WarningsToConsole(logging.Handler):
    """Shows smlocal's warnings (e.g. GPU requested but no NVIDIA runtime) in the demo's output."""

    def __init__(self, console: Console) -> None:
        super().__init__(logging.WARNING)
        self.console = console
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        self.seen.append(message)
        self.console.print(f"[bold yellow]warning:[/] {escape(message)}", highlight=False)


@contextmanager
def _step(progress: Progress, timings: Timings, key: str, title: str) -> Iterator[Callable[[str], None]]:
    """One long step: a spinner line while it runs, a ✓ line with its time when done."""
    task = progress.add_task(title, total=None)
    started = time.monotonic()

    def log(line: str) -> None:
        progress.console.print(f"  [dim]{escape(line)}[/]", highlight=False)

    try:
        yield log
    finally:
        elapsed = time.monotonic() - started
        progress.remove_task(task)
    timings.steps[key] = elapsed
    progress.console.print(f"[green]✓[/] {escape(title)} [dim]({elapsed:.1f} s)[/]", highlight=False)


def run_demo(options: DemoOptions, console: Console | None = None) -> int:
    """Everything `smlocal demo` does; returns the exit status (non-zero when the endpoint fails)."""
    from emulator.runtime.engine import ensure_engine
    from emulator.runtime.images import ensure_base_image

    console = console or Console()
    check_variant(options.torch)
    require_sample_extra()  # before minutes of image building, not after
    timings = Timings()
    build_dir = options.build_dir.resolve()
    warnings = _WarningsToConsole(console)
    smlocal_log = logging.getLogger("emulator")
    smlocal_log.addHandler(warnings)
    # The server's INFO lines would interleave with the progress display; its warnings show (above).
    level = smlocal_log.level
    smlocal_log.setLevel(max(logging.WARNING, smlocal_log.getEffectiveLevel()))
    smlocal_log.propagate = False
    columns = (SpinnerColumn(), TextColumn("{task.description}"), StepsBar(), TimeElapsedColumn())
    try:
        with Progress(*columns, console=console, transient=True) as progress:
            with _step(progress, timings, "engine", "Docker engine") as log:
                ensure_engine(log=log)
            with _step(progress, timings, "base", "Base image") as log:
                base = ensure_base_image(log=log)
            image = options.image_tag
            with _step(progress, timings, "image", f"Sample image {image} (wheelhouse + build)") as log:
                build_sample_image(build_dir, tag=image, base_image=base, log=log, variant=options.torch)
                timings.torch_build = image_torch_build(image)
                log(describe_torch_build(timings.torch_build, options.gpu))
            with _step(progress, timings, "model", "Tiny Stable Diffusion model.tar.gz") as log:
                model_tar = build_model(build_dir, seed=options.seed)
                log(f"{model_tar} ({model_tar.stat().st_size / 1e6:.1f} MB)")
            return _serve_and_invoke(options, model_tar, progress, timings, console)
    finally:
        smlocal_log.removeHandler(warnings)
        smlocal_log.setLevel(level)
        smlocal_log.propagate = True


def _serve_and_invoke(
    options: DemoOptions, model_tar: Path, progress: Progress, timings: Timings, console: Console
) -> int:
    from emulator.server import BackgroundServer

    state_dir = options.state_dir.resolve()
    config = ServerConfig(state_dir=state_dir, port=options.port)
    config = _with_startup_timeout(config, options.startup_timeout_s)
    server = BackgroundServer(config)
    with _step(progress, timings, "server", "smlocal server") as log:
        server.start()
        log(f"serving SageMaker APIs on {server.url} (state dir {state_dir})")
    try:
        sm, rt = _clients(server.url)
        _remove_endpoint(sm, server)  # a previous --keep run's endpoint, restored from the state dir
        instance_type = GPU_INSTANCE_TYPE if options.gpu else CPU_INSTANCE_TYPE
        with _step(progress, timings, "deploy", f"Endpoint {ENDPOINT_NAME} on {instance_type}") as log:
            timeout_s = options.startup_timeout_s + 60
            image = options.image_tag
            described = _deploy(sm, model_tar, instance_type, progress, timeout_s, image)
            log(f"{described['EndpointArn']}: {described['EndpointStatus']}")
        if described["EndpointStatus"] != "InService":
            reason = described.get("FailureReason", "(no FailureReason)")
            console.print(f"[bold red]Endpoint {ENDPOINT_NAME} failed:[/] {escape(reason)}", highlight=False)
            _print_logs(server.url, console)
            return 1
        png = (_invoke_streamed if options.stream else _invoke)(rt, options, timings, progress)
        out = options.out.resolve()
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(png)
        _print_summary(options, out, len(png), timings, server.url, console)
        if options.keep:
            _wait_for_interrupt(server.url, console)
        return 0
    finally:
        if not options.keep:
            with _step(progress, timings, "cleanup", f"Delete {ENDPOINT_NAME}, stop the server"):
                try:
                    _remove_endpoint(_clients(server.url)[0], server)
                finally:
                    server.stop()
        else:
            server.stop()


def _with_startup_timeout(config: ServerConfig, startup_timeout_s: float) -> ServerConfig:
    from dataclasses import replace

    return replace(config, limits=config.limits.replace(startup_timeout_s=startup_timeout_s))


def _clients(url: str) -> tuple[Any, Any]:
    import boto3
    from botocore.config import Config

    config = Config(retries={"max_attempts": 1, "mode": "standard"}, read_timeout=300)
    session = boto3.session.Session(
        aws_access_key_id="smlocal", aws_secret_access_key="smlocal", region_name=DEFAULT_REGION
    )
    return (
        session.client("sagemaker", endpoint_url=url, config=config),
        session.client("sagemaker-runtime", endpoint_url=url, config=config),
    )


def _deploy(
    sm: Any, model_tar: Path, instance_type: str, progress: Progress, timeout_s: float, image: str
) -> Any:
    """CreateModel, CreateEndpointConfig, CreateEndpoint; poll DescribeEndpoint while Creating."""
    sm.create_model(
        ModelName=ENDPOINT_NAME,
        PrimaryContainer={"Image": image, "ModelDataUrl": model_tar.as_uri()},
    )
    variant = {
        "VariantName": "AllTraffic",
        "ModelName": ENDPOINT_NAME,
        "InitialInstanceCount": 1,
        "InstanceType": instance_type,
    }
    sm.create_endpoint_config(EndpointConfigName=ENDPOINT_NAME, ProductionVariants=[variant])
    sm.create_endpoint(EndpointName=ENDPOINT_NAME, EndpointConfigName=ENDPOINT_NAME)
    deadline = time.monotonic() + timeout_s
    while True:
        described = sm.describe_endpoint(EndpointName=ENDPOINT_NAME)
        if described["EndpointStatus"] != "Creating" or time.monotonic() > deadline:
            return described
        time.sleep(0.1)  # the poll interval (boto3's waiter polls every 30 s)


def _invoke(rt: Any, options: DemoOptions, timings: Timings, progress: Progress) -> bytes:
    body = _request_body(options)
    png = b""
    task = progress.add_task(f"Invoking {ENDPOINT_NAME} ({options.requests} request(s))", total=None)
    try:
        for _ in range(max(1, options.requests)):
            started = time.monotonic()
            response = rt.invoke_endpoint(
                EndpointName=ENDPOINT_NAME,
                Body=json.dumps(body).encode(),
                ContentType="application/json",
                Accept="image/png",
            )
            data = response["Body"].read()
            timings.requests.append(time.monotonic() - started)
            if not png:
                png = data
    finally:
        progress.remove_task(task)
    if not png.startswith(b"\x89PNG\r\n\x1a\n"):
        raise DemoFailed(f"The endpoint answered {len(png)} bytes that are not a PNG: {png[:200]!r}")
    return png


def _invoke_streamed(rt: Any, options: DemoOptions, timings: Timings, progress: Progress) -> bytes:
    body = json.dumps(_request_body(options)).encode()
    runs = invoke_streamed(rt, ENDPOINT_NAME, body, max(1, options.requests), progress)
    for seconds, streamed in runs:
        timings.requests.append(seconds)
        timings.first_parts.append(streamed.first_part_s)
    timings.streamed = runs[0][1]
    return runs[0][1].png


def _request_body(options: DemoOptions) -> dict[str, Any]:
    return {
        "prompt": options.prompt,
        "num_inference_steps": options.steps,
        "guidance_scale": 7.5,
        "seed": options.seed,
        "height": options.height,
        "width": options.width,
    }


def _remove_endpoint(sm: Any, server: Any) -> None:
    """Delete the demo's endpoint, config and model if they exist; wait until its containers are gone."""
    try:
        sm.delete_endpoint(EndpointName=ENDPOINT_NAME)
    except sm.exceptions.ClientError:
        pass
    if server.service is not None:
        server.call(server.service.wait_idle(), timeout_s=120)
    for call, key in ((sm.delete_endpoint_config, "EndpointConfigName"), (sm.delete_model, "ModelName")):
        try:
            call(**{key: ENDPOINT_NAME})
        except sm.exceptions.ClientError:
            pass


def _print_logs(url: str, console: Console, tail: int = 30) -> None:
    from emulator.admin_client import ServerUnreachable, admin_request

    try:
        resp = admin_request(url, "GET", f"endpoints/{ENDPOINT_NAME}/logs", params={"tail": tail}, timeout=10)
    except ServerUnreachable:
        return
    if resp.status_code == 200 and resp.text.strip():
        console.print(f"[bold]Last {tail} log lines of the container:[/]")
        console.print(resp.text.rstrip(), markup=False, highlight=False)


def _print_summary(
    options: DemoOptions, out: Path, size: int, timings: Timings, url: str, console: Console
) -> None:
    s = timings.steps
    requests = timings.requests
    per_request = f"first {requests[0] * 1000:.0f} ms"
    if len(requests) > 1:
        per_request += f", then median {statistics.median(requests[1:]) * 1000:.0f} ms"
    console.print(
        f"\n[bold green]Wrote {escape(str(out))}[/] ({size} bytes, {options.width}x{options.height} PNG, "
        f"{options.steps} steps, seed {options.seed}, prompt {escape(repr(options.prompt))})",
        highlight=False,
    )
    rows = [
        ("image build (wheelhouse + docker build)", f"{s.get('image', 0):.1f} s"),
        ("model build (model.tar.gz)", f"{s.get('model', 0):.1f} s"),
        ("deploy -> InService", f"{s.get('deploy', 0):.1f} s"),
        (f"per request ({len(requests)})", per_request),
        ("torch build in the image", timings.torch_build),
    ]
    if timings.first_parts:
        first = timings.first_parts
        to_first = f"first {first[0] * 1000:.0f} ms"
        if len(first) > 1:
            to_first += f", then median {statistics.median(first[1:]) * 1000:.0f} ms"
        rows.insert(4, ("time to first part (streamed)", to_first))
    if timings.streamed is not None:
        held = timings.streamed
        rows.insert(
            5,
            (
                "stream (first request)",
                f"{held.progress_lines} step lines of {held.steps}, then the image, in {held.parts} parts",
            ),
        )
    for label, value in rows:
        console.print(f"  {label:<42} {value}", highlight=False)
    if options.keep:
        console.print(
            f"\nEndpoint [bold]{ENDPOINT_NAME}[/] stays up on {url}:\n"
            f"  smlocal invoke {ENDPOINT_NAME} --endpoint-url {url} --content-type application/json "
            f'--accept image/png --body \'{{"prompt": "a red fox", "height": 64, "width": 64}}\' '
            f"-o fox.png",
            highlight=False,
        )


def _wait_for_interrupt(url: str, console: Console) -> None:
    console.print("Serving until Ctrl-C (the endpoint is then stopped; definitions stay in the state dir).")
    stop = threading.Event()
    try:
        stop.wait()
    except KeyboardInterrupt:
        console.print("stopping")
