"""Make sure a Docker engine answers, starting (and on Debian, installing) one when none does.

Used by `smlocal setup`, .ci/run and the test fixtures, before anything talks to the engine.
Machines this project runs on start with the docker CLI at most and no engine running; on Debian as
root we can fix that ourselves (`apt-get install docker.io`, then a detached `dockerd`). Anywhere
else we say what to install or start, and stop.

dockerd is started in its own session with stdin from /dev/null and its output in a log file, so a
calling script whose stdout is a pipe (`bash .ci/run | cat`) can finish while the engine keeps running.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import docker
from docker.errors import DockerException

from emulator.errors import SetupError

DOCKERD_LOG = Path("/var/log/smlocal-dockerd.log")
DOCKERD_PIDFILE = Path("/var/run/docker.pid")
PING_TIMEOUT_S = 5.0
POLL_INTERVAL_S = 0.25

Log = Callable[[str], None]

#: dockerd processes we started. They outlive us on purpose; holding them here keeps Popen's
#: "subprocess is still running" ResourceWarning (an error under pytest) from firing mid-session.
_started_daemons: list[subprocess.Popen[bytes]] = []


def engine_answers(timeout_s: float = PING_TIMEOUT_S) -> bool:
    """True when the engine the environment points at (DOCKER_HOST or the default socket) answers."""
    try:
        client = docker.from_env(timeout=max(1, int(timeout_s)))
    except DockerException:
        return False
    try:
        return bool(client.ping())
    except Exception:  # requests/urllib3 errors as well as DockerException: all mean "no engine"
        return False
    finally:
        client.close()


def ensure_engine(log: Log = print, timeout_s: float = 60) -> None:
    """Return once a Docker engine answers; install/start one on Debian as root; else SetupError."""
    if engine_answers():
        return
    if not _is_debian_root():
        raise SetupError(
            "No Docker engine answers (`docker info` fails). Install Docker (Docker Engine or Docker "
            "Desktop), start it, and make sure this user may use it (DOCKER_HOST or /var/run/docker.sock). "
            "smlocal installs and starts Debian's docker.io by itself only on Debian as root."
        )
    started = time.monotonic()
    if shutil.which("dockerd") is None:
        apt_install(["docker.io"], log)
    proc: subprocess.Popen[bytes] | None = None
    running_pid = _running_dockerd_pid()
    if running_pid is not None:
        log(f"dockerd (pid {running_pid}) is running but not answering yet; waiting for it")
    else:
        proc = _start_dockerd(log)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if engine_answers(timeout_s=2):
            log(f"Docker engine ready after {time.monotonic() - started:.1f} s (log: {DOCKERD_LOG})")
            return
        if proc is not None and proc.poll() is not None:
            raise SetupError(
                f"dockerd exited with status {proc.returncode} before answering.\n"
                f"Last lines of {DOCKERD_LOG}:\n{_log_tail()}"
            )
        time.sleep(POLL_INTERVAL_S)
    raise SetupError(
        f"dockerd did not answer within {timeout_s:.0f} s.\nLast lines of {DOCKERD_LOG}:\n{_log_tail()}"
    )


def _is_debian_root() -> bool:
    return Path("/etc/debian_version").exists() and os.geteuid() == 0


def apt_install(packages: list[str], log: Log) -> None:
    """apt-get update + install, non-interactively; SetupError with apt's output tail on failure."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    started = time.monotonic()
    log(f"Installing {' '.join(packages)} with apt-get")
    for cmd in (
        ["apt-get", "update", "-q"],
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages],
    ):
        result = subprocess.run(
            cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, check=False
        )
        if result.returncode != 0:
            tail = "\n".join((result.stdout + result.stderr).splitlines()[-20:])
            raise SetupError(f"`{' '.join(cmd)}` failed with status {result.returncode}:\n{tail}")
    log(f"Installed {' '.join(packages)} in {time.monotonic() - started:.1f} s")


def _running_dockerd_pid() -> int | None:
    """The pid in /var/run/docker.pid when it is a live dockerd; a stale pid file is removed."""
    try:
        pid = int(DOCKERD_PIDFILE.read_text().strip())
    except (OSError, ValueError):
        pid = 0
    if pid > 0:
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            comm = ""
        if comm == "dockerd":
            return pid
    # dockerd refuses to start while a pid file names another live process (pid reuse).
    DOCKERD_PIDFILE.unlink(missing_ok=True)
    return None


def _start_dockerd(log: Log) -> subprocess.Popen[bytes]:
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise SetupError("dockerd is not installed (apt-get install docker.io)")
    DOCKERD_LOG.parent.mkdir(parents=True, exist_ok=True)
    log(f"Starting dockerd in the background (log: {DOCKERD_LOG})")
    with open(DOCKERD_LOG, "ab") as out, open(os.devnull, "rb") as devnull:
        # Its own session, no inherited descriptors: the caller's pipes close when the caller exits.
        proc = subprocess.Popen(
            [dockerd],
            stdin=devnull,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            cwd="/",
        )
    _started_daemons.append(proc)
    return proc


def _log_tail(lines: int = 30) -> str:
    try:
        text = DOCKERD_LOG.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])
