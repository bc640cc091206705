"""The sample image as the tests and `smlocal demo` build it by default holds torch's CPU build, and
says so in its label (the build refuses a label that does not match the installed torch)."""

from __future__ import annotations

import docker
import pytest

from emulator.sample_image import TORCH_LABEL, describe_torch_build, image_torch_build

pytestmark = pytest.mark.docker


def test_the_default_sample_image_is_the_cpu_build(
    sample_image: str, docker_engine: docker.DockerClient
) -> None:
    assert docker_engine.images.get(sample_image).labels[TORCH_LABEL] == "cpu"
    assert image_torch_build(sample_image) == "cpu"
    assert describe_torch_build(image_torch_build(sample_image), gpu=True).startswith(
        "torch build in the image: CPU only; --gpu passes the GPU, but this build cannot use it"
    )
    probe = "import torch; print(torch.__version__, torch.version.cuda)"
    out = docker_engine.containers.run(
        sample_image, ["-c", probe], entrypoint="/opt/venv/bin/python3", remove=True, network_disabled=True
    )
    assert out.decode().split() == ["2.13.0+cpu", "None"]
