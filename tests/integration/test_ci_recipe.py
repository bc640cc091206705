"""The gate of docs/ci.md gates: tests/user_project/ci.sh on a broken image fails at `smlocal check`.

The good run is .ci/run's "user project CI" phase (the same script on the sample as it is). Here
the script runs on a copy of the sample whose server imports a package the image does not have, a
regression `docker build` does not notice: the container exits at start, the gate exits 1, its JUnit
report names the failed check with the container's last log lines, and the project's tests never run.
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from contract_tests.containers import SageMakerContainer
from tests.fixtures.sagemaker_container import no_reaper  # noqa: F401
from tests.fixtures.user_project import build_runner_python, copy_project, junit_summary, run_ci, tag_for
from tests.unit.test_ci_recipe import blocks

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("no_reaper")]


@pytest.fixture
def broken_tag(docker_engine: docker.DockerClient) -> Iterator[str]:
    """The broken variant's tag; its image (built by ci.sh) is removed afterwards."""
    tag = tag_for("broken")
    yield tag
    try:
        docker_engine.images.remove(tag)
    except docker.errors.ImageNotFound:
        pass


def test_a_broken_image_fails_the_gate_with_a_junit_report(
    docker_engine: docker.DockerClient, broken_tag: str, tmp_path: Path
) -> None:
    runner_python = build_runner_python(docker_engine)
    project = copy_project(tmp_path / "project")
    app = project / "app.py"
    app.write_text(
        app.read_text().replace("from flask import", "import numpy as np  # noqa: F401\nfrom flask import", 1)
    )

    result = run_ci(project, broken_tag, runner_python, capture=True)

    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]
    assert docker_engine.images.get(broken_tag).id  # the build passed: only the gate catches it
    report = project / "smlocal-check.xml"
    summary = junit_summary(report)
    assert summary.failures >= 1 and "start.no-exit" in summary.failed, str(summary)
    failure = report.read_text()
    # gunicorn halts with 3, or 1 when the halt itself raises (both seen): the code is gunicorn's
    assert f"`docker run {broken_tag} serve` exited with code " in failure, failure[-3000:]
    assert "before GET /ping ever answered 200" in failure, failure[-3000:]
    assert "Worker failed to boot" in failure, failure[-3000:]  # the container's last log lines
    assert not (project / "pytest-report.xml").exists()  # set -e: the project's tests never ran
    assert "test session starts" not in output


@pytest.mark.slow  # the whole script: gate and tests (about 20 s)
def test_failing_project_tests_fail_the_script_after_the_gate_passed(
    docker_engine: docker.DockerClient, broken_tag: str, tmp_path: Path
) -> None:
    """A model artifact with other weights serves fine (the gate passes: it cannot know the right
    answers), but the project's own test of the predictions fails, and so does ci.sh."""
    runner_python = build_runner_python(docker_engine)
    project = copy_project(tmp_path / "project")
    (project / "model" / "model.json").write_text('{"weights": [1.0, 1.0, 1.0], "bias": 0.0}\n')

    result = run_ci(project, broken_tag, runner_python, capture=True)

    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]
    gate = junit_summary(project / "smlocal-check.xml")
    assert gate.failures == 0 and gate.errors == 0 and gate.tests > gate.skipped, str(gate)
    tests = junit_summary(project / "pytest-report.xml")
    assert tests.failed == ("test_predicts_with_the_packed_weights",), str(tests)
    assert "{'predictions': [6.0, 0.0]} == {'predictions': [4.75, 0.25]}" in output


@pytest.mark.slow  # pip download (cached: a few seconds), the build, one container (about 20 s)
def test_the_wheelhouse_recipe_builds_with_no_network(
    docker_engine: docker.DockerClient, base_image: str, broken_tag: str, tmp_path: Path
) -> None:
    """docs/ci.md's recipe for a `docker build` that reaches no package index, as the page writes it
    (its `sh` commands and its Dockerfile), on a copy of the sample and smlocal's base image: the
    image built with `--network none` serves the sample's prediction."""
    (commands,) = blocks("sh")
    (dockerfile,) = blocks("dockerfile")
    project = copy_project(tmp_path / "project")
    (project / "Dockerfile.wheelhouse").write_text(dockerfile)
    env = {**os.environ, "IMAGE": broken_tag, "BASE_IMAGE": base_image}
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", commands],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert "--network none" in commands and any((project / "wheelhouse").glob("flask-*.whl"))
    model = tmp_path / "model.tar.gz"
    with tarfile.open(model, "w:gz") as tar:
        tar.add(project / "model" / "model.json", arcname="model.json")
    payload = (project / "tests" / "payload.json").read_bytes()
    with SageMakerContainer(broken_tag, model_data=model, startup_timeout_s=60) as container:
        answer = container.invoke(payload, accept="application/json")
    assert (answer.status, json.loads(answer.body)) == (200, {"predictions": [4.75, 0.25]}), answer.text()
