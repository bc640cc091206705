"""The sample image's torch build: CPU unless asked for explicitly, and the demo says which one it has.

Nothing here downloads a wheel: prepare_wheelhouse is replaced by a recorder where it would run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from emulator import sample_image as demo
from emulator.cli import build_parser
from emulator.demo import DemoOptions
from emulator.runtime.images import pip_download_command
from emulator.sample_image import (
    build_args,
    describe_torch_build,
    prepare_context,
    requirements,
    sample_tag,
    torch_build,
)

SAMPLE = Path(__file__).resolve().parents[2] / "sample_container"


def _torch_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if re.match(r"torch\b", line)]


def test_cpu_is_the_default_everywhere() -> None:
    assert DemoOptions().torch == "cpu"
    assert build_parser().parse_args(["demo"]).torch == "cpu"
    assert build_args() == {"TORCH_VARIANT": "cpu"}
    assert build_args(base_image="b:1") == {"TORCH_VARIANT": "cpu", "BASE_IMAGE": "b:1"}
    assert sample_tag() == demo.SAMPLE_IMAGE
    dockerfile = (SAMPLE / "Dockerfile").read_text()
    assert "ARG TORCH_VARIANT=cpu\n" in dockerfile
    assert "LABEL smlocal.sample.torch=${TORCH_VARIANT}" in dockerfile


def test_the_default_requirements_pin_the_cpu_wheel_only() -> None:
    wanted = requirements(SAMPLE)
    assert _torch_lines(wanted) == ["torch==2.13.0+cpu"]
    command = pip_download_command(wanted, Path("/tmp/wheels"))
    assert "torch==2.13.0+cpu" in command
    assert not [arg for arg in command if arg.startswith("nvidia") or arg == "torch==2.13.0"]
    # requirements.txt itself names no torch: the variant's file does.
    assert _torch_lines(requirements(SAMPLE, "cuda")) == ["torch==2.13.0,!=2.13.0+cpu"]
    assert not _torch_lines(demo._requirement_lines(SAMPLE / "requirements.txt"))


def test_the_cuda_build_is_its_own_tag_and_context() -> None:
    assert sample_tag("cuda") == demo.SAMPLE_IMAGE_CUDA != demo.SAMPLE_IMAGE
    assert build_args("cuda") == {"TORCH_VARIANT": "cuda"}
    with pytest.raises(demo.SmlocalError, match="Unknown torch build 'rocm'"):
        build_args("rocm")


def test_a_default_build_asks_the_wheelhouse_for_cpu_wheels_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[list[str], Path]] = []

    def record(wanted: list[str], dest: Path, log: object = None) -> Path:
        seen.append((wanted, dest))
        dest.mkdir(parents=True, exist_ok=True)
        return dest

    built: list[tuple[Path, str, dict[str, str]]] = []

    def build(context: Path, tag: str, buildargs: dict[str, str], log: object = None) -> str:
        built.append((context, tag, buildargs))
        return "sha256:x"

    monkeypatch.setattr("emulator.runtime.images.prepare_wheelhouse", record)
    monkeypatch.setattr("emulator.runtime.images.build_image", build)
    demo.build_sample_image(tmp_path, base_image="base:1", log=lambda _: None)
    ((wanted, dest),) = seen
    assert _torch_lines(wanted) == ["torch==2.13.0+cpu"]
    assert dest == tmp_path / "image" / demo.WHEELHOUSE
    ((context, tag, args),) = built
    assert (context, tag) == (tmp_path / "image", demo.SAMPLE_IMAGE)
    assert args == {"TORCH_VARIANT": "cpu", "BASE_IMAGE": "base:1"}
    assert (context / "torch-cpu.txt").is_file() and (context / "torch-cuda.txt").is_file()


def test_a_cpu_wheelhouse_with_cuda_wheels_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def record(wanted: list[str], dest: Path, log: object = None) -> Path:
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "nvidia_cublas_cu12-12.0-py3-none-manylinux2014_x86_64.whl").write_bytes(b"")
        return dest

    monkeypatch.setattr("emulator.runtime.images.prepare_wheelhouse", record)
    context = prepare_context(tmp_path / "image", SAMPLE)
    with pytest.raises(demo.SmlocalError, match="holds CUDA wheels"):
        demo.prepare_wheels(context, log=lambda _: None)


def test_a_cuda_wheelhouse_holding_the_cpu_torch_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def record(wanted: list[str], dest: Path, log: object = None) -> Path:
        assert _torch_lines(wanted) == ["torch==2.13.0,!=2.13.0+cpu"]
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
        return dest

    monkeypatch.setattr("emulator.runtime.images.prepare_wheelhouse", record)
    context = prepare_context(tmp_path / "image-cuda", SAMPLE)
    with pytest.raises(demo.SmlocalError, match="has no CUDA torch wheel"):
        demo.prepare_wheels(context, log=lambda _: None, variant="cuda")


def test_the_label_says_which_build_and_the_demo_reports_it() -> None:
    assert torch_build({demo.TORCH_LABEL: "cpu"}) == "cpu"
    assert torch_build({demo.TORCH_LABEL: "cuda"}) == "cuda"
    assert torch_build({}) == "unknown"
    assert torch_build({demo.TORCH_LABEL: "weird"}) == "unknown"
    assert describe_torch_build("cpu", gpu=False) == "torch build in the image: CPU only"
    assert describe_torch_build("cpu", gpu=True) == (
        "torch build in the image: CPU only; --gpu passes the GPU, but this build cannot use it: --torch cuda"
    )
    assert describe_torch_build("cuda", gpu=True).startswith("torch build in the image: CUDA")
    assert "no smlocal.sample.torch label" in describe_torch_build("unknown", gpu=False)
