"""The Python base image of every image smlocal builds: python:3.11-slim, or a local equivalent.

Dockerfiles in this project start with `ARG BASE_IMAGE=python:3.11-slim` / `FROM ${BASE_IMAGE}`.
Where a registry is reachable that is the base; where none is (our CI), ensure_base_image() makes an
equivalent Debian bookworm + Python 3.11 image offline with debootstrap from the host's apt mirror,
once per engine: LOCAL_BASE_IMAGE. A Dockerfile written for python:3.11-slim builds on it:

- `python`, `python3`, `pip` and `pip3` are on PATH (python3-pip, python-is-python3), and
  `python3 -m venv` works (python3-venv);
- `pip install` needs no flag: Debian's PEP 668 marker (EXTERNALLY-MANAGED) is removed, so pip
  installs as root into /usr/local (/usr/local/lib/python3.11/dist-packages, scripts in
  /usr/local/bin), as python:3.11-slim's pip installs into /usr/local;
- PATH, LANG=C.UTF-8 and CMD ["python3"] as python:3.11-slim sets them.

What still differs (README.md, "The base image"): Debian's CPython 3.11.2 in /usr/bin (slim builds
the newest 3.11 into /usr/local/bin), Debian's pip 23.0.1, pip's packages in `dist-packages` rather
than `site-packages`, Debian's setuptools and wheel in /usr/lib/python3/dist-packages, and none of
slim's PYTHON_VERSION / GPG_KEY variables.

An engine may hold a base built by an older smlocal (before BASE_REVISION 2 it had no pip). Every
image is built FROM the base and a tag that exists is never rebuilt, so the base carries its
revision as a label (REVISION_LABEL) and ensure_base_image() rebuilds a local base whose label is not
BASE_REVISION. The cost, once per engine: the base (about a minute) and, through the layer cache,
every image built on it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import docker
from docker.errors import DockerException, ImageNotFound

from emulator.errors import EngineError, SetupError
from emulator.runtime import labels
from emulator.runtime.apt_sources import SUITE, apt_mirror
from emulator.runtime.engine import apt_install

DEFAULT_BASE_IMAGE = "python:3.11-slim"
LOCAL_BASE_IMAGE = "smlocal-base:py3.11-bookworm"
#: What LOCAL_BASE_IMAGE holds; raise it whenever build_local_base_image puts something else in, so
#: that engines holding an older build rebuild it. 1 (unlabelled): python3, python3-venv; 2: pip,
#: `python` and `pip` on PATH, no PEP 668 marker.
BASE_REVISION = "2"
REVISION_LABEL = "smlocal.base-revision"
#: The Debian packages of the local base (debootstrap --include; minbase has no Python at all).
PACKAGES = ("python3", "python3-venv", "python3-pip", "python-is-python3", "ca-certificates")
PULL_TIMEOUT_S = 20
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

Log = Callable[[str], None]


def engine_client(client: docker.DockerClient | None, timeout: int = 120) -> docker.DockerClient:
    """`client`, or one for the engine the environment names (EngineError when none answers)."""
    if client is not None:
        return client
    try:
        return docker.from_env(timeout=timeout)
    except DockerException as exc:
        raise EngineError(f"No Docker engine answers: {exc}") from exc


def has_image(client: docker.DockerClient, name: str) -> bool:
    try:
        client.images.get(name)
    except ImageNotFound:
        return False
    return True


def local_base_revision(client: docker.DockerClient, name: str = LOCAL_BASE_IMAGE) -> str | None:
    """The revision label of the local base `name` ("" when unlabelled: revision 1), None if absent."""
    try:
        image = client.images.get(name)
    except ImageNotFound:
        return None
    return str((image.labels or {}).get(REVISION_LABEL, ""))


def ensure_base_image(
    client: docker.DockerClient | None = None, log: Log = print, name: str = LOCAL_BASE_IMAGE
) -> str:
    """The image to pass as BASE_IMAGE: python:3.11-slim when present or pullable, else the local
    one (`name`), built or rebuilt when it is missing or of another revision."""
    client = engine_client(client)
    if has_image(client, DEFAULT_BASE_IMAGE):
        return DEFAULT_BASE_IMAGE
    revision = local_base_revision(client, name)
    if revision == BASE_REVISION:
        return name
    if _try_pull(DEFAULT_BASE_IMAGE, log):
        return DEFAULT_BASE_IMAGE
    if revision is not None:
        log(f"{name} is revision {revision or '1'} of smlocal's base, this smlocal builds {BASE_REVISION}")
    build_local_base_image(client, log, name)
    return name


def _try_pull(image: str, log: Log) -> bool:
    """Pull with a short timeout on its own client; any failure means "not available"."""
    repository, _, tag = image.partition(":")
    try:
        pull_client = docker.from_env(timeout=PULL_TIMEOUT_S)
    except DockerException:
        return False
    started = time.monotonic()
    try:
        pull_client.images.pull(repository, tag=tag or "latest")
    except Exception as exc:  # APIError offline, a requests timeout when the registry does not answer
        first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        log(f"{image} cannot be pulled ({time.monotonic() - started:.1f} s): {first_line[:200]}")
        return False
    finally:
        pull_client.close()
    log(f"Pulled {image} in {time.monotonic() - started:.1f} s")
    return True


def build_local_base_image(
    client: docker.DockerClient | None = None, log: Log = print, name: str = LOCAL_BASE_IMAGE
) -> str:
    """debootstrap Debian bookworm with Python 3.11 and pip, and `docker import` it as `name`."""
    client = engine_client(client)
    debootstrap = _ensure_debootstrap(log)
    mirror = apt_mirror()
    started = time.monotonic()
    log(f"Building {name} with debootstrap from {mirror} (takes about a minute)")
    with tempfile.TemporaryDirectory(prefix="smlocal-rootfs-", dir="/var/tmp") as tmp:
        rootfs = Path(tmp) / "rootfs"
        include = ",".join(PACKAGES)
        cmd = [debootstrap, "--variant=minbase", f"--include={include}", SUITE, str(rootfs), mirror]
        result = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            tail = "\n".join((result.stdout + result.stderr).splitlines()[-25:])
            raise SetupError(f"debootstrap failed with status {result.returncode}:\n{tail}")
        bootstrapped = time.monotonic()
        clean_rootfs(rootfs)
        _import_rootfs(client, rootfs, name)
    log(
        f"Built {name} in {time.monotonic() - started:.1f} s "
        f"(debootstrap {bootstrapped - started:.1f} s, import {time.monotonic() - bootstrapped:.1f} s)"
    )
    return name


def _ensure_debootstrap(log: Log) -> str:
    found = shutil.which("debootstrap")
    if found:
        return found
    if not (Path("/etc/debian_version").exists() and os.geteuid() == 0):
        raise SetupError(
            f"No registry provides {DEFAULT_BASE_IMAGE} and debootstrap is missing: make "
            f"{DEFAULT_BASE_IMAGE} available to the engine (docker pull / docker load), or install "
            "debootstrap so smlocal can build its own base image."
        )
    apt_install(["debootstrap"], log)
    found = shutil.which("debootstrap")
    if not found:
        raise SetupError("apt-get installed debootstrap but it is not on PATH")
    return found


def clean_rootfs(rootfs: Path) -> None:
    """Drop apt's lists and caches (a third of the size, and stale in any image), and Debian's PEP 668
    marker, so that `pip install` installs into /usr/local as in python:3.11-slim."""
    patterns = (
        "var/lib/apt/lists/*",
        "var/cache/apt/*.bin",
        "var/cache/apt/archives/*.deb",
        "usr/lib/python3*/EXTERNALLY-MANAGED",
    )
    for pattern in patterns:
        for path in rootfs.glob(pattern):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()


def _import_rootfs(client: docker.DockerClient, rootfs: Path, name: str) -> None:
    repository, _, tag = name.partition(":")
    changes = [
        f"ENV PATH={IMAGE_PATH}",
        "ENV LANG=C.UTF-8",
        f"LABEL {labels.MANAGED}=true {REVISION_LABEL}={BASE_REVISION}",
        'CMD ["python3"]',
    ]
    tar = subprocess.Popen(
        ["tar", "--numeric-owner", "-C", str(rootfs), "-c", "."],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert tar.stdout is not None
    try:
        client.api.import_image(
            src=tar.stdout, repository=repository, tag=tag, changes=changes, stream_src=True
        )
    except DockerException as exc:
        tar.kill()
        raise EngineError(f"docker import of {name} failed: {exc}") from exc
    finally:
        tar.stdout.close()
        _, err = tar.communicate()
    if tar.returncode != 0:
        raise SetupError(f"tar of the rootfs failed with status {tar.returncode}: {err.decode()[-2000:]}")
    if local_base_revision(client, name) != BASE_REVISION:
        raise EngineError(f"docker import finished but {name} (revision {BASE_REVISION}) is not there")
