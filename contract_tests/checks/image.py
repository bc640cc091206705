"""Image checks: how the image is launched and what it ships (hosting contract §3.1).

These read the image's configuration (`docker image inspect`) and file list; only image.exec-form
also looks at a running container (the shared healthy one, read without disturbing it).
"""

from __future__ import annotations

import posixpath
import re
import shlex

from contract_tests.check_config import SERVERLESS_IMAGE_LIMIT_BYTES
from contract_tests.registry import check
from contract_tests.result import CheckFailed, CheckSkipped
from contract_tests.target import CheckContext

#: Docker's PATH when the image sets none.
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh", "ksh", "mksh"})

#: Entrypoint programs that are tini (or Docker's bundled copy of it, docker-init).
_TINI = re.compile(
    r"^(tini(-static)?(-(amd64|arm64|armhf|armel|i386|ppc64le|s390x|muslc-\w+))?|docker-init)$"
)

#: User-space pieces of the NVIDIA *driver* (provided by the host through nvidia-container-toolkit).
#: CUDA toolkit libraries (libcudart, libcublas, libcudnn, ...) are not matched.
_DRIVER_FILE = re.compile(
    r"^(libcuda\.so(\..*)?|libcudadebugger\.so(\..*)?|libnvidia-[\w.-]*\.so(\..*)?|libnvcuvid\.so(\..*)?"
    r"|libnvoptix\.so(\..*)?|nvidia-smi)$"
)
#: Link-time stubs of the CUDA toolkit and the CUDA forward-compatibility package are legitimate.
_DRIVER_EXEMPT_DIRS = ("/stubs/", "/compat/")

_SHOWN = 10


def _shell_c_index(argv: tuple[str, ...] | list[str]) -> int | None:
    """For `sh -c SCRIPT ...` style command lines (any shell, `-c` alone or in an option cluster such
    as `-ec`), the index of the option holding `c`; None for anything else."""
    if len(argv) < 2 or posixpath.basename(argv[0]) not in SHELLS:
        return None
    for i, arg in enumerate(argv[1:], start=1):
        if not arg.startswith("-") or arg == "--":
            return None
        if not arg.startswith("--") and "c" in arg[1:]:
            return i
    return None


def _shell_c(argv: tuple[str, ...] | list[str]) -> bool:
    return _shell_c_index(argv) is not None


def _shell_c_words(argv: tuple[str, ...]) -> list[str]:
    """The words of the script a `sh -c SCRIPT` command line runs (empty if it cannot be split)."""
    i = _shell_c_index(argv)
    if i is None or i + 1 >= len(argv):
        return []
    try:
        return shlex.split(argv[i + 1])
    except ValueError:
        return argv[i + 1].split()


def _shell_script(argv: list[str]) -> bool:
    """True for `sh /path/script ...`: a shell interpreting a script as PID 1."""
    return len(argv) >= 2 and posixpath.basename(argv[0]) in SHELLS and not argv[1].startswith("-")


def _fmt_json(argv: tuple[str, ...] | None) -> str:
    if argv is None:
        return "none"
    return "[" + ", ".join(f'"{a}"' for a in argv) + "]"


