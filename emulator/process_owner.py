"""Which process owns a check container, and whether that process is gone.

`smlocal check` labels its containers with its pid (`smlocal.owner=check-<pid>`), its host and the
process's start time, so that a run killed without cleaning up (a CI timeout's SIGKILL) can be told
apart from a live run: the next run and `smlocal down` remove the containers of a process that no
longer exists on this host, or whose pid now belongs to another process (a different start time).
A container whose owner cannot be judged (another host, a label from before, an unreadable start time
of a live pid) is left alone: never a live run's container.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
from collections.abc import Mapping
from pathlib import Path

from emulator.errors import EngineError
from emulator.runtime.base import ContainerHandle, ContainerRuntime
from emulator.runtime.labels import MANAGED, OWNER, OWNER_HOST, OWNER_STARTED, ROLE, ROLE_TESTCONTAINER

log = logging.getLogger(__name__)

CHECK_PREFIX = "check-"
CHECK_SELECTOR = {MANAGED: "true", ROLE: "check"}
#: contract_tests.containers.SageMakerContainer's containers carry the same owner labels (the test
#: process's): swept with the check runs' once that process is gone (a killed test run's leftovers).
TESTCONTAINER_SELECTOR = {MANAGED: "true", ROLE: ROLE_TESTCONTAINER}


def host() -> str:
    """This host, as far as its pids go: the host name and (Linux) the pid namespace, so that a run in
    a container sharing the host's name (--network host) is not judged by the host's pids."""
    try:
        namespace = os.readlink("/proc/self/ns/pid").removeprefix("pid:")
    except OSError:
        return socket.gethostname()
    return f"{socket.gethostname()}{namespace}"


def start_stamp(pid: int) -> str | None:
    """When process `pid` started, as a string that differs for a later process of the same pid (Linux:
    its start time in clock ticks since boot, with the boot's id); None when it cannot be read."""
    return _inspect(pid)[0]


def _inspect(pid: int) -> tuple[str | None, bool]:
    """(start stamp or None, whether the process has exited: no such process, or a zombie)."""
    if Path("/proc/self/stat").exists():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            return None, True
        except (OSError, IndexError):
            return None, False
        if fields[0] in ("Z", "X"):  # exited, not reaped yet
            return None, True
        try:
            boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:8]
        except OSError:
            boot = ""
        return f"{fields[19]}@{boot}", False  # field 22 of stat: starttime
    try:  # macOS and other systems without /proc
        out = subprocess.run(
            ["ps", "-o", "stat=,lstart=", "-p", str(pid)], capture_output=True, text=True, timeout=5
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None, False
    if not out:
        return None, True
    if out[0].startswith("Z"):
        return None, True
    return " ".join(out[1:]), False


def check_labels(pid: int | None = None) -> dict[str, str]:
    """The owner labels of a check container started by process `pid` (default: this one)."""
    pid = os.getpid() if pid is None else pid
    return {OWNER: f"{CHECK_PREFIX}{pid}", OWNER_HOST: host(), OWNER_STARTED: start_stamp(pid) or ""}


def alive(pid: int) -> bool:
    """Whether a process `pid` exists (one we may not signal counts: it exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owner_gone(labels: Mapping[str, str]) -> bool:
    """True only when the check run that started a container with these labels no longer runs."""
    owner = labels.get(OWNER, "")
    if not owner.startswith(CHECK_PREFIX) or labels.get(OWNER_HOST) != host():
        return False  # not a check run's, or a run on another host: cannot be judged from here
    try:
        pid = int(owner.removeprefix(CHECK_PREFIX))
    except ValueError:
        return False
    started = labels.get(OWNER_STARTED, "")
    if pid <= 0:
        return False
    if not alive(pid):
        return True
    if not started:
        return False  # a live pid and no start time to compare: maybe the owner itself
    now, exited = _inspect(pid)
    if exited:
        return True  # a zombie: killed, its parent has not reaped it yet
    return now is not None and now != started  # the pid is another process's now


def remove_orphaned_checks(runtime: ContainerRuntime) -> list[str]:
    """Remove the check containers (and SageMakerContainers) whose owning process is gone; returns
    their names."""
    removed = []
    for handle in _list_checks(runtime):
        if owner_gone(handle.labels):
            try:
                runtime.remove(handle.id)
            except EngineError as exc:  # e.g. another run removing it at the same moment
                log.warning("could not remove %s of an ended check run: %s", handle.name, exc.message)
                continue
            removed.append(handle.name)
            starter = "`smlocal check` run" if handle.labels.get(ROLE) == "check" else "test process"
            log.info(
                "removed %s: its %s (%s) ended without removing it",
                handle.name,
                starter,
                handle.labels.get(OWNER),
            )
    return removed


def _list_checks(runtime: ContainerRuntime, attempts: int = 3) -> list[ContainerHandle]:
    """Every check container on the engine. Listing inspects each container found, so another run
    removing one of its own meanwhile fails the call (not found): then the list is read again."""
    for attempt in range(attempts):
        try:
            return [*runtime.list(CHECK_SELECTOR), *runtime.list(TESTCONTAINER_SELECTOR)]
        except EngineError:
            if attempt == attempts - 1:
                raise
    return []
