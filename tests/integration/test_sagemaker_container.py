"""SageMakerContainer (contract_tests/containers.py) on a real engine with the echo image: started as
SageMaker starts a model container, waited for as SageMaker's health check waits, stopped as SageMaker
stops one, and nothing left behind."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
from testcontainers.core.config import testcontainers_config
from testcontainers.core.container import Reaper
from testcontainers.core.exceptions import ContainerStartException

from contract_tests.container_wait import ContainerExited, HealthCheckTimeout
from contract_tests.containers import ROLE, ReaperUnavailable, SageMakerContainer
from emulator.errors import ImageNotFound, ModelDataError, ModelDataNotFound, SetupError
from emulator.model.resources import ModelDataSource
from emulator.runtime import labels
from tests.fixtures.s3server import make_s3_client
from tests.fixtures.sagemaker_container import MODEL_FILES, no_reaper, write_model_tar  # noqa: F401

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("no_reaper")]

ROOT = Path(__file__).resolve().parents[2]
#: The echo image is ready in well under a second; a loaded machine may take a few.
STARTUP_S = 30.0
OURS = {labels.ROLE: ROLE, labels.OWNER: f"check-{os.getpid()}"}


def ours(client: docker.DockerClient) -> list[str]:
    """Names of this process's SageMakerContainers on the engine (running or not)."""
    found = client.api.containers(all=True, filters={"label": [f"{k}={v}" for k, v in OURS.items()]})
    return [str(c["Names"][0]).lstrip("/") for c in found]


@pytest.fixture(autouse=True)
def nothing_left_behind(docker_engine: docker.DockerClient) -> Iterator[None]:
    """Every test ends with none of this process's SageMakerContainers on the engine."""
    before = ours(docker_engine)
    yield
    assert ours(docker_engine) == before


