"""The start.* contract checks against the good echo image and their failing twins.

All start checks judge one shared container start, so each test runs the whole `start` group on one
image and asserts that exactly the twin's rule FAILS (the others pass or skip, pointing at it).
"""

from __future__ import annotations

import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from contract_tests import report
from contract_tests.check_config import CheckConfig
from contract_tests.checks.startup import PING_BODY_IGNORABLE_BYTES, _not_ignorable
from contract_tests.registry import select
from contract_tests.result import CheckResult, Outcome
from contract_tests.runner import run_checks
from contract_tests.target import Target
from emulator.config import ContractLimits
from tests.fixtures.twins import FAST_LIMITS

pytestmark = pytest.mark.docker

START_IDS = ["start.no-exit", "start.listens", "start.healthy", "start.ping-fast", "start.ping-body"]
#: The start check with a container of its own (tests/integration/test_checks_bind_port.py).
BIND_TO_PORT = "start.bind-to-port"

GroupRunner = Callable[..., dict[str, CheckResult]]


@pytest.fixture
def run_group(tmp_path: Path) -> GroupRunner:
    """Run every start.* check that judges the shared container start on one image: results by id."""

    def run(image: str, limits: ContractLimits = FAST_LIMITS, **config: Any) -> dict[str, CheckResult]:
        target = Target(CheckConfig(image=image, limits=limits, cache_dir=tmp_path / "check", **config))
        results = run_checks([c for c in select(["start"]) if c.id != BIND_TO_PORT], target)
        return {r.id: r for r in results}

    return run


def outcomes(results: dict[str, CheckResult]) -> dict[str, Outcome]:
    return {check_id: r.outcome for check_id, r in results.items()}


def test_the_group_has_the_six_start_checks() -> None:
    assert [c.id for c in select(["start"])] == [*START_IDS, BIND_TO_PORT]
    for c in select(["start"]):
        assert c.title and c.requirement and c.fix and "§3" in c.requirement


def test_good_image_passes_every_start_check_quickly(run_group: GroupRunner, echo_image: str) -> None:
    started = time.monotonic()
    results = run_group(echo_image, limits=ContractLimits())  # the default limits: 480 s, 2 s, ...
    took = time.monotonic() - started
    assert outcomes(results) == dict.fromkeys(START_IDS, Outcome.PASSED), {
        i: r.message for i, r in results.items()
    }
    assert "after start (limit 480 s)" in results["start.healthy"].message
    assert "5 of 5 follow-up pings 200" in results["start.healthy"].message
    assert "within 2 s" in results["start.ping-fast"].message
    assert "empty" in results["start.ping-body"].message
    assert all(not r.warnings for r in results.values())
    assert took < 10, {i: round(r.duration_s, 3) for i, r in results.items()}


def test_no_exit_fails_when_the_server_exits_at_start(
    run_group: GroupRunner, twin_image: Callable[[str], str]
) -> None:
    results = run_group(twin_image("start.no-exit"))
    failed = results["start.no-exit"]
    assert failed.outcome is Outcome.FAILED, failed.message
    assert "exited with code 3" in failed.message
    assert "echo: exiting at start with 3" in failed.message  # the last log lines
    assert "accept the argument `serve`" in failed.message  # the fix
    assert failed.evidence["exit_code"] == 3
    others = {i: o for i, o in outcomes(results).items() if i != "start.no-exit"}
    assert others == dict.fromkeys(others, Outcome.SKIPPED), {i: r.message for i, r in results.items()}
    assert "start.no-exit" in results["start.listens"].message


def test_no_exit_names_the_python_error_behind_a_failed_boot(
    run_group: GroupRunner, twin_image: Callable[[str], str]
) -> None:
    results = run_group(twin_image("start.no-exit.import-error"))
    failed = results["start.no-exit"]
    assert failed.outcome is Outcome.FAILED, failed.message
    assert "exited with code 3" in failed.message
    assert "HaltServer" in failed.message  # the last log lines: the arbiter's, not the cause
    error = "ModuleNotFoundError: No module named 'numpy_is_not_in_this_image'"
    assert f"The log shows a Python error at start: `{error}`. Fix that first" in failed.message
    assert failed.evidence["python_error"] == error


def test_no_exit_fails_when_the_entrypoint_rejects_serve(
    run_group: GroupRunner, twin_image: Callable[[str], str]
) -> None:
    results = run_group(twin_image("start.no-exit.rejects-serve"))
    failed = results["start.no-exit"]
    assert failed.outcome is Outcome.FAILED, failed.message
    assert "exited with code 64" in failed.message
    assert failed.message.startswith(
        "The container's log says: entrypoint.sh: unknown command 'serve'; usage: entrypoint.sh start\n"
    )
    fix = (
        "Fix: The container's log says `entrypoint.sh: unknown command 'serve'; usage: entrypoint.sh start`: "
    )
    assert f"{fix}the program does not take SageMaker's " in (failed.message)
    assert "The ENTRYPOINT must accept the argument `serve`" in failed.message
    assert {o for i, o in outcomes(results).items() if i != "start.no-exit"} == {Outcome.SKIPPED}


