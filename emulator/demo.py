"""`smlocal demo`: the Stable Diffusion sample, end to end, on a fresh machine.

Steps, each timed: a Docker engine (started, on Debian installed, when none answers), the base image,
the wheelhouse and the sample image (sample_container/Dockerfile), a tiny random-weight Stable
Diffusion model.tar.gz (sample_container.model_builder), then an smlocal server in this process, and
through boto3, exactly as a user would: CreateModel (ModelDataUrl = the tar.gz), CreateEndpointConfig
(ml.m5.xlarge, or ml.g5.xlarge with --gpu), CreateEndpoint, wait for InService, InvokeEndpoint with a
prompt, the PNG written to --out. Then the endpoint is deleted and the server stopped, unless --keep.

The image build happens in a build folder (default .smlocal/build) that keeps the wheelhouse between
runs, so a second run builds from Docker's layer cache in seconds. emulator.cli builds DemoOptions.

torch comes in two builds, chosen when the image is built (the TORCH_VARIANT build argument, from
sample_container/torch-<variant>.txt): `cpu` (the default, a ~180 MB wheel) and `cuda` (PyPI's CUDA
build, several GB of wheels: only on request, `smlocal demo --gpu --torch cuda`). The image carries its
variant as the label smlocal.sample.torch, checked against the installed torch while building; the demo
reads it back and says which build serves.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import logging
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from emulator.config import DEFAULT_REGION, ServerConfig
from emulator.errors import SmlocalError

SAMPLE_IMAGE = "smlocal-sample/sd:latest"
#: The CUDA image gets its own tag, so that building it never replaces the CPU one.
SAMPLE_IMAGE_CUDA = "smlocal-sample/sd:cuda"
#: torch builds the image can hold; CPU is the default, and the only one tests and CI ever build.
TORCH_VARIANTS = ("cpu", "cuda")
DEFAULT_TORCH_VARIANT = "cpu"
#: The image label naming its torch build (set from the TORCH_VARIANT build argument).
TORCH_LABEL = "smlocal.sample.torch"
ENDPOINT_NAME = "sd-demo"
CPU_INSTANCE_TYPE = "ml.m5.xlarge"
GPU_INSTANCE_TYPE = "ml.g5.xlarge"
#: What goes into the image's build context besides the wheelhouse.
CONTEXT_FILES = ("Dockerfile", "requirements.txt", ".dockerignore", "torch-cpu.txt", "torch-cuda.txt")
CONTEXT_PACKAGE = "sd_server"
WHEELHOUSE = ".wheelhouse"
PYTORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"

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


@dataclass
class Timings:
    steps: dict[str, float] = field(default_factory=dict)
    requests: list[float] = field(default_factory=list)
    #: the image's torch build, from its label
    torch_build: str = "unknown"


# --- the sample image ----------------------------------------------------------------------------


def sample_dir() -> Path:
    """sample_container/ as installed (the source tree with an editable install)."""
    return Path(str(resources.files("sample_container")))


def _requirement_lines(path: Path) -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def check_variant(variant: str) -> str:
    if variant not in TORCH_VARIANTS:
        raise SmlocalError(f"Unknown torch build {variant!r}: one of {', '.join(TORCH_VARIANTS)}.")
    return variant


def requirements(source: Path | None = None, variant: str = DEFAULT_TORCH_VARIANT) -> list[str]:
    """The pinned requirement lines of the image: requirements.txt plus torch-<variant>.txt."""
    source = source or sample_dir()
    return _requirement_lines(source / "requirements.txt") + _requirement_lines(
        source / f"torch-{check_variant(variant)}.txt"
    )


def sample_tag(variant: str = DEFAULT_TORCH_VARIANT) -> str:
    return SAMPLE_IMAGE if check_variant(variant) == "cpu" else SAMPLE_IMAGE_CUDA


def build_args(variant: str = DEFAULT_TORCH_VARIANT, base_image: str | None = None) -> dict[str, str]:
    """The sample image's build arguments."""
    args = {"TORCH_VARIANT": check_variant(variant)}
    if base_image:
        args["BASE_IMAGE"] = base_image
    return args


def torch_build(image_labels: dict[str, str]) -> str:
    """Which torch build an image holds, from its label ("unknown" for an image built without one)."""
    variant = image_labels.get(TORCH_LABEL, "")
    return variant if variant in TORCH_VARIANTS else "unknown"


def describe_torch_build(variant: str, gpu: bool) -> str:
    """The demo's line about the image's torch build (and whether a GPU can be used by it)."""
    if variant == "cuda":
        return "torch build in the image: CUDA (uses the GPU when the engine passes one through)"
    if variant == "cpu":
        note = "; --gpu passes the GPU, but this build cannot use it: --torch cuda" if gpu else ""
        return f"torch build in the image: CPU only{note}"
    return f"torch build in the image: unknown (no {TORCH_LABEL} label)"


#: Host packages the model builder needs: the `sample` extra.
SAMPLE_EXTRA_MODULES = ("torch", "diffusers", "transformers")


def require_sample_extra() -> None:
    """One clear line (not a ModuleNotFoundError traceback) when the `sample` extra is missing."""
    missing = []
    for name in SAMPLE_EXTRA_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise SmlocalError(
            f"smlocal demo builds its model on this machine and needs {', '.join(missing)}: "
            "pip install 'smlocal[sample]'"
        )


