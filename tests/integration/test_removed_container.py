"""A container removed under a running server (`docker rm -f` by someone else): the instance leaves
rotation and is replaced as for an exit, with one clear log line and no unretrieved task exception."""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

import docker
import pytest

from emulator.errors import EngineError
from emulator.runtime.docker import DockerRuntime
from tests.fixtures.smlocal_server import Smlocal
from tests.integration.test_fleet import endpoint_containers

pytestmark = pytest.mark.docker


def test_removed_container_is_replaced_without_a_traceback(
    smlocal: Smlocal, caplog: pytest.LogCaptureFixture
) -> None:
    smlocal.deploy("Removed")
    try:
        (victim,) = endpoint_containers(smlocal, "Removed")
        caplog.set_level(logging.INFO)
        victim.remove(force=True)  # what another user's `docker rm -f` does
        deadline = time.monotonic() + 30
        replacement = None
        while time.monotonic() < deadline:
            running = endpoint_containers(smlocal, "Removed")
            described = smlocal.sm.describe_endpoint(EndpointName="Removed")
            if (
                running
                and running[0].id != victim.id
                and described["ProductionVariants"][0]["CurrentInstanceCount"] == 1
            ):
                replacement = running[0]
                break
            time.sleep(0.05)
        assert replacement is not None, "the removed instance was not replaced"
        assert smlocal.rt.invoke_endpoint(EndpointName="Removed", Body=b"back")["Body"].read() == b"back"
        time.sleep(1.0)  # let the stop of the removed container finish
        gc.collect()
        log_text = (smlocal.state_dir / "logs" / "Removed" / "_smlocal.log").read_text()
    finally:
        smlocal.cleanup("Removed")
    gc.collect()
    unretrieved = [r for r in caplog.records if "never retrieved" in r.getMessage()]
    assert unretrieved == [], unretrieved[0].getMessage() + str(unretrieved[0].exc_info)
    assert [r for r in caplog.records if r.exc_info] == []
    (line,) = [line for line in log_text.splitlines() if "replacing it" in line]
    # `docker rm -f` kills first: the exit may be seen before the removal starts
    assert line.endswith((" was removed from the engine (docker rm?); replacing it", " exited; replacing it"))
    assert f"replaced {line.split('/')[1].split(' ')[0]} in " in log_text


def test_stop_and_logs_of_a_container_removed_meanwhile(
    docker_engine: docker.DockerClient, echo_image: str
) -> None:
    """The race behind the traceback: the engine found the container, then `docker rm -f` removed it
    before the stop's wait (or the log read) reached the engine, which answers 404."""
    runtime = DockerRuntime(docker_engine)
    container = docker_engine.containers.run(echo_image, detach=True)
    container.remove(force=True)
    runtime._get = lambda _id: container  # type: ignore[method-assign]  # found just before the removal
    state = runtime.stop(container.id, 1.0)
    assert (state.running, state.status) == (False, "removed")
    assert runtime.logs(container.id) == ""


def test_a_failed_stop_of_a_dead_instance_is_one_log_line(
    smlocal: Smlocal, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the engine answers while a dead instance is stopped, the background task's outcome
    is retrieved: one warning line (also in _smlocal), no 'Task exception was never retrieved'."""
    service = smlocal.server.service
    assert service is not None
    smlocal.deploy("StopFails")
    (victim,) = endpoint_containers(smlocal, "StopFails")
    real_stop = service.deployer.stop_instances

    async def failing_stop(instances: Any, grace_s: float | None = None) -> None:
        if any(i.handle.id == victim.id for i in instances):
            raise EngineError("Docker engine error: injected for the test")
        await real_stop(instances, grace_s)

    monkeypatch.setattr(service.deployer, "stop_instances", failing_stop)
    caplog.set_level(logging.INFO)
    try:
        victim.kill()
        deadline = time.monotonic() + 30
        log_path = smlocal.state_dir / "logs" / "StopFails" / "_smlocal.log"
        while time.monotonic() < deadline and "could not stop" not in log_path.read_text():
            time.sleep(0.05)
        gc.collect()
        log_text = log_path.read_text()
    finally:
        monkeypatch.undo()
        smlocal.cleanup("StopFails")
        victim.remove(force=True)
    gc.collect()
    (line,) = [line for line in log_text.splitlines() if "could not stop" in line]
    assert line.endswith("could not stop its container: Docker engine error: injected for the test")
    assert [r for r in caplog.records if "never retrieved" in r.getMessage()] == []
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "could not stop" in r.getMessage()
    ]
    assert len(warnings) == 1
