"""A contract check whose container someone else removes mid-run says so: one ERROR naming the cause,
no FAILED verdict and no fix advice for the image; the checks after it are skipped, not failed."""

from __future__ import annotations

import os
from pathlib import Path

import docker
import pytest

from contract_tests import report
from contract_tests.check_config import CheckConfig
from contract_tests.registry import select
from contract_tests.result import CAUSE_CONTAINER_REMOVED, CheckResult, Outcome
from contract_tests.runner import run_checks
from contract_tests.target import Target
from emulator.runtime import labels
from tests.fixtures.twins import FAST_LIMITS

pytestmark = pytest.mark.docker


def test_a_container_removed_by_someone_else_is_one_error_not_a_verdict(
    echo_image: str, tmp_path: Path, docker_engine: docker.DockerClient
) -> None:
    checks = select(["start.healthy", "invocations"])
    assert len(checks) >= 3
    target = Target(CheckConfig(image=echo_image, limits=FAST_LIMITS, cache_dir=tmp_path / "check"))
    removed: list[str] = []

    def someone_else_removes_it(result: CheckResult) -> None:
        if result.id != "start.healthy":
            return
        assert result.outcome is Outcome.PASSED, result.message
        owner = f"{labels.OWNER}=check-{os.getpid()}"
        for container in docker_engine.containers.list(all=True, filters={"label": owner}):
            removed.append(container.name)
            container.remove(force=True)  # as `docker rm -f` or another run's cleanup would

    results = run_checks(checks, target, on_result=someone_else_removes_it)
    assert removed, "the shared container was there to remove"
    outcomes = [r.outcome for r in results]
    assert outcomes[0] is Outcome.PASSED
    assert Outcome.FAILED not in outcomes, [(r.id, r.outcome, r.message) for r in results]
    errors = [r for r in results if r.outcome is Outcome.ERROR]
    assert len(errors) == 1, [(r.id, r.outcome, r.message) for r in results]
    (error,) = errors
    assert error.message == (
        f"Container {removed[0]} was removed by someone else while the check ran (docker rm, "
        "`smlocal down --all`, another run's cleanup): no verdict on the image; run the checks again."
    )
    assert error.evidence["cause"] == CAUSE_CONTAINER_REMOVED
    explained = report.explanation(error, fix="change the image")
    assert "Fix:" not in explained and report.ERROR_NOTE not in explained and "See " not in explained
    after = results[results.index(error) + 1 :]
    assert after and all(r.outcome is Outcome.SKIPPED for r in after)
    assert all(f"(see {error.id})" in r.message for r in after)