def prepare_context(context: Path, source: Path | None = None) -> Path:
    """Copy the Dockerfile, requirements and sd_server into `context` (kept: its .wheelhouse)."""
    source = source or sample_dir()
    context.mkdir(parents=True, exist_ok=True)
    for name in CONTEXT_FILES:
        shutil.copyfile(source / name, context / name)
    shutil.rmtree(context / CONTEXT_PACKAGE, ignore_errors=True)
    shutil.copytree(
        source / CONTEXT_PACKAGE,
        context / CONTEXT_PACKAGE,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    return context


def prepare_wheels(context: Path, log: Log = print, variant: str = DEFAULT_TORCH_VARIANT) -> Path:
    """The wheelhouse for the image in context/.wheelhouse (reused while the requirements are unchanged).

    The CPU variant pins torch's CPU build: a plain `torch` from PyPI is the multi-GB CUDA build, and a
    CPU wheelhouse that got CUDA wheels anyway is refused rather than copied into an image."""
    from emulator.runtime.images import prepare_wheelhouse

    wanted = requirements(context, variant)
    if variant == "cuda":
        log("torch's CUDA build: several GB of wheels to download (once; kept in the wheelhouse)")
        wheelhouse = prepare_wheelhouse(wanted, context / WHEELHOUSE, log=log)
        torches = sorted(p.name for p in wheelhouse.glob("torch-*.whl"))
        if not torches or any("+cpu" in name for name in torches):
            raise SmlocalError(f"The CUDA wheelhouse {wheelhouse} has no CUDA torch wheel ({torches}).")
        return wheelhouse
    try:
        wheelhouse = prepare_wheelhouse(wanted, context / WHEELHOUSE, log=log)
    except SmlocalError as exc:
        raise SmlocalError(
            f"{exc.message}\nThe CPU build of torch comes from a local find-links folder or from "
            f"PyTorch's CPU index: PIP_EXTRA_INDEX_URL={PYTORCH_CPU_INDEX} smlocal demo"
        ) from exc
    cuda = sorted(p.name for p in wheelhouse.glob("nvidia_*.whl"))
    if cuda:
        raise SmlocalError(f"The wheelhouse {wheelhouse} holds CUDA wheels ({', '.join(cuda[:3])}, ...).")
    return wheelhouse


def build_sample_image(
    build_dir: Path,
    tag: str = SAMPLE_IMAGE,
    base_image: str | None = None,
    log: Log = print,
    variant: str = DEFAULT_TORCH_VARIANT,
) -> str:
    """Wheelhouse + `docker build` of the sample image; returns the image id.

    Each torch variant has its own context (build_dir/image, build_dir/image-cuda), so their wheelhouses
    never mix and a CPU build never sends CUDA wheels to the engine."""
    from emulator.runtime.images import build_image

    folder = "image" if check_variant(variant) == "cpu" else f"image-{variant}"
    context = prepare_context(build_dir / folder)
    prepare_wheels(context, log, variant)
    return build_image(context, tag, buildargs=build_args(variant, base_image), log=log)


def image_torch_build(image: str) -> str:
    """The torch build of a local image, read from its label."""
    from emulator.runtime.docker import DockerRuntime

    return torch_build(dict(DockerRuntime().inspect_image(image).labels))


def build_model(build_dir: Path, seed: int = 0) -> Path:
    """The tiny random-weight Stable Diffusion model as build_dir/sd-tiny/model.tar.gz."""
    require_sample_extra()
    # Imported by name: the builder needs the `sample` extra (torch, diffusers), untyped libraries
    # that mypy need not follow from here.
    builder = importlib.import_module("sample_container.model_builder")

    folder = build_dir / "sd-tiny" / "model"
    shutil.rmtree(folder, ignore_errors=True)
    # transformers and huggingface_hub print notes and progress bars: shown only when the build fails.
    chatter = io.StringIO()
    try:
        with contextlib.redirect_stdout(chatter), contextlib.redirect_stderr(chatter):
            builder.build_tiny_model(folder, seed=seed)
            return Path(builder.pack_model(folder, build_dir / "sd-tiny" / "model.tar.gz"))
    except Exception:
        sys.stderr.write(chatter.getvalue())
        raise


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
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    try:
        with Progress(*columns, console=console, transient=True) as progress:
            with _step(progress, timings, "engine", "Docker engine") as log:
                ensure_engine(log=log)
            with _step(progress, timings, "base", "Base image") as log:
                base = ensure_base_image(log=log)
            image = sample_tag(options.torch)
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
            image = sample_tag(options.torch)
            described = _deploy(sm, model_tar, instance_type, progress, timeout_s, image)
            log(f"{described['EndpointArn']}: {described['EndpointStatus']}")
        if described["EndpointStatus"] != "InService":
            reason = described.get("FailureReason", "(no FailureReason)")
            console.print(f"[bold red]Endpoint {ENDPOINT_NAME} failed:[/] {escape(reason)}", highlight=False)
            _print_logs(server.url, console)
            return 1
        png = _invoke(rt, options, timings, progress)
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
    body = {
        "prompt": options.prompt,
        "num_inference_steps": options.steps,
        "guidance_scale": 7.5,
        "seed": options.seed,
        "height": options.height,
        "width": options.width,
    }
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
