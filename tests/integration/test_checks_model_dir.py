"""The model-dir.* contract checks: model-dir.read-only FAILS on its broken twin
(tests/fixtures/twins/model-dir.read-only: writes into /opt/ml/model at start) and PASSES on the good
echo image; a server that logs the EROFS failure but stays healthy fails too."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import docker
import pytest

from contract_tests.checks.model_dir import erofs_lines
from contract_tests.result import CheckResult, Outcome
from emulator.runtime.images import build_image

pytestmark = pytest.mark.docker

RunOne = Callable[..., CheckResult]
TwinImage = Callable[[str], str]

CHECK = "model-dir.read-only"
EROFS_LINE = "OSError: [Errno 30] Read-only file system: '/opt/ml/model/compiled-cache.bin'"


def test_twin_writing_the_model_dir_fails_with_the_log_line(run_one: RunOne, twin_image: TwinImage) -> None:
    result = run_one(CHECK, twin_image(CHECK))
    assert result.id == CHECK
    assert result.outcome is Outcome.FAILED, f"{result.outcome}: {result.message}"
    message = result.message
    assert "exited with code 1 during startup" in message
    assert f"`{EROFS_LINE}`" in message  # the log line, quoted
    assert "/opt/ml/model" in message and "read-only" in message
    assert "Fix: Do not write to /opt/ml/model" in message
    assert result.evidence["exit_code"] == 1
    assert result.evidence["erofs_lines"] == [EROFS_LINE]


def test_good_image_passes(run_one: RunOne, echo_image: str) -> None:
    result = run_one(CHECK, echo_image)
    assert result.id == CHECK
    assert result.outcome is Outcome.PASSED, f"{result.outcome}: {result.message}"
    assert "read-only" in result.message


def test_a_start_failure_of_another_kind_is_skipped(run_one: RunOne, echo_image: str) -> None:
    result = run_one(CHECK, echo_image, environment={"EXIT_AT_START": "4"})
    assert result.outcome is Outcome.SKIPPED, f"{result.outcome}: {result.message}"
    assert "exited with code 4" in result.message and "start." in result.message


LOGGING_DOCKERFILE = """\
ARG ECHO_IMAGE
FROM ${ECHO_IMAGE}
ENTRYPOINT ["/bin/sh", "-c", "touch /opt/ml/model/cache.bin || true; exec python3 -u /opt/program/server.py \\"$@\\"", "sh"]
"""


def test_healthy_container_that_logged_erofs_on_the_model_dir_fails(
    run_one: RunOne, echo_image: str, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    # A server that tries to write into /opt/ml/model, logs the failure and serves anyway.
    (tmp_path / "Dockerfile").write_text(LOGGING_DOCKERFILE)
    tag = "smlocal-twin/model-dir.read-only-logged:latest"
    build_image(tmp_path, tag, buildargs={"ECHO_IMAGE": echo_image}, client=docker_engine)
    result = run_one(CHECK, tag)
    assert result.outcome is Outcome.FAILED, f"{result.outcome}: {result.message}"
    line = "touch: cannot touch '/opt/ml/model/cache.bin': Read-only file system"
    assert "became healthy" in result.message
    assert f"`{line}`" in result.message
    assert result.evidence["erofs_lines"] == [line]


def test_erofs_lines() -> None:
    logs = f"echo: starting\nTraceback (most recent call last):\n{EROFS_LINE}\nmkdir: /tmp: Read-only file system\n"
    assert erofs_lines(logs) == [EROFS_LINE, "mkdir: /tmp: Read-only file system"]
    assert erofs_lines(logs, "/opt/ml/model") == [EROFS_LINE]
    assert erofs_lines("all fine\n") == []
