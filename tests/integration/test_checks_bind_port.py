"""start.bind-to-port: SKIPPED with a note on the unlabelled echo image (no container started), PASSED on
the echo image labelled for multi-container use (it listens on $SAGEMAKER_BIND_TO_PORT), FAILED on the
labelled twins that ignore the variable, listen on 8080 as well, or exit when it is set
(tests/fixtures/twins/start.bind-to-port*).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from contract_tests.check_config import CheckConfig
from contract_tests.checks.bind_port import BIND_PORT, SAFE_PORT_RANGE
from contract_tests.registry import select
from contract_tests.result import CheckResult, Outcome
from contract_tests.runner import run_check, run_checks
from contract_tests.target import Target
from emulator.config import ContractLimits
from emulator.process_owner import check_labels
from emulator.runtime import labels
from tests.fixtures.twins import FAST_LIMITS

pytestmark = pytest.mark.docker

CHECK = "start.bind-to-port"
LABEL = "com.amazonaws.sagemaker.capabilities.accept-bind-to-port"
#: A startup timeout the failing twins must not wait out: they are judged on what 8080 answers.
PATIENT = ContractLimits(startup_timeout_s=30.0, invocation_timeout_s=2.0, stop_grace_s=3.0)

Runner = Callable[..., CheckResult]


def test_skipped_without_the_label_and_no_container_started(tmp_path: Path, echo_image: str) -> None:
    (check,) = select([CHECK])
    target = Target(CheckConfig(image=echo_image, limits=FAST_LIMITS, cache_dir=tmp_path / "check"))
    try:
        result = run_check(check, target)
        ours = target.runtime.list({labels.ROLE: "check", **check_labels()})
    finally:
        target.close()
    assert result.outcome is Outcome.SKIPPED, result.message
    assert "cannot join a multi-container model or an inference pipeline" in result.message
    assert (
        f'"Your Ecr Image {echo_image} does not contain required {LABEL}=true Docker label(s)."'
        in result.message
    )
    assert f"add `LABEL {LABEL}=true`" in result.message
    assert not result.warnings and result.evidence["label"] is None
    assert ours == []  # judged from the image's labels alone


def test_a_label_other_than_true_is_skipped_with_a_warning(
    run_one: Runner, twin_image: Callable[[str], str]
) -> None:
    result = run_one(CHECK, twin_image("start.bind-to-port.label-not-true"))
    assert result.outcome is Outcome.SKIPPED, result.message
    assert "cannot join a multi-container model" in result.message
    assert result.warnings == (
        f"the label {LABEL} is 'True', not 'true' (what SageMaker's message asks for; smlocal counts only 'true')",
    )


def test_passes_on_the_labelled_image_that_honours_the_variable(
    run_one: Runner, twin_image: Callable[[str], str]
) -> None:
    result = run_one(CHECK, twin_image("start.bind-to-port.labelled"))
    assert result.outcome is Outcome.PASSED, result.message
    assert (
        f"started with SAGEMAKER_BIND_TO_PORT={BIND_PORT} (SAGEMAKER_SAFE_PORT_RANGE={SAFE_PORT_RANGE})"
        in (result.message)
    )
    assert f"GET /ping answered 200 on port {BIND_PORT}" in result.message
    assert "port 8080 gave no HTTP answer" in result.message
    assert result.evidence["bind_port"]["first_status"] == 200
    assert result.evidence["default_port"]["first_status"] is None
    assert result.evidence["default_port"]["probes"] >= 1
    assert result.evidence["environment"] == {
        "SAGEMAKER_BIND_TO_PORT": str(BIND_PORT),
        "SAGEMAKER_SAFE_PORT_RANGE": SAFE_PORT_RANGE,
    }


def test_fails_when_the_labelled_image_ignores_the_variable(
    run_one: Runner, twin_image: Callable[[str], str]
) -> None:
    result = run_one(CHECK, twin_image("start.bind-to-port"), limits=PATIENT)
    assert result.outcome is Outcome.FAILED, result.message
    assert f"carries {LABEL}=true and was started with SAGEMAKER_BIND_TO_PORT={BIND_PORT}" in result.message
    assert "the server ignores the variable: port 8080 answered GET /ping HTTP 200" in result.message
    assert f"while port {BIND_PORT} gave no HTTP answer" in result.message
    assert "would fail its ping health check" in result.message
    assert "echo: listening on 8080" in result.message  # the log line that gives it away
    assert "Listen on $SAGEMAKER_BIND_TO_PORT only when it is set, or remove the label." in result.message
    assert result.evidence["default_port"]["first_status"] == 200
    assert result.evidence["bind_port"]["first_status"] is None
    assert result.duration_s < PATIENT.startup_timeout_s / 2  # decided on 8080's answer, not the deadline


def test_fails_when_the_labelled_image_listens_on_8080_as_well(
    run_one: Runner, twin_image: Callable[[str], str]
) -> None:
    result = run_one(CHECK, twin_image("start.bind-to-port.both-ports"), limits=PATIENT)
    assert result.outcome is Outcome.FAILED, result.message
    assert f"GET /ping answered on port {BIND_PORT} (HTTP 200" in result.message
    assert "but port 8080 answered HTTP 200 as well: the server listens on both" in result.message
    assert "echo: listening on 8080" in result.message and f"echo: listening on {BIND_PORT}" in result.message


def test_fails_when_the_labelled_image_exits_with_the_variable_set(
    run_one: Runner, twin_image: Callable[[str], str]
) -> None:
    result = run_one(CHECK, twin_image("start.bind-to-port.exits-with-port"))
    assert result.outcome is Outcome.FAILED, result.message
    assert f"but started with SAGEMAKER_BIND_TO_PORT={BIND_PORT}" in result.message
    assert "the container exited with code 4 after" in result.message
    assert "Serve on $SAGEMAKER_BIND_TO_PORT when it is set, or remove the label." in result.message
    assert "started without them it became healthy (start.healthy)" in result.message
    assert "entrypoint: SAGEMAKER_BIND_TO_PORT is not supported" in result.message
    assert result.evidence["exit_code"] == 4


def test_skips_when_the_image_never_gets_healthy_at_all(
    tmp_path: Path, run_one: Runner, twin_image: Callable[[str], str]
) -> None:
    image = twin_image("start.bind-to-port.labelled")
    alone = run_one(CHECK, image, environment={"EXIT_AT_START": "3"})  # the shared start is made to compare
    assert alone.outcome is Outcome.SKIPPED, alone.message
    assert "never became healthy" in alone.message and "see start.healthy" in alone.message
    config = CheckConfig(
        image=image, limits=FAST_LIMITS, cache_dir=tmp_path / "c", environment={"EXIT_AT_START": "3"}
    )
    results = {r.id: r for r in run_checks(select(["start"]), Target(config))}
    assert results["start.no-exit"].outcome is Outcome.FAILED
    assert results[CHECK].outcome is Outcome.SKIPPED, results[CHECK].message
    assert "environment" not in results[CHECK].evidence  # the shared start said enough: none of its own


def test_skips_when_docker_cannot_start_the_image_at_all(
    run_one: Runner, twin_image: Callable[[str], str]
) -> None:
    result = run_one(CHECK, twin_image("start.bind-to-port.no-serve"))
    assert result.outcome is Outcome.SKIPPED, result.message
    assert result.message == "Docker could not start the container; see start.no-exit"
