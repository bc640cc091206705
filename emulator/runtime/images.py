"""Images smlocal builds itself: project images from a Dockerfile, on the base, and wheelhouses.

The base image (python:3.11-slim, or smlocal's local equivalent where no registry is reachable) is
emulator/runtime/base_image.py's; build_image() passes its name as the BASE_IMAGE build argument.
Its names and functions are re-exported here for the callers that import them from this module.

Python packages go into images from a wheelhouse the host prepared (prepare_wheelhouse), installed
with `pip install --no-index --find-links`: fast, offline, and free of TLS trouble inside builds.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import docker
from docker.errors import DockerException

from emulator.errors import EngineError, SetupError
from emulator.runtime import labels
from emulator.runtime.apt_sources import (
    DEFAULT_MIRROR,
    SUITE,
    apt_mirror,
    mirror_from_deb822,
    mirror_from_one_line,
)
from emulator.runtime.base_image import (
    BASE_REVISION,
    DEFAULT_BASE_IMAGE,
    LOCAL_BASE_IMAGE,
    build_local_base_image,
    ensure_base_image,
)
from emulator.runtime.base_image import engine_client as _client

BUILD_TIMEOUT_S = 3600

__all__ = [  # the base image's and the mirror's names are re-exported for older callers
    "BASE_REVISION",
    "DEFAULT_BASE_IMAGE",
    "DEFAULT_MIRROR",
    "LOCAL_BASE_IMAGE",
    "SUITE",
    "apt_mirror",
    "build_image",
    "build_local_base_image",
    "ensure_base_image",
    "mirror_from_deb822",
    "mirror_from_one_line",
    "pip_download_command",
    "prepare_wheelhouse",
    "wheelhouse_is_current",
    "wheelhouse_key",
]

#: The platform of the images: CPython 3.11 on glibc 2.36 (bookworm), x86_64.
WHEEL_PYTHON_VERSION = "3.11"
WHEEL_ABI = "cp311"
WHEEL_PLATFORMS = (
    *(f"manylinux_2_{minor}_x86_64" for minor in range(36, 16, -1)),
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
)
WHEELHOUSE_STAMP = ".smlocal-wheelhouse.json"

Log = Callable[[str], None]


# --- building project images ----------------------------------------------------------------------


def build_image(
    context_dir: Path,
    tag: str,
    buildargs: dict[str, str] | None = None,
    client: docker.DockerClient | None = None,
    log: Log = print,
) -> str:
    """Build context_dir/Dockerfile as `tag` (layer cache on) and return the image id."""
    client = _client(client, timeout=BUILD_TIMEOUT_S)
    args = dict(buildargs or {})
    if "BASE_IMAGE" not in args and "BASE_IMAGE" in (context_dir / "Dockerfile").read_text():
        args["BASE_IMAGE"] = ensure_base_image(client, log)  # only for a Dockerfile built on it
    started = time.monotonic()
    lines: list[str] = []
    image_id = ""
    error = ""
    try:
        stream: Iterable[dict[str, Any]] = client.api.build(
            path=str(context_dir),
            tag=tag,
            buildargs=args,
            labels={labels.MANAGED: "true"},
            rm=True,
            forcerm=True,
            pull=False,
            decode=True,
        )
        for chunk in stream:
            if "stream" in chunk:
                lines.extend(str(chunk["stream"]).splitlines())
            if "error" in chunk:
                error = str(chunk["error"]).strip()
            aux = chunk.get("aux")
            if isinstance(aux, dict) and "ID" in aux:
                image_id = str(aux["ID"])
    except DockerException as exc:
        error = str(exc)
    if error:
        tail = "\n".join(lines[-30:])
        raise EngineError(f"Building {tag} from {context_dir} failed: {error}\nBuild log tail:\n{tail}")
    if not image_id:
        image_id = str(client.images.get(tag).id)
    cached = sum(1 for line in lines if "Using cache" in line)
    log(f"Built {tag} in {time.monotonic() - started:.1f} s ({cached} cached steps)")
    return image_id


# --- wheelhouses ----------------------------------------------------------------------------------


def wheelhouse_key(requirements: list[str]) -> str:
    """Identity of a wheelhouse: the requirements (order-insensitive) and the target platform."""
    payload = {
        "requirements": sorted(r.strip() for r in requirements if r.strip()),
        "python": WHEEL_PYTHON_VERSION,
        "abi": WHEEL_ABI,
        "platforms": list(WHEEL_PLATFORMS),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def wheelhouse_is_current(dest: Path, requirements: list[str]) -> bool:
    try:
        stamp = json.loads((dest / WHEELHOUSE_STAMP).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(stamp, dict) and stamp.get("key") == wheelhouse_key(requirements)


def pip_download_command(requirements: list[str], dest: Path) -> list[str]:
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(dest)]
    cmd += ["--only-binary=:all:", "--implementation", "cp"]
    cmd += ["--python-version", WHEEL_PYTHON_VERSION, "--abi", WHEEL_ABI]
    for platform in WHEEL_PLATFORMS:
        cmd += ["--platform", platform]
    return [*cmd, *requirements]


def prepare_wheelhouse(requirements: list[str], dest: Path, log: Log = print) -> Path:
    """`pip download` wheels for the images' platform into dest, unless dest already has them."""
    if wheelhouse_is_current(dest, requirements):
        log(f"Wheelhouse {dest} is up to date")
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    (dest / WHEELHOUSE_STAMP).unlink(missing_ok=True)
    started = time.monotonic()
    result = subprocess.run(
        pip_download_command(requirements, dest),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-20:])
        raise SetupError(f"pip download for the wheelhouse {dest} failed:\n{tail}")
    stamp = {"key": wheelhouse_key(requirements), "requirements": requirements}
    (dest / WHEELHOUSE_STAMP).write_text(json.dumps(stamp, indent=1))
    log(f"Wheelhouse {dest} ready in {time.monotonic() - started:.1f} s")
    return dest