def _size(n: int) -> str:
    for unit, scale in (("GB", 1024**3), ("MB", 1024**2), ("KB", 1024)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


@check(
    "image.exec-form",
    "ENTRYPOINT is exec form and the server runs as PID 1",
    "SageMaker runs `docker run IMAGE serve`; the ENTRYPOINT must be exec form "
    '(`ENTRYPOINT ["executable", "param1"]`) so that the server is PID 1 and receives SIGTERM, or, '
    "with no ENTRYPOINT, `serve` must be an executable on the image's PATH (hosting contract §3.1, Launch).",
    fix='Write the ENTRYPOINT in exec form, e.g. ENTRYPOINT ["python3", "-u", "/opt/program/server.py"], '
    "or drop it and install an executable named `serve` on the PATH; a wrapper script must `exec` the "
    "server.",
    before="ENTRYPOINT python3 -u /opt/program/server.py",
    after='ENTRYPOINT ["python3", "-u", "/opt/program/server.py"]',
)
def exec_form(ctx: CheckContext) -> str:
    """Statically: the configured ENTRYPOINT is not `sh -c ...` (Docker's shell form), or with none,
    `serve` exists in a PATH directory. At run time: PID 1 of the shared healthy container is not a
    `sh -c` shell (its command line comes from runtime.main_process)."""
    image = ctx.target.image
    entrypoint = image.entrypoint
    ctx.evidence["entrypoint"] = list(entrypoint) if entrypoint else None
    if entrypoint:
        if _shell_c(entrypoint):
            raise CheckFailed(
                f"the ENTRYPOINT is shell form: the image config says {_fmt_json(entrypoint)}. "
                f"`docker run IMAGE serve` then starts a shell as PID 1, which does not pass SIGTERM on to "
                f"the server, and `serve` only becomes the shell's $0. Write it in exec form, e.g. "
                f"ENTRYPOINT {_fmt_json(tuple(_shell_c_words(entrypoint)))}.",
                entrypoint=list(entrypoint),
            )
        launched = f"ENTRYPOINT {_fmt_json(entrypoint)} (exec form)"
    else:
        path = image.env.get("PATH") or DEFAULT_PATH
        dirs = [d for d in path.split(":") if d]
        paths = set(ctx.target.paths)
        found = next((f"{d.rstrip('/')}/serve" for d in dirs if f"{d.rstrip('/')}/serve" in paths), None)
        ctx.evidence["path"] = path
        if found is None:
            raise CheckFailed(
                f"the image has no ENTRYPOINT, so `docker run IMAGE serve` runs `serve` from the PATH, but "
                f"no file named `serve` is in any PATH directory ({path}). Add an exec-form ENTRYPOINT, or "
                f"install an executable `serve` in one of those directories.",
                path=path,
                cmd=list(image.cmd) if image.cmd else None,
            )
        ctx.evidence["serve"] = found
        launched = f"no ENTRYPOINT; `serve` is {found}"

    try:
        container = ctx.target.healthy()
    except CheckSkipped as skipped:
        ctx.warn(f"PID 1 not verified at run time: {skipped.message}")
        return f"{launched}; PID 1 not verified (no healthy container)"
    pid1 = container.runtime.main_process(container.handle.id)
    ctx.evidence["pid1"] = pid1
    if not pid1:
        ctx.warn("PID 1 not verified at run time: the container's process list could not be read")
        return f"{launched}; PID 1 not verified (process list unavailable)"
    argv = pid1.split()
    if _shell_c(argv):
        raise CheckFailed(
            f"PID 1 of the running container is a shell: `{pid1}`. A `sh -c` PID 1 does not forward "
            f"SIGTERM to the server, so SageMaker's stop ends in SIGKILL. Make the server PID 1: exec-form "
            f"ENTRYPOINT, and `exec` the server from any wrapper script.",
            pid1=pid1,
            entrypoint=list(entrypoint) if entrypoint else None,
        )
    if _shell_script(argv):
        ctx.warn(
            f"PID 1 is a shell running a script (`{pid1}`): unless the script `exec`s the server or "
            f"forwards signals, SIGTERM never reaches the server"
        )
    return f"{launched}; PID 1 is `{pid1}`"


@check(
    "image.no-tini",
    "the entry point is not tini",
    "`tini` cannot be used as the entry point: it gets confused by the `train` and `serve` arguments "
    "SageMaker passes (hosting contract §3.1, Launch).",
    fix='Drop tini from the ENTRYPOINT and make the server itself PID 1 (ENTRYPOINT ["python3", '
    '"server.py"]), handling SIGTERM in the server; if child processes need reaping, do it in the server '
    "or a wrapper script.",
    before='ENTRYPOINT ["/usr/bin/tini", "--", "python3", "/opt/program/server.py"]',
    after='ENTRYPOINT ["python3", "/opt/program/server.py"]   # the server handles SIGTERM itself',
)
def no_tini(ctx: CheckContext) -> str:
    """The ENTRYPOINT's program (or, for `sh -c "..."`, the script's first word) is not tini, tini-static
    or docker-init, whatever its directory."""
    entrypoint = ctx.target.image.entrypoint
    ctx.evidence["entrypoint"] = list(entrypoint) if entrypoint else None
    if not entrypoint:
        return "no ENTRYPOINT: `serve` is the program"
    program = entrypoint[0]
    if _shell_c(entrypoint):
        words = _shell_c_words(entrypoint)
        while words and words[0] == "exec":
            words = words[1:]
        program = words[0] if words else program
    if _TINI.match(posixpath.basename(program)):
        raise CheckFailed(
            f"the entry point is tini: the image config says ENTRYPOINT {_fmt_json(entrypoint)} "
            f"(program `{program}`). SageMaker does not support tini as the entry point. Remove it and "
            f"make the server the ENTRYPOINT in exec form, handling SIGTERM itself.",
            entrypoint=list(entrypoint),
            program=program,
        )
    return f"entry point program is `{program}`"


@check(
    "image.root",
    "the image runs as root",
    "Containers are expected to run as root; non-root users can cause permission issues "
    "(hosting contract §3.1, Launch).",
    fix="Remove the USER instruction (or set USER root) in the final stage: SageMaker expects containers to "
    "run as root, and non-root users can cause permission issues.",
    before="RUN useradd -m app\nUSER app",
    after="# no USER: the container runs as root, as SageMaker expects",
)
def root(ctx: CheckContext) -> str:
    """The image's User is empty, `root` or `0` (with any group, e.g. `0:0`, `root:root`).

    A named user whose UID is 0 in the image's /etc/passwd is not resolved: it would fail here."""
    user = ctx.target.image.user
    ctx.evidence["user"] = user
    name = user.split(":", 1)[0]
    if name in ("", "root", "0"):
        return f"runs as root (User {user!r})" if user else "runs as root (no USER set)"
    raise CheckFailed(
        f"the image runs as user {user!r} (its config sets USER {user}), not root. SageMaker runs containers "
        f"as root, and a non-root user can cause permission problems (files and mounts owned by root "
        f"become unreadable or unwritable). Remove the USER instruction or set USER root.",
        user=user,
    )


@check(
    "image.no-nvidia-driver",
    "no NVIDIA driver libraries bundled",
    "GPU containers must be nvidia-docker compatible and must not bundle NVIDIA drivers: the host's driver "
    "is mounted into the container (hosting contract §3.1, GPU).",
    fix="Do not install the NVIDIA driver (libcuda.so, libnvidia-*.so, nvidia-smi) in the image: base it on "
    "a CUDA runtime image (nvidia/cuda:*-runtime) and let the host's driver be mounted at run time.",
    before="FROM ubuntu:22.04\nRUN apt-get install -y nvidia-driver-535",
    after="FROM nvidia/cuda:12.2.2-runtime-ubuntu22.04   # the host's driver is mounted at run time",
)
def no_nvidia_driver(ctx: CheckContext) -> str:
    """No file of the image's file system is a driver user-space library or nvidia-smi. CUDA toolkit
    libraries (libcudart, libcublas, ...), the toolkit's link stubs (`.../stubs/libcuda.so`) and the
    CUDA forward-compatibility package (`.../compat/libcuda.so.*`) are allowed."""
    found = [
        p
        for p in ctx.target.paths
        if _DRIVER_FILE.match(posixpath.basename(p)) and not any(d in p for d in _DRIVER_EXEMPT_DIRS)
    ]
    if found:
        shown = ", ".join(found[:_SHOWN]) + (
            f" and {len(found) - _SHOWN} more" if len(found) > _SHOWN else ""
        )
        raise CheckFailed(
            f"the image bundles {len(found)} NVIDIA driver file(s): {shown}. SageMaker mounts the host's "
            f"driver into GPU containers; a bundled driver can mismatch the host's kernel module. Remove "
            f"the driver packages (e.g. libnvidia-compute-*, nvidia-utils-*) and keep only CUDA toolkit "
            f"libraries.",
            driver_files=found[:100],
            count=len(found),
        )
    return f"no NVIDIA driver files among {len(ctx.target.paths)} paths"


@check(
    "image.size",
    "image size within the limit (fails under the serverless profile)",
    "SageMaker serverless inference accepts container images of at most 10 GB and refuses larger ones; "
    "real-time endpoints have no such limit (hosting contract §7, Serverless inference). So the check "
    "FAILS over the limit under `--profile serverless`, where SageMaker refuses the image, and only warns "
    "under the default realtime profile, where it would deploy. `--image-size-limit` moves the limit "
    "(default 10 GB; K/M/G are powers of 1024).",
    fix="Keep the image under the limit: a multi-stage build that leaves compilers and caches behind, a "
    "slimmer base image (a -runtime CUDA image, not -devel), pip install --no-cache-dir, and the model "
    "weights in ModelDataUrl (model.tar.gz) rather than in the image.",
    before="FROM nvidia/cuda:12.1.0-cudnn8-devel-ubuntu22.04\nCOPY weights/ /opt/program/weights/",
    after="FROM nvidia/cuda:12.1.0-cudnn8-runtime-ubuntu22.04\n# weights in model.tar.gz (ModelDataUrl)",
)
def size(ctx: CheckContext) -> str:
    """The image's (uncompressed, as the engine reports it) size against `image_size_limit_bytes`:
    FAILED above it under the serverless profile, a warning above it otherwise. Its failing twin is not
    an image but a lowered limit (CheckConfig or --image-size-limit) on the echo image."""
    size_bytes = ctx.target.image.size_bytes
    limit = ctx.config.image_size_limit_bytes
    profile = ctx.config.profile
    ctx.evidence.update(size_bytes=size_bytes, limit_bytes=limit, profile=profile)
    message = f"image size {_size(size_bytes)} ({size_bytes} bytes)"
    serverless = _size(SERVERLESS_IMAGE_LIMIT_BYTES)
    whose = (
        "SageMaker serverless inference's limit"
        if limit == SERVERLESS_IMAGE_LIMIT_BYTES
        else f"the configured limit (--image-size-limit; SageMaker serverless' own is {serverless})"
    )
    if size_bytes <= limit:
        return f"{message}, within {whose} of {_size(limit)}"
    over = f"{message} is over {whose} of {_size(limit)} ({limit} bytes)"
    if profile == "serverless":
        raise CheckFailed(
            f"{over}, and this run checks a serverless deployment (--profile serverless): SageMaker "
            f"serverless inference refuses container images over {serverless}. Make the image smaller: a "
            f"multi-stage build, a slimmer base image, model weights in model.tar.gz rather than the image.",
            size_bytes=size_bytes,
            limit_bytes=limit,
        )
    ctx.warn(
        f"{over}: real-time endpoints set no image size limit, so this is a warning; SageMaker serverless "
        f"inference refuses images over {serverless} (--profile serverless makes this a failure)"
    )
    return f"{over} (a warning under the realtime profile)"
