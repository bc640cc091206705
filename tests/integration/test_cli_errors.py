"""The `smlocal` command as a user types it: every mistake ends in one clear line and status 2 (usage)
or 1, never a traceback; `down` stops exactly the server and containers of the state dir it names.

Each command runs as a subprocess (`python3 -m emulator.cli ...`, this tree first on PYTHONPATH).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import httpx
import pytest

from emulator.runtime import labels
from emulator.runtime.labels import owner_id
from emulator.server_record import read_record
from tests.fixtures.docker_env import track_owner

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def smlocal(
    *args: str, url: str | None = None, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    environ.pop("SMLOCAL_ENDPOINT_URL", None)
    environ.pop("AWS_ENDPOINT_URL_SAGEMAKER", None)
    if url:
        environ["SMLOCAL_ENDPOINT_URL"] = url
    return subprocess.run(
        [sys.executable, "-m", "emulator.cli", *args],
        capture_output=True,
        text=True,
        env=environ,
        cwd=cwd or ROOT,
        timeout=180,
    )


def one_line_error(result: subprocess.CompletedProcess[str], status: int) -> str:
    """The command failed with `status` and said so in one line (argparse's usage line aside)."""
    assert result.returncode == status, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    if status == 2:  # argparse: the usage, then `smlocal CMD: error: ...`
        lines = [line for line in lines if not line.startswith(("usage:", " "))]
    assert len(lines) == 1, result.stderr
    return lines[0]


def _dead_url() -> str:
    return f"http://127.0.0.1:{_free_port()}"  # nothing listens there


# --- usage errors: status 2 ------------------------------------------------------------------------


def test_env_without_equals_is_a_usage_error() -> None:
    line = one_line_error(smlocal("deploy", "img", "--env", "FOO", url=_dead_url()), 2)
    assert line == "smlocal deploy: error: argument --env: expected KEY=VALUE, got 'FOO'"


@pytest.mark.parametrize("count", ["0", "-1", "two"])
def test_instance_count_below_one_is_a_usage_error(count: str) -> None:
    line = one_line_error(smlocal("deploy", "img", "--instance-count", count, url=_dead_url()), 2)
    assert line.startswith("smlocal deploy: error: argument --instance-count: ")
    assert repr(count) in line


# --- errors: status 1 ------------------------------------------------------------------------------


def test_invoke_with_a_missing_body_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    line = one_line_error(smlocal("invoke", "ep", "--body-file", str(missing), url=_dead_url()), 1)
    assert line == f"smlocal: Cannot read --body-file {missing}: No such file or directory"


@pytest.mark.parametrize("command", [["logs", "ep"], ["logs", "ep", "--follow"], ["metrics", "ep"]])
def test_admin_commands_without_a_server(command: list[str]) -> None:
    url = _dead_url()
    line = one_line_error(smlocal(*command, url=url), 1)
    assert line.startswith(f"smlocal: No smlocal server answers at {url} ("), line
    assert line.endswith("start one with `smlocal serve` or point --endpoint-url at it."), line


def test_demo_without_the_sample_extra_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['diffusers'] = None; "  # as if the `sample` extra were not installed
        "from emulator.cli import main; sys.exit(main(['demo', '--build-dir', sys.argv[1]]))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with_build = ROOT / ".smlocal" / "never-built"
    result = subprocess.run(
        [sys.executable, "-c", code, str(with_build)], capture_output=True, text=True, env=env, timeout=180
    )
    line = one_line_error(result, 1)
    assert line == (
        "smlocal: smlocal demo builds its model on this machine and needs diffusers: "
        "pip install 'smlocal[sample]'"
    )
    assert not with_build.exists(), "nothing was built before the check"


def test_serve_help_shows_help_and_defaults() -> None:
    result = smlocal("serve", "--help")
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())  # argparse wraps at the terminal width
    for expected in (
        "--port PORT port of every API (boto3's endpoint_url) (default: 8090)",
        "--host HOST address to listen on (other than loopback: warned) (default: 127.0.0.1)",
        "(default: .smlocal)",
        "--stop-grace STOP_GRACE seconds between SIGTERM and SIGKILL (default: 30)",
        "seconds until the first 200 from /ping (default: 480)",
        "--time-scale N",
    ):
        assert expected in text, (expected, result.stdout)
    assert "(default: None)" not in text


# --- with servers: `down`, the httpx lines, metrics at 80 columns ---------------------------------