def test_no_exit_leads_with_the_log_line_of_a_serve_that_finds_no_model_folder(
    run_group: GroupRunner, twin_image: Callable[[str], str], tmp_path: Path
) -> None:
    """A `serve` script that exits 0 because the model data lacks its sub-folder: the right ENTRYPOINT,
    the wrong model data layout. The verdict's first line is the container's own words, then the hint."""
    image = twin_image("start.no-exit.model-layout")
    results = run_group(image)
    failed = results["start.no-exit"]
    assert failed.outcome is Outcome.FAILED, failed.message
    first, second, *_ = failed.message.splitlines()
    assert first == "The container's log says: serve: no model folder found in /opt/ml/model"
    assert second.startswith(f"`docker run {image} serve` exited with code 0 after ")
    assert "Exit code 0: the program ended by its own decision, not by a crash or a signal." in second
    assert (
        "Fix: The container's log says `serve: no model folder found in /opt/ml/model`: that is about the model "
        "data, not the ENTRYPOINT." in (second)
    )
    assert (
        "No --model-data was given, so /opt/ml/model was empty: give the model data the image serves"
        in second
    )
    assert "`tar tzf model.tar.gz`" in second
    assert "serve: looking for a model folder in /opt/ml/model" in failed.message  # the last log lines
    assert "The ENTRYPOINT must accept" not in failed.message
    assert failed.evidence["cause"] == ["serve: no model folder found in /opt/ml/model"]
    # The report shows the fix first: it leads with the log line too.
    assert report.explain(failed).fix.startswith("The container's log says `serve: no model folder found in ")
    assert {o for i, o in outcomes(results).items() if i != "start.no-exit"} == {Outcome.SKIPPED}

    # The same image with model data that has the sub-folder: it serves.
    folder = tmp_path / "model" / "llama-7b"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    archive = tmp_path / "model.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname="llama-7b")
    fixed = run_group(image, model_data=str(archive))
    assert outcomes(fixed) == dict.fromkeys(START_IDS, Outcome.PASSED), {
        i: r.message for i, r in fixed.items()
    }


def test_no_exit_given_model_data_points_at_its_layout(
    run_group: GroupRunner, twin_image: Callable[[str], str], tmp_path: Path
) -> None:
    archive = tmp_path / "model.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:  # the weights at the top, no sub-folder
        weights = tmp_path / "weights.bin"
        weights.write_bytes(b"\0" * 16)
        tar.add(weights, arcname="weights.bin")
    failed = run_group(twin_image("start.no-exit.model-layout"), model_data=str(archive))["start.no-exit"]
    assert failed.outcome is Outcome.FAILED, failed.message
    assert failed.message.startswith(
        "The container's log says: serve: no model folder found in /opt/ml/model\n"
    )
    assert (
        "that is about the model data, not the ENTRYPOINT. SageMaker extracts model.tar.gz" in failed.message
    )
    assert "No --model-data was given" not in failed.message


def test_no_exit_fails_when_docker_cannot_run_serve(
    run_group: GroupRunner, twin_image: Callable[[str], str]
) -> None:
    results = run_group(twin_image("start.no-exit.no-serve"))
    failed = results["start.no-exit"]
    assert failed.outcome is Outcome.FAILED, failed.message
    assert "could not start the container" in failed.message
    assert "Docker said: failed to create shim task" in failed.message  # the engine's reason, unwrapped
    assert "executable file not found" in failed.message
    others = {i: r for i, r in results.items() if i != "start.no-exit"}
    assert {r.outcome for r in others.values()} == {Outcome.SKIPPED}
    assert all("start.no-exit" in r.message for r in others.values())


def test_listens_fails_when_the_server_listens_on_another_port(
    run_group: GroupRunner, twin_image: Callable[[str], str]
) -> None:
    results = run_group(twin_image("start.listens"))
    failed = results["start.listens"]
    assert failed.outcome is Outcome.FAILED, failed.message
    assert "nothing answered HTTP on container port 8080" in failed.message
    assert "echo: listening on 8081" in failed.message  # the log line that gives it away
    assert "0.0.0.0" in failed.message
    assert outcomes(results) == {
        "start.no-exit": Outcome.PASSED,
        "start.listens": Outcome.FAILED,
        "start.healthy": Outcome.SKIPPED,
        "start.ping-fast": Outcome.SKIPPED,
        "start.ping-body": Outcome.SKIPPED,
    }, {i: r.message for i, r in results.items()}
    assert "start.listens" in results["start.healthy"].message