@pytest.fixture
def model_tar(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    path = tmp_path / "model.tar.gz"
    return path, write_model_tar(path)


def attrs(client: docker.DockerClient, container: SageMakerContainer) -> dict[str, Any]:
    found: dict[str, Any] = client.api.inspect_container(container.get_container_id())
    return found


def test_started_the_sagemaker_way(
    docker_engine: docker.DockerClient, echo_image: str, model_tar: tuple[Path, dict[str, str]]
) -> None:
    path, digests = model_tar
    with SageMakerContainer(
        echo_image, model_data=path, environment={"MODEL_NAME": "m1"}, startup_timeout_s=STARTUP_S
    ).with_env("EXTRA", "yes") as model:
        seen = attrs(docker_engine, model)
        assert seen["Config"]["Cmd"] == ["serve"]
        (mount,) = seen["Mounts"]
        assert (mount["Destination"], mount["RW"]) == ("/opt/ml/model", False)
        assert Path(mount["Source"]) == model.model_dir
        listing = json.loads(model.invoke(b"{}", custom_attributes="model=1").body)
        assert listing["files"] == digests and listing["writable"] is False
        # port 8080 on 127.0.0.1 only, the one .url and testcontainers' API name
        assert seen["HostConfig"]["PortBindings"] == {"8080/tcp": [{"HostIp": "127.0.0.1", "HostPort": ""}]}
        (binding,) = seen["NetworkSettings"]["Ports"]["8080/tcp"]
        assert binding["HostIp"] == "127.0.0.1"
        assert model.url == f"http://127.0.0.1:{binding['HostPort']}"
        assert (model.get_container_host_ip(), model.get_exposed_port(8080)) == ("127.0.0.1", model.host_port)
        # the environment given, and what SageMaker sets for a single container (platform_env)
        assert model.invoke(b"", custom_attributes="env=MODEL_NAME").body == b"m1"
        assert model.invoke(b"", custom_attributes="env=SAGEMAKER_SAFE_PORT_RANGE").body == b"21000-21999"
        assert seen["Config"]["Hostname"] == "model.aws.local"
        assert model.invoke(b"", custom_attributes="env=EXTRA").body == b"yes"
        unset = model.invoke(b"", custom_attributes="env=SAGEMAKER_BIND_TO_PORT")
        assert (unset.status, unset.text()) == (404, "echo: env var SAGEMAKER_BIND_TO_PORT is not set")
        assert seen["Config"]["Labels"][labels.MANAGED] == "true"
        assert {k: seen["Config"]["Labels"][k] for k in OURS} == OURS
        assert "org.testcontainers.session-id" in seen["Config"]["Labels"]
        assert seen["Config"]["StopSignal"] == "SIGTERM"
        # the round trip, and what the container received
        payload = bytes(range(256)) * 10
        answer = model.invoke(payload, content_type="application/x-test", accept="application/x-test")
        assert (answer.status, answer.body, answer.content_type) == (200, payload, "application/x-test")
        sent = json.loads(model.invoke("{}", accept="text/csv", custom_attributes="headers=1").body)
        assert (sent["content-type"], sent["accept"]) == ("application/json", "text/csv")
        ping = model.ping()
        assert (ping.status, ping.body) == (200, b"")
        assert "echo: listening on 8080" in model.logs()
        stdout, _ = model.get_logs()  # testcontainers' own API works on it
        assert b"echo: listening on 8080" in stdout
        name = seen["Name"].lstrip("/")
    assert name not in ours(docker_engine)


@pytest.mark.parametrize("form", ["directory", "file-uri", "s3"])
def test_model_data_forms(
    docker_engine: docker.DockerClient,
    echo_image: str,
    model_tar: tuple[Path, dict[str, str]],
    tmp_path: Path,
    s3_server: str,
    form: str,
) -> None:
    path, digests = model_tar
    options: dict[str, Any] = {}
    if form == "directory":  # mounted as it is, read-only
        folder = tmp_path / "model"
        folder.mkdir()
        for name, data in MODEL_FILES.items():
            (folder / name).write_bytes(data)
        model_data: Any = folder
    elif form == "file-uri":
        model_data = f"file://{path}"
    else:
        s3 = make_s3_client(s3_server)
        bucket = f"hf-tc-{os.getpid()}"
        s3.create_bucket(Bucket=bucket)
        s3.upload_file(str(path), bucket, "models/model.tar.gz")
        model_data = ModelDataSource(uri=f"s3://{bucket}/models/model.tar.gz")
        options["s3_client_factory"] = lambda: make_s3_client(s3_server)
    with SageMakerContainer(echo_image, model_data, startup_timeout_s=STARTUP_S, **options) as model:
        listing = json.loads(model.invoke(b"{}", custom_attributes="model=1").body)
        assert listing["files"] == digests and listing["writable"] is False
        if form == "directory":
            assert model.model_dir == folder


def test_model_data_that_is_not_there_starts_nothing(
    docker_engine: docker.DockerClient, echo_image: str, tmp_path: Path
) -> None:
    missing = tmp_path / "nothing.tar.gz"
    with pytest.raises(ModelDataNotFound) as raised:
        with SageMakerContainer(echo_image, model_data=missing):
            pass
    assert str(missing) in raised.value.message


def test_model_data_that_cannot_be_extracted_fails_as_the_endpoint_would(
    docker_engine: docker.DockerClient, echo_image: str, tmp_path: Path
) -> None:
    broken = tmp_path / "model.tar.gz"
    broken.write_bytes(b"not a gzip tar at all")
    with pytest.raises(ModelDataError) as raised:
        SageMakerContainer(echo_image, model_data=broken, cache_dir=tmp_path / "cache").start()
    assert raised.value.message == (
        f'Failed to extract model data archive from URL "{broken}". '
        "Please ensure that the object located at the URL is a valid tar.gz archive."
    )


def test_an_image_that_is_not_there(docker_engine: docker.DockerClient) -> None:
    with pytest.raises(ImageNotFound) as raised:
        SageMakerContainer("hf/no-such-image:latest").start()
    assert raised.value.message == "No local image matches hf/no-such-image:latest"


def test_testcontainers_options_pass_through(
    docker_engine: docker.DockerClient, echo_image: str, tmp_path: Path
) -> None:
    (tmp_path / "extra.txt").write_text("x")
    model = (
        SageMakerContainer(echo_image, startup_timeout_s=STARTUP_S, labels={"team": "search"})
        .with_volume_mapping(tmp_path, "/data", "ro")
        .with_exposed_ports(9000)
        .with_kwargs(hostname="model-host")
    )
    with model:
        seen = attrs(docker_engine, model)
        assert f"{tmp_path}:/data:ro" in seen["HostConfig"]["Binds"]
        assert seen["HostConfig"]["PortBindings"]["9000/tcp"] == [{"HostIp": "127.0.0.1", "HostPort": ""}]
        assert (seen["Config"]["Hostname"], seen["Config"]["Labels"]["team"]) == ("model-host", "search")


def test_a_container_that_never_answers_200_fails_with_its_logs(
    docker_engine: docker.DockerClient, echo_image: str
) -> None:
    container = SageMakerContainer(echo_image, environment={"PING_STATUS": "503"}, startup_timeout_s=2)
    started = time.monotonic()
    with pytest.raises(HealthCheckTimeout) as raised:
        container.start()
    took = time.monotonic() - started
    message = str(raised.value)
    assert "did not pass the ping health check: no HTTP 200 from GET /ping within 2 s" in message
    assert "last seen: /ping answered HTTP 503" in message
    assert "echo: listening on 8080" in message  # the container's logs
    assert isinstance(raised.value, TimeoutError) and raised.value.exit_code is None
    assert 2.0 <= took < 12.0
    with pytest.raises(ContainerStartException):  # removed at once (and none left: by label)
        container.get_container_id()


def test_a_tcp_accept_is_not_ready(docker_engine: docker.DockerClient, echo_image: str) -> None:
    """Nothing listens for 60 s: docker-proxy accepts on the published port and resets."""
    with pytest.raises(HealthCheckTimeout) as raised:
        SageMakerContainer(echo_image, environment={"LISTEN_DELAY_S": "60"}, startup_timeout_s=2).start()
    assert raised.value.last_observation.startswith("/ping failed: ")


def test_each_ping_gets_two_seconds(docker_engine: docker.DockerClient, echo_image: str) -> None:
    with pytest.raises(HealthCheckTimeout) as raised:
        SageMakerContainer(echo_image, environment={"PING_SLEEP_S": "3"}, startup_timeout_s=3).start()
    # the server answers 200 after 3 s: a longer ping timeout would have passed it
    assert raised.value.last_observation == "/ping did not answer within 2 s"
    assert " attempts of 2 s each; last seen: /ping did not answer within 2 s)" in str(raised.value)


def test_a_container_that_exits_fails_at_once_with_its_exit_code(
    docker_engine: docker.DockerClient, echo_image: str
) -> None:
    started = time.monotonic()
    with pytest.raises(ContainerExited) as raised:
        with SageMakerContainer(echo_image, environment={"EXIT_AT_START": "7"}, startup_timeout_s=STARTUP_S):
            pass
    assert time.monotonic() - started < STARTUP_S / 2  # not the startup limit: the exit ends the wait
    assert raised.value.exit_code == 7
    assert "exited with code 7" in str(raised.value)
    assert "echo: exiting at start with 7" in str(raised.value)


def test_with_command_replaces_serve(docker_engine: docker.DockerClient, echo_image: str) -> None:
    with pytest.raises(ContainerExited) as raised:
        SageMakerContainer(echo_image, startup_timeout_s=STARTUP_S).with_command("train").start()
    assert raised.value.exit_code == 2
    assert "expected the argument 'serve', got ['train']" in raised.value.logs


def test_stop_sends_sigterm_and_removes(docker_engine: docker.DockerClient, echo_image: str) -> None:
    model = SageMakerContainer(echo_image, startup_timeout_s=STARTUP_S).start()
    container_id = model.get_container_id()
    started = time.monotonic()
    model.stop()  # the default 30 s grace: the echo server exits on SIGTERM well before
    took = time.monotonic() - started
    assert model.final_state is not None and model.final_state.exit_code == 0  # its SIGTERM handler's 0
    assert took < 10.0
    with pytest.raises(docker.errors.NotFound):
        docker_engine.containers.get(container_id)


def test_a_container_ignoring_sigterm_is_killed_after_the_grace(
    docker_engine: docker.DockerClient, echo_image: str
) -> None:
    model = SageMakerContainer(
        echo_image, environment={"IGNORE_SIGTERM": "1"}, startup_timeout_s=STARTUP_S, stop_grace_s=2
    ).start()
    started = time.monotonic()
    model.stop()
    took = time.monotonic() - started
    assert model.final_state is not None and model.final_state.exit_code == 137  # SIGKILL
    assert 2.0 <= took < 8.0


def test_stop_takes_its_own_grace(docker_engine: docker.DockerClient, echo_image: str) -> None:
    model = SageMakerContainer(echo_image, environment={"IGNORE_SIGTERM": "1"}, startup_timeout_s=STARTUP_S)
    with model:
        started = time.monotonic()
        model.stop(grace_s=1)
        took = time.monotonic() - started
    assert model.final_state is not None and model.final_state.exit_code == 137
    assert 1.0 <= took < 7.0


def test_memory_and_cpu_limits(docker_engine: docker.DockerClient, echo_image: str) -> None:
    with SageMakerContainer(
        echo_image, startup_timeout_s=STARTUP_S, memory_limit_bytes=256 * 1024**2, cpus=0.5
    ) as model:
        host = attrs(docker_engine, model)["HostConfig"]
        limit = 256 * 1024**2
        assert (host["Memory"], host["MemorySwap"], host["NanoCpus"]) == (limit, limit, 500_000_000)


def test_the_quick_start_example_runs(echo_image: str, tmp_path: Path) -> None:
    """docs/quickstart-testcontainers.md's example, run as a user's test file with pytest."""
    example = ROOT / "docs" / "examples" / "testcontainers_quickstart.py"
    (tmp_path / "test_quickstart.py").write_text(example.read_text())
    write_model_tar(tmp_path / "model.tar.gz")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "MODEL_IMAGE": echo_image,
        "TESTCONTAINERS_RYUK_DISABLED": "true",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_quickstart.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout


_HOLD = """
import sys, time
from testcontainers.core.config import testcontainers_config
testcontainers_config.ryuk_disabled = True
from contract_tests.containers import SageMakerContainer
model = SageMakerContainer(sys.argv[1], startup_timeout_s=30).start()
print(model.get_container_id(), flush=True)
time.sleep(600)
"""


def test_down_removes_what_a_killed_test_process_left(
    docker_engine: docker.DockerClient, echo_image: str, tmp_path: Path
) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD, echo_image], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    container_id = proc.stdout.readline().strip()  # "" if it ended without starting one
    proc.kill()
    proc.communicate(timeout=30)
    try:
        assert container_id and docker_engine.containers.get(container_id).status == "running"
        down = subprocess.run(
            [
                sys.executable,
                "-m",
                "emulator.cli",
                "down",
                "--grace",
                "2",
                "--state-dir",
                str(tmp_path / "s"),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert down.returncode == 0, down.stderr
        with pytest.raises(docker.errors.NotFound):
            docker_engine.containers.get(container_id)
    finally:
        if container_id:
            with contextlib.suppress(docker.errors.NotFound):
                docker_engine.containers.get(container_id).remove(force=True)


def test_without_a_registry_ryuk_is_one_clear_error(
    docker_engine: docker.DockerClient, echo_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ryuk left enabled on a machine that reaches no registry: its image cannot be pulled, and start()
    says so in one error naming TESTCONTAINERS_RYUK_DISABLED=true, not in docker's traceback."""
    image = testcontainers_config.ryuk_image
    try:
        docker_engine.images.get(image)
        pytest.skip(f"{image} is on this engine: Ryuk would start")
    except docker.errors.ImageNotFound:
        pass
    reapers = {"name": "testcontainers-ryuk"}
    before = docker_engine.api.containers(all=True, filters=reapers)
    monkeypatch.setattr(testcontainers_config, "ryuk_disabled", False)
    try:
        with pytest.raises(ReaperUnavailable) as raised:
            SageMakerContainer(echo_image, startup_timeout_s=STARTUP_S).start()
    finally:
        Reaper.delete_instance()
    message = raised.value.message
    assert message.startswith(
        f"testcontainers' reaper (Ryuk, image {image}) could not be started: APIError: "
    )
    assert (
        "Where no registry can be reached its image cannot be pulled: set TESTCONTAINERS_RYUK_DISABLED=true"
        in message
    )
    assert isinstance(raised.value, SetupError) and raised.value.__suppress_context__
    assert len(message.splitlines()) == 1
    assert Reaper._instance is None and Reaper._container is None
    assert docker_engine.api.containers(all=True, filters=reapers) == before  # nothing was started
