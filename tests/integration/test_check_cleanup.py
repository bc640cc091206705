"""`smlocal check` leaves no container behind: SIGTERM removes its containers at once; a run killed
with SIGKILL (a CI timeout) leaves one, which the next run, or `smlocal down`, removes; a live run's
containers are never removed by another run. Real `smlocal check` processes against the echo image;
every assertion selects by the owner labels of the runs these tests started."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest

from emulator.process_owner import host, start_stamp
from emulator.runtime import labels
from tests.fixtures.signals import default_sigint_held

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
#: A run that stays busy: start.healthy polls a container whose /ping answers 503 for a minute.
BUSY = ("--check", "start.healthy", "--startup-timeout", "90", "--env", "STARTUP_DELAY_S=90")
QUICK = ("--check", "start.healthy", "--startup-timeout", "30")


def _env() -> dict[str, str]:
    return {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT)}


#: pid -> the start stamp of the run this module started with it (emulator.process_owner): a container
#: labelled with the pid of an ended process that the kernel has given the pid again is not this run's.
_STAMPS: dict[int, str] = {}


def _start(image: str, *args: str, cwd: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "emulator.cli", "check", image, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=_env(),
        # the SIGINT tests' Ctrl-C must reach it, and a signal sent at once after spawn must be answered
        preexec_fn=default_sigint_held,
    )
    stamp = start_stamp(proc.pid)
    assert stamp is not None, "the run's start time cannot be read"
    _STAMPS[proc.pid] = stamp
    return proc


def _smlocal(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "emulator.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_env(),
        timeout=180,
    )


def _of(client: docker.DockerClient, pid: int) -> list[dict[str, str]]:
    """The containers of the check run with this pid on this host (running or not), as the engine's
    list has them (one call: no per-container lookup racing with a removal)."""
    selector = [
        f"{labels.OWNER}=check-{pid}",
        f"{labels.OWNER_HOST}={host()}",
        f"{labels.OWNER_STARTED}={_STAMPS[pid]}",
    ]
    found = client.api.containers(all=True, filters={"label": selector})
    return [{"id": c["Id"], "state": c["State"]} for c in found]


def _running_container(client: docker.DockerClient, proc: subprocess.Popen[str]) -> str:
    """Wait until the run has a running container (bounded); its id."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the run ended early: {proc.communicate()}"
        found = [c for c in _of(client, proc.pid) if c["state"] == "running"]
        if found:
            return found[0]["id"]
        time.sleep(0.1)
    raise AssertionError("the run started no container within 60 s")


def _exists(client: docker.DockerClient, container_id: str) -> bool:
    try:
        client.containers.get(container_id)
    except docker.errors.NotFound:
        return False
    return True


def _killed_run(client: docker.DockerClient, image: str, cwd: Path) -> str:
    """A run killed with SIGKILL while its container runs; the container it left (asserted left)."""
    proc = _start(image, *BUSY, cwd=cwd)
    container_id = _running_container(client, proc)
    proc.kill()
    proc.communicate(timeout=30)
    assert client.containers.get(container_id).status == "running", "SIGKILL leaves the container"
    return container_id


def test_the_next_run_removes_what_a_killed_run_left(
    echo_image: str, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    left = _killed_run(docker_engine, echo_image, tmp_path)
    proc = _start(echo_image, *QUICK, cwd=tmp_path)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, out + err
    assert not _exists(docker_engine, left), "the next run's first start removes the ended run's container"
    assert "its `smlocal check` run (check-" in err and "ended without removing it" in err
    assert _of(docker_engine, proc.pid) == []


def test_down_removes_what_a_killed_run_left(
    echo_image: str, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    left = _killed_run(docker_engine, echo_image, tmp_path)
    result = _smlocal("down", "--grace", "2", "--state-dir", str(tmp_path / "state"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "container(s) of ended `smlocal check` runs" in result.stderr, result.stderr
    assert not _exists(docker_engine, left)


def test_sigterm_removes_the_containers_at_once_and_a_live_run_keeps_its_own(
    echo_image: str, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    live = _start(echo_image, *BUSY, cwd=tmp_path)
    try:
        kept = _running_container(docker_engine, live)
        # Another run on the same engine, and `smlocal down` of a state dir: neither touches a live run's.
        other = _start(echo_image, *QUICK, cwd=tmp_path)
        out, err = other.communicate(timeout=180)
        assert other.returncode == 0, out + err
        result = _smlocal("down", "--grace", "2", "--state-dir", str(tmp_path / "state"), cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert docker_engine.containers.get(kept).status == "running"

        signalled = time.monotonic()
        live.send_signal(signal.SIGTERM)
        out, err = live.communicate(timeout=30)
        took = time.monotonic() - signalled
    finally:
        if live.poll() is None:
            live.kill()
            live.communicate()
    assert live.returncode == 128 + signal.SIGTERM, out + err
    assert "smlocal check: SIGTERM: removing this run's containers" in err
    assert _of(docker_engine, live.pid) == [], "SIGTERM leaves no container"
    assert not _exists(docker_engine, kept)
    assert took < 10, f"{took:.1f} s from SIGTERM to exit"


def test_sigint_removes_the_containers_at_once(
    echo_image: str, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    proc = _start(echo_image, *BUSY, cwd=tmp_path)
    try:
        container_id = _running_container(docker_engine, proc)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, out + err
    assert "smlocal check: interrupted" in err
    assert _of(docker_engine, proc.pid) == [] and not _exists(docker_engine, container_id)


#: When each run of the test below is signalled, in seconds after spawn: while the interpreter starts,
#: while it imports, while the image is resolved and the first container starts (on a 2-core machine
#: the first container runs about 1-2 s after spawn; the test above covers a running one).
SIGNAL_DELAYS_S = (0.0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8, 1.2)


@pytest.mark.parametrize(
    ("signum", "status", "said"),
    [
        (signal.SIGINT, 130, "smlocal check: interrupted"),
        (signal.SIGTERM, 143, "smlocal check: SIGTERM: removing this run's containers"),
    ],
    ids=["SIGINT", "SIGTERM"],
)
def test_a_signal_at_any_moment_after_spawn_ends_the_run_with_its_status(
    signum: signal.Signals,
    status: int,
    said: str,
    echo_image: str,
    docker_engine: docker.DockerClient,
    tmp_path: Path,
) -> None:
    """A run signalled as early as a launcher can (its pid known: Popen has returned) exits with the
    documented status, says so, and leaves no container, at every moment tried. Before, a signal that
    came before the handlers (SIGINT while the interpreter started or imported, SIGTERM before the run's
    handler) ended the process with -2 or -15."""
    for delay in SIGNAL_DELAYS_S:
        proc = _start(echo_image, *BUSY, cwd=tmp_path)
        try:
            time.sleep(delay)  # not a wait: the moment under test, counted from spawn
            proc.send_signal(signum)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == status, f"signalled {delay} s after spawn: {out + err}"
        assert said in err, f"signalled {delay} s after spawn: {err}"
        assert _of(docker_engine, proc.pid) == [], f"signalled {delay} s after spawn: a container was left"
