"""The Stable Diffusion sample image: its build context, wheelhouse, torch build and model data.

torch comes in two builds, chosen when the image is built (the TORCH_VARIANT build argument, from
sample_container/torch-<variant>.txt): `cpu` (the default, a ~180 MB wheel) and `cuda` (PyPI's CUDA
build, several GB of wheels: only on request, `smlocal demo --gpu --torch cuda`). The image carries its
variant as the label smlocal.sample.torch, checked against the installed torch while building; the demo
reads it back and says which build serves. Each variant builds in its own context folder, so their
wheelhouses never mix. Used by `smlocal demo` (emulator.demo) and the tests' sample fixtures.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import shutil
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from emulator.errors import SmlocalError

SAMPLE_IMAGE = "smlocal-sample/sd:latest"
#: The CUDA image gets its own tag, so that building it never replaces the CPU one.
SAMPLE_IMAGE_CUDA = "smlocal-sample/sd:cuda"
#: torch builds the image can hold; CPU is the default, and the only one tests and CI ever build.
TORCH_VARIANTS = ("cpu", "cuda")
DEFAULT_TORCH_VARIANT = "cpu"
#: The image label naming its torch build (set from the TORCH_VARIANT build argument).
TORCH_LABEL = "smlocal.sample.torch"
#: What goes into the image's build context besides the wheelhouse.
CONTEXT_FILES = ("Dockerfile", "requirements.txt", ".dockerignore", "torch-cpu.txt", "torch-cuda.txt")
CONTEXT_PACKAGE = "sd_server"
WHEELHOUSE = ".wheelhouse"
PYTORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"

Log = Callable[[str], None]


# --- the image ------------------------------------------------------------------------------------


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