@dataclass
class Served:
    url: str
    state_dir: Path
    proc: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        try:
            return httpx.get(f"{self.url}/_smlocal/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def containers(self) -> list[str]:
        client = docker.from_env()
        try:
            selector = [f"{labels.OWNER}={owner_id(self.state_dir)}"]
            return [c.status for c in client.containers.list(all=True, filters={"label": selector})]
        finally:
            client.close()


def _serve(state_dir: Path, log: Path, cwd: Path) -> Served:
    track_owner(owner_id(state_dir))
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    cwd.mkdir(parents=True, exist_ok=True)
    out = log.open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "emulator.cli", "serve", "--port", str(port), "--state-dir", str(state_dir)]
        + ["--stop-grace", "2"],
        stdout=out,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=cwd,
    )
    out.close()  # the child has its own copy
    served = Served(url, state_dir, proc, log)
    deadline = time.monotonic() + 60
    while not served.alive():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "smlocal serve did not answer"
        time.sleep(0.1)
    return served


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[Served]]:
    started: list[Served] = []

    def stop_all() -> None:
        for s in started:
            if s.proc.poll() is None:
                s.proc.send_signal(signal.SIGTERM)
                s.proc.wait(timeout=60)

    try:
        for name in ("a", "b"):
            started.append(_serve(tmp_path / name / ".smlocal", tmp_path / f"{name}.log", tmp_path / name))
        yield started
    finally:
        stop_all()


def _deploy(served: Served, image: str, name: str) -> None:
    result = smlocal("deploy", image, "--name", name, url=served.url)
    assert result.returncode == 0, result.stderr
    assert "HTTP Request" not in result.stderr


@pytest.mark.docker
def test_down_stops_exactly_the_named_state_dirs_server_and_containers(
    servers: list[Served], echo_image: str, tmp_path: Path
) -> None:
    a, b = servers
    _deploy(a, echo_image, "InA")
    _deploy(b, echo_image, "InB")
    assert a.containers() == ["running"] and b.containers() == ["running"]
    record = read_record(a.state_dir)
    assert record is not None and record.url == a.url and record.owner == owner_id(a.state_dir)

    # A state dir no server serves, with B at the URL `down` would once have posted shutdown to.
    nobody = smlocal("down", "--grace", "2", "--state-dir", str(tmp_path / "none"), url=b.url)
    assert nobody.returncode == 0, nobody.stderr
    assert "another state dir's server, left running" in nobody.stderr
    assert b.alive() and b.containers() == ["running"]

    # down --state-dir A, told B's URL: stops A (found by A's server.json) and A's containers only.
    result = smlocal("down", "--grace", "2", "--state-dir", str(a.state_dir), url=b.url)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == (
        f"smlocal down: stopped the server of {a.state_dir} at {a.url}; "
        "stopped 0 container(s) of that state dir"  # A's server stopped its container itself
    ), result.stderr
    assert a.proc.wait(timeout=60) == 0
    assert a.containers() == []
    assert read_record(a.state_dir) is None, "the server removes its record when it stops"
    assert b.alive() and b.containers() == ["running"]

    # Without --state-dir: the default state dir (.smlocal of the working directory), here B's.
    result = smlocal("down", "--grace", "2", cwd=b.state_dir.parent)
    assert result.returncode == 0, result.stderr
    assert f"stopped the server of {b.state_dir} at {b.url}" in result.stderr
    assert b.proc.wait(timeout=60) == 0
    assert b.containers() == []


@pytest.mark.docker
def test_client_commands_print_no_httpx_lines_and_metrics_fit_80_columns(
    servers: list[Served], echo_image: str
) -> None:
    served = servers[0]
    _deploy(served, echo_image, "Narrow")
    invoked = smlocal("invoke", "Narrow", "--body", "hi", url=served.url)
    assert invoked.returncode == 0, invoked.stderr
    logs = smlocal("logs", "Narrow", url=served.url)
    assert logs.returncode == 0, logs.stderr
    assert "echo: listening on 8080" in logs.stdout
    assert "HTTP Request" not in logs.stderr + logs.stdout

    metrics = smlocal("metrics", "Narrow", url=served.url, env={"COLUMNS": "80"})
    assert metrics.returncode == 0, metrics.stderr
    assert "HTTP Request" not in metrics.stderr
    out = metrics.stdout
    assert max(len(line) for line in out.splitlines()) <= 80, out
    assert "Narrow: requests in 60 s periods" in out and "latency and use" in out
    cells = [c.strip() for line in out.splitlines() for c in re.split("[┃│]", line)]
    words = set(" ".join(cells).split())
    for header in ("invocations", "instance", "errors", "overhead", "memory", "variant", "AllTraffic"):
        assert header in words, (header, out)  # whole, never cut across lines
    assert "…" not in out