def test_listens_follows_sagemaker_bind_to_port(run_one: Callable[..., CheckResult], echo_image: str) -> None:
    result = run_one("start.listens", echo_image, environment={"SAGEMAKER_BIND_TO_PORT": "9000"})
    assert result.outcome is Outcome.PASSED, result.message
    assert "port 9000 (SAGEMAKER_BIND_TO_PORT=9000)" in result.message
    assert result.evidence["container_port"] == 9000


def test_listens_failure_names_sagemaker_bind_to_port(
    run_one: Callable[..., CheckResult], twin_image: Callable[[str], str]
) -> None:
    result = run_one(
        "start.listens", twin_image("start.listens"), environment={"SAGEMAKER_BIND_TO_PORT": "9000"}
    )
    assert result.outcome is Outcome.FAILED, result.message
    assert "SageMaker set SAGEMAKER_BIND_TO_PORT=9000, so the server must listen on 9000" in result.message


def test_healthy_fails_when_ping_never_answers_200(
    run_group: GroupRunner, twin_image: Callable[[str], str]
) -> None:
    results = run_group(twin_image("start.healthy"))
    failed = results["start.healthy"]
    assert failed.outcome is Outcome.FAILED, failed.message
    assert "did not answer 200 within the startup timeout of 6 s" in failed.message
    assert "/ping answered HTTP 503" in failed.message
    assert "the first HTTP answer came" in failed.message
    assert '"GET /ping HTTP/1.1" 503 -  [' in failed.message  # the repeated log line, shown once
    assert outcomes(results) == {
        "start.no-exit": Outcome.PASSED,
        "start.listens": Outcome.PASSED,
        "start.healthy": Outcome.FAILED,
        "start.ping-fast": Outcome.PASSED,
        "start.ping-body": Outcome.SKIPPED,
    }, {i: r.message for i, r in results.items()}


def test_ping_fast_fails_when_ping_is_slower_than_the_ping_timeout(
    run_group: GroupRunner, twin_image: Callable[[str], str]
) -> None:
    results = run_group(twin_image("start.ping-fast"))
    failed = results["start.ping-fast"]
    assert failed.outcome is Outcome.FAILED, failed.message
    assert "not answered within the 2 s ping timeout" in failed.message
    assert failed.evidence["slowest_ping_s"] >= 2.0
    assert "took 2.0" in failed.message  # the observed time
    assert outcomes(results) == {
        "start.no-exit": Outcome.PASSED,
        "start.listens": Outcome.SKIPPED,
        "start.healthy": Outcome.SKIPPED,
        "start.ping-fast": Outcome.FAILED,
        "start.ping-body": Outcome.SKIPPED,
    }, {i: r.message for i, r in results.items()}
    assert "start.ping-fast" in results["start.listens"].message
    assert "start.ping-fast" in results["start.healthy"].message


def test_ping_body_fails_on_an_html_page(run_group: GroupRunner, twin_image: Callable[[str], str]) -> None:
    results = run_group(twin_image("start.ping-body"))
    failed = results["start.ping-body"]
    assert failed.outcome is Outcome.FAILED, failed.message
    size = (
        len("<html><head><title>ok</title></head><body><h1>Model server is healthy</h1></body></html>") * 600
    )
    assert f"{size:,} bytes, over the 1,024 bytes tolerated" in failed.message
    assert "'<html><head><title>ok</title>" in failed.message
    assert "empty body" in failed.message
    assert failed.evidence["body_bytes"] == size
    others = {i: o for i, o in outcomes(results).items() if i != "start.ping-body"}
    assert others == dict.fromkeys(others, Outcome.PASSED), {i: r.message for i, r in results.items()}


def test_ping_body_tolerates_a_short_text_with_a_warning(
    run_one: Callable[..., CheckResult], echo_image: str
) -> None:
    result = run_one("start.ping-body", echo_image, environment={"PING_BODY": "OK"})
    assert result.outcome is Outcome.PASSED, result.message
    assert "'OK'" in result.message
    assert result.warnings and "2-byte body" in result.warnings[0]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"", None),
        (b"OK\n", None),
        (b'{"status": "Healthy"}', None),
        (b"x" * PING_BODY_IGNORABLE_BYTES, None),
        (b"x" * (PING_BODY_IGNORABLE_BYTES + 1), "1,025 bytes, over the 1,024 bytes tolerated"),
        (b"\x89PNG\r\n\x1a\n", "8 bytes of binary data (not UTF-8 text)"),
        (b"ok\x00", "3 bytes with control characters (not text)"),
    ],
)
def test_what_counts_as_an_ignorable_ping_body(body: bytes, reason: str | None) -> None:
    assert _not_ignorable(body) == reason
