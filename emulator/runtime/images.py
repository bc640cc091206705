"""Images smlocal builds itself: the Python base, project images from a Dockerfile, and wheelhouses.

Dockerfiles in this project start with `ARG BASE_IMAGE=python:3.11-slim` / `FROM ${BASE_IMAGE}`.
Where a registry is reachable that is the base; where none is (our CI), ensure_base_image() makes an
equivalent Debian bookworm + Python 3.11 image offline with debootstrap from the host's apt mirror,
once per engine, and build_image() passes its name as the BASE_IMAGE build argument.

Python packages go into images from a wheelhouse the host prepared (prepare_wheelhouse), installed
with `pip install --no-index --find-links`: fast, offline, and free of TLS trouble inside builds.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import docker
from docker.errors import DockerException, ImageNotFound

from emulator.errors import EngineError, SetupError
from emulator.runtime import labels
from emulator.runtime.engine import apt_install

DEFAULT_BASE_IMAGE = "python:3.11-slim"
LOCAL_BASE_IMAGE = "smlocal-base:py3.11-bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
SUITE = "bookworm"  # Debian 12: Python 3.11, like python:3.11-slim
PULL_TIMEOUT_S = 20
BUILD_TIMEOUT_S = 3600
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

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


def _client(client: docker.DockerClient | None, timeout: int = 120) -> docker.DockerClient:
    if client is not None:
        return client
    try:
        return docker.from_env(timeout=timeout)
    except DockerException as exc:
        raise EngineError(f"No Docker engine answers: {exc}") from exc


def _has_image(client: docker.DockerClient, name: str) -> bool:
    try:
        client.images.get(name)
    except ImageNotFound:
        return False
    return True


# --- the base image -------------------------------------------------------------------------------


def ensure_base_image(client: docker.DockerClient | None = None, log: Log = print) -> str:
    """The image to pass as BASE_IMAGE: python:3.11-slim when present or pullable, else the local one."""
    client = _client(client)
    if _has_image(client, DEFAULT_BASE_IMAGE):
        return DEFAULT_BASE_IMAGE
    if _has_image(client, LOCAL_BASE_IMAGE):
        return LOCAL_BASE_IMAGE
    if _try_pull(DEFAULT_BASE_IMAGE, log):
        return DEFAULT_BASE_IMAGE
    build_local_base_image(client, log)
    return LOCAL_BASE_IMAGE


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


def build_local_base_image(client: docker.DockerClient | None = None, log: Log = print) -> str:
    """debootstrap Debian bookworm with Python 3.11 and `docker import` it as LOCAL_BASE_IMAGE."""
    client = _client(client)
    debootstrap = _ensure_debootstrap(log)
    mirror = apt_mirror()
    started = time.monotonic()
    log(f"Building {LOCAL_BASE_IMAGE} with debootstrap from {mirror} (takes about a minute)")
    with tempfile.TemporaryDirectory(prefix="smlocal-rootfs-", dir="/var/tmp") as tmp:
        rootfs = Path(tmp) / "rootfs"
        cmd = [
            debootstrap,
            "--variant=minbase",
            "--include=python3,python3-venv,ca-certificates",
            SUITE,
            str(rootfs),
            mirror,
        ]
        result = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            tail = "\n".join((result.stdout + result.stderr).splitlines()[-25:])
            raise SetupError(f"debootstrap failed with status {result.returncode}:\n{tail}")
        bootstrapped = time.monotonic()
        _clean_rootfs(rootfs)
        _import_rootfs(client, rootfs)
    log(
        f"Built {LOCAL_BASE_IMAGE} in {time.monotonic() - started:.1f} s "
        f"(debootstrap {bootstrapped - started:.1f} s, import {time.monotonic() - bootstrapped:.1f} s)"
    )
    return LOCAL_BASE_IMAGE


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


def _clean_rootfs(rootfs: Path) -> None:
    """Drop apt's lists and caches: they are a third of the size and stale in any image."""
    for pattern in ("var/lib/apt/lists/*", "var/cache/apt/*.bin", "var/cache/apt/archives/*.deb"):
        for path in rootfs.glob(pattern):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()


def _import_rootfs(client: docker.DockerClient, rootfs: Path) -> None:
    repository, _, tag = LOCAL_BASE_IMAGE.partition(":")
    changes = [
        f"ENV PATH={IMAGE_PATH}",
        "ENV LANG=C.UTF-8",
        f"LABEL {labels.MANAGED}=true",
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
        raise EngineError(f"docker import of {LOCAL_BASE_IMAGE} failed: {exc}") from exc
    finally:
        tar.stdout.close()
        _, err = tar.communicate()
    if tar.returncode != 0:
        raise SetupError(f"tar of the rootfs failed with status {tar.returncode}: {err.decode()[-2000:]}")
    if not _has_image(client, LOCAL_BASE_IMAGE):
        raise EngineError(f"docker import finished but {LOCAL_BASE_IMAGE} is not there")


# --- the apt mirror -------------------------------------------------------------------------------


def apt_mirror(
    sources_list: Path = Path("/etc/apt/sources.list"),
    sources_dir: Path = Path("/etc/apt/sources.list.d"),
    suite: str = SUITE,
) -> str:
    """The host's Debian mirror for `suite` (one-line or deb822 sources), else deb.debian.org."""
    texts: list[tuple[str, bool]] = []
    if sources_list.is_file():
        texts.append((sources_list.read_text(errors="replace"), False))
    if sources_dir.is_dir():
        for path in sorted(sources_dir.iterdir()):
            if path.suffix == ".list":
                texts.append((path.read_text(errors="replace"), False))
            elif path.suffix == ".sources":
                texts.append((path.read_text(errors="replace"), True))
    for text, deb822 in texts:
        found = mirror_from_deb822(text, suite) if deb822 else mirror_from_one_line(text, suite)
        if found:
            return found
    return DEFAULT_MIRROR


def mirror_from_one_line(text: str, suite: str = SUITE) -> str | None:
    """First `deb URI SUITE ...` line of a sources.list (options in [brackets] allowed)."""
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        line = re.sub(r"\[[^\]]*\]", " ", line)
        fields = line.split()
        if len(fields) >= 3 and fields[0] == "deb" and fields[2] == suite:
            return fields[1].rstrip("/")
    return None


def mirror_from_deb822(text: str, suite: str = SUITE) -> str | None:
    """First URI of an enabled `Types: deb` stanza whose Suites include SUITE."""
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = ""
        for raw in stanza.splitlines():
            if raw.startswith("#") or not raw.strip():
                continue
            if raw[0] in " \t" and key:  # continuation line
                fields[key] += " " + raw.strip()
                continue
            key, _, value = raw.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()
        if fields.get("enabled", "yes").lower() == "no":
            continue
        if "deb" not in fields.get("types", "").split():
            continue
        if suite not in fields.get("suites", "").split():
            continue
        uris = fields.get("uris", "").split()
        if uris:
            return uris[0].rstrip("/")
    return None


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
    if "BASE_IMAGE" not in args:
        args["BASE_IMAGE"] = ensure_base_image(client, log)
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
