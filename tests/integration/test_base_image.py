"""smlocal's local base image stands in for python:3.11-slim (issue 24 item 12): a Dockerfile written
for python:3.11-slim (`pip install` with no flag, `CMD python ...`) builds FROM it and runs, and pip
installs into /usr/local as slim's does. A wheel made here (no package index) is the host wheelhouse.

SMLOCAL_SLIM_TAG names the image (removed at the end)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import zipfile
from pathlib import Path

import docker
import pytest

from emulator.runtime import labels
from emulator.runtime.images import build_image

pytestmark = pytest.mark.docker

SLIM_TAG = os.environ.get("SMLOCAL_SLIM_TAG", "smlocal-test/slim-compatible:latest")

#: Written for python:3.11-slim, as a user writes it: nothing about Debian or virtual environments.
DOCKERFILE = """\
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}
COPY wheelhouse /tmp/wheelhouse
RUN pip install --no-index --find-links /tmp/wheelhouse --no-cache-dir smlocal-probe \\
    && pip --version && python --version
CMD python -c "import smlocal_probe, shutil; print(smlocal_probe.ANSWER, smlocal_probe.__file__, shutil.which('pip'))"
"""


def write_wheel(folder: Path) -> Path:
    """A pure-Python wheel, smlocal_probe 1.0 (one module), as `pip download` would leave it."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "smlocal_probe.py": b"ANSWER = 42\n",
        "smlocal_probe-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: smlocal-probe\nVersion: 1.0\n",
        "smlocal_probe-1.0.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: smlocal-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("smlocal_probe-1.0.dist-info/RECORD,,")
    path = folder / "smlocal_probe-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
        wheel.writestr("smlocal_probe-1.0.dist-info/RECORD", "\n".join(record) + "\n")
    return path


def test_a_dockerfile_written_for_python_slim_builds_and_runs_on_the_base(
    docker_engine: docker.DockerClient, base_image: str, tmp_path: Path
) -> None:
    (tmp_path / "Dockerfile").write_text(DOCKERFILE)
    write_wheel(tmp_path / "wheelhouse")
    try:
        build_image(tmp_path, SLIM_TAG, buildargs={"BASE_IMAGE": base_image}, client=docker_engine)
        run_labels = {labels.MANAGED: "true", labels.OWNER: f"check-{os.getpid()}"}
        out = docker_engine.containers.run(SLIM_TAG, remove=True, labels=run_labels, network_disabled=True)
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_engine.images.remove(SLIM_TAG)
    answer, module, pip = out.decode().split()
    assert answer == "42"
    assert module.startswith("/usr/local/lib/python3.11/")  # pip installs into /usr/local, as in slim
    assert pip in ("/usr/local/bin/pip", "/usr/bin/pip")
