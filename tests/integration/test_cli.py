"""The `smlocal` command end to end, as a user runs it: a real server process and real containers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import httpx
import pytest

from emulator.runtime import labels
from emulator.runtime.labels import owner_id
from tests.fixtures.docker_env import track_owner
from tests.fixtures.smlocal_server import model_tar

pytestmark = pytest.mark.docker


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def smlocal(*args: str, url: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SMLOCAL_ENDPOINT_URL": url}
    result = subprocess.run(
        [sys.executable, "-m", "emulator.cli", *args], capture_output=True, text=True, env=env, timeout=120
    )
    if check and result.returncode != 0:
        raise AssertionError(f"smlocal {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    track_owner(owner_id(tmp_path / "state"))
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "emulator.cli",
            "serve",
            "--port",
            str(port),
            "--state-dir",
            str(tmp_path / "state"),
            "--stop-grace",
            "2",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{url}/_smlocal/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert proc.poll() is None, (tmp_path / "serve.log").read_text()
        assert time.monotonic() < deadline, "smlocal serve did not answer"
        time.sleep(0.1)
    yield url, proc
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    log.close()


def test_deploy_invoke_ls_logs_delete_down(
    server: tuple[str, subprocess.Popen[bytes]], echo_image: str, tmp_path: Path
) -> None:
    url, proc = server
    data = model_tar(tmp_path / "model.tar.gz", {"weights": b"cli"})
    deployed = smlocal(
        "deploy",
        echo_image,
        "--model-data",
        str(data),
        "--name",
        "Cli",
        "--env",
        "GREETING=hi",
        "--instance-count",
        "2",
        url=url,
    )
    assert deployed.stdout.strip() == "Cli"

    invoked = smlocal("invoke", "Cli", "--body", "hello", "--content-type", "text/plain", url=url)
    assert invoked.stdout == "hello\n"
    out = tmp_path / "out.bin"
    smlocal("invoke", "Cli", "--custom-attributes", "env=GREETING", "--output", str(out), url=url)
    assert out.read_bytes() == b"hi"

    listed = smlocal("ls", url=url)
    assert "Cli" in listed.stdout and "InService" in listed.stdout

    logs = smlocal("logs", "Cli", url=url)
    assert "echo: listening on 8080" in logs.stdout
    assert logs.stdout.count("AllTraffic/i-") >= 2

    failed = smlocal("invoke", "Nope", "--body", "x", url=url, check=False)
    assert failed.returncode == 1
    assert "Endpoint Nope of account 123456789012 not found." in failed.stderr

    smlocal("delete", "Cli", url=url)
    smlocal("down", "--grace", "2", "--state-dir", str(tmp_path / "state"), url=url)
    assert proc.wait(timeout=30) == 0
    client = docker.from_env()
    assert client.containers.list(all=True, filters={"label": f"{labels.ENDPOINT}=Cli"}) == []
    client.close()


def test_down_removes_what_a_killed_server_left(
    server: tuple[str, subprocess.Popen[bytes]], echo_image: str, tmp_path: Path
) -> None:
    url, proc = server
    smlocal("deploy", echo_image, "--name", "Left", url=url)
    proc.send_signal(signal.SIGKILL)  # no cleanup at all
    proc.wait(timeout=10)
    client = docker.from_env()
    assert len(client.containers.list(filters={"label": f"{labels.ENDPOINT}=Left"})) == 1
    result = smlocal("down", "--grace", "2", "--state-dir", str(tmp_path / "state"), url=url)
    assert "stopped" in result.stderr
    assert client.containers.list(all=True, filters={"label": f"{labels.ENDPOINT}=Left"}) == []
    client.close()


def test_failed_deploy_says_why(server: tuple[str, subprocess.Popen[bytes]], echo_image: str) -> None:
    url, _ = server
    result = smlocal("deploy", echo_image, "--name", "Bad", "--env", "EXIT_AT_START=4", url=url, check=False)
    assert result.returncode == 1
    assert "Failed: CannotStartContainerError" in result.stderr


def test_deploy_and_invoke_a_multi_container_endpoint(
    server: tuple[str, subprocess.Popen[bytes]], echo_bind_image: str
) -> None:
    """`smlocal deploy --container ... --mode direct|serial` and `smlocal invoke --container`."""
    url, _ = server
    smlocal(
        "deploy", "--container", f"a={echo_bind_image}", "--container", f"b={echo_bind_image}",
        "--mode", "direct", "--env", "GREETING=hi", "--name", "CliDirect", url=url,
    )  # fmt: skip
    # each call reached the container it named: its SAGEMAKER_BIND_TO_PORT differs
    ports = {
        name: smlocal(
            "invoke",
            "CliDirect",
            "--container",
            name,
            "--custom-attributes",
            "env=SAGEMAKER_BIND_TO_PORT",
            url=url,
        ).stdout.strip()
        for name in ("a", "b")
    }
    assert ports == {"a": "9081", "b": "9082"}
    missing = smlocal("invoke", "CliDirect", "--body", "x", url=url, check=False)
    assert missing.returncode == 1 and "TargetContainerHostname" in missing.stderr

    smlocal(
        "deploy", "--container", f"first={echo_bind_image}", "--container", f"second={echo_bind_image}",
        "--name", "CliSerial", url=url,
    )  # fmt: skip
    described = smlocal("ls", url=url)
    assert "CliSerial" in described.stdout and "CliDirect" in described.stdout
    chained = smlocal("invoke", "CliSerial", "--body", "hello", "--content-type", "text/plain", url=url)
    assert chained.stdout == "hello\n"  # echo, then echo again: the pipeline's last answer
    smlocal("delete", "CliDirect", url=url)
    smlocal("delete", "CliSerial", url=url)
