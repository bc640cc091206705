"""`smlocal down`: stop exactly the server of one state dir and that server's containers.

The server is found by STATE_DIR/server.json (emulator.server_record), else at the URL the command was
given; either way it is stopped only when its health route names the state dir's owner id, so a
server of another state dir that happens to answer there keeps running. Containers are removed by
their `smlocal.owner` label; `--all` widens that to every smlocal container on the engine. Either way
the containers of `smlocal check` runs that ended without removing them (killed by a CI timeout) go
too; a live check run's are left alone (emulator/process_owner.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from emulator.admin_client import ServerUnreachable, admin_request
from emulator.process_owner import alive, remove_orphaned_checks
from emulator.runtime.labels import MANAGED_SELECTOR, OWNER, owner_id
from emulator.server_record import read_record

#: Seconds a stopping server may take beyond the containers' grace before `down` stops them itself.
SERVER_EXIT_MARGIN_S = 15.0


@dataclass(frozen=True)
class DownResult:
    server: str  # what happened to the server, one phrase
    containers: int
    #: containers of ended `smlocal check` runs that were removed
    check_containers: int = 0


def _owner_at(url: str) -> str | None:
    """The owner id the server at url reports, "" for a server that reports none, None if none answers."""
    try:
        resp = admin_request(url, "GET", "health", timeout=2)
    except ServerUnreachable:
        return None
    try:
        body = resp.json()
    except ValueError:
        return ""
    return str(body.get("owner", "")) if resp.status_code == 200 and isinstance(body, dict) else ""


def _wait_gone(url: str, pid: int | None, timeout_s: float) -> None:
    """Until the server stops answering and (when its pid is known) its process has exited."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        answering = _owner_at(url) is not None
        if not answering and (pid is None or not alive(pid)):
            return
        time.sleep(0.1)


def stop_server(state_dir: Path, fallback_url: str, grace_s: float) -> str:
    """Shut down the server of state_dir, if one answers; says what happened."""
    owner = owner_id(state_dir)
    record = read_record(state_dir)
    urls = [record.url] if record is not None and record.owner == owner else []
    if fallback_url not in urls:
        urls.append(fallback_url)
    others: list[str] = []
    for url in urls:
        found = _owner_at(url)
        if found is None:
            continue
        if found != owner:
            others.append(url)
            continue
        admin_request(url, "POST", "shutdown", timeout=5)
        pid = record.pid if record is not None and record.url == url else None
        _wait_gone(url, pid, grace_s + SERVER_EXIT_MARGIN_S)
        return f"stopped the server of {state_dir} at {url}"
    if others:
        elsewhere = ", ".join(others)
        return f"no server of {state_dir} answers ({elsewhere}: another state dir's server, left running)"
    return f"no server of {state_dir} answers"


def down(
    state_dir: Path,
    fallback_url: str,
    grace_s: float,
    every_container: bool = False,
) -> DownResult:
    from emulator.runtime.docker import DockerRuntime

    state_dir = state_dir.resolve()
    server = stop_server(state_dir, fallback_url, grace_s)
    runtime = DockerRuntime()
    runtime.ping()
    selector = dict(MANAGED_SELECTOR)
    if not every_container:
        selector[OWNER] = owner_id(state_dir)
    handles = runtime.list(selector)
    for handle in handles:
        runtime.stop(handle.id, grace_s)
        runtime.remove(handle.id)
    orphans = remove_orphaned_checks(runtime)
    return DownResult(server, len(handles), len(orphans))
