"""The shutdown.* contract checks: each FAILS on its broken twin (tests/fixtures/twins/shutdown.*) and
PASSES on the good echo image, which exits on SIGTERM after finishing the requests in flight.

The tests run with FAST_LIMITS (grace 3 s): a container that ignores SIGTERM costs 3 s, not 30."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker
import pytest

from contract_tests.check_config import CheckConfig
from contract_tests.registry import select
from contract_tests.result import CheckResult, Outcome
from contract_tests.runner import run_checks
from contract_tests.running import RunningContainer
from contract_tests.target import Target
from emulator.runtime import labels
from emulator.runtime.images import build_image
from tests.fixtures.twins import FAST_LIMITS, TWIN_PREFIX, TWINS_DIR

pytestmark = pytest.mark.docker

RunOne = Callable[..., CheckResult]
TwinImage = Callable[[str], str]

GRACE = FAST_LIMITS.stop_grace_s


def _outcome(result: CheckResult, check_id: str, outcome: Outcome) -> str:
    assert result.id == check_id
    assert result.outcome is outcome, f"{result.outcome}: {result.message} {dict(result.evidence)}"
    return result.message


@pytest.fixture
def no_containers_left(docker_engine: docker.DockerClient) -> Callable[[], None]:
    """Asserts that the check removed every container it started (they are labelled with our pid)."""

    def check() -> None:
        owner = f"{labels.OWNER}=check-{os.getpid()}"
        left = docker_engine.containers.list(all=True, filters={"label": owner})
        assert left == [], f"containers left behind: {[c.name for c in left]}"

    return check


def assert_still_running_after_the_grace(message: str) -> None:
    """The message names the seconds the container was seen running after SIGTERM: the grace period
    and the engine's round trips (tenths of a second more on a loaded machine), never less."""
    found = re.search(r"still running (\d+\.\d) s after SIGTERM", message)
    assert found is not None, message
    assert GRACE <= float(found.group(1)) < GRACE + 1.0, message


def without_state(processes: list[str]) -> list[str]:
    """The process tree's lines (pids, nesting, command lines) without each process's momentary
    scheduler state: `[Ssl]` before may read `[Rsl]` after when the server is on a CPU at that instant."""
    return [re.sub(r" \[[A-Za-z<+]+\] ", " ", line, count=1) for line in processes]


class TestIdle:
    CHECK = "shutdown.idle"

    def test_twin_ignoring_sigterm_fails(
        self, run_one: RunOne, twin_image: TwinImage, no_containers_left: Callable[[], None]
    ) -> None:
        result = run_one(self.CHECK, twin_image(self.CHECK))
        message = _outcome(result, self.CHECK, Outcome.FAILED)
        assert_still_running_after_the_grace(message)
        assert f"SIGKILL it after {GRACE:g} s" in message
        assert "a first SIGTERM, right after the first /ping 200, was ignored too" in message
        assert (
            "PID 1 (`python3 -u /opt/program/server.py serve`) is the server, and it kept running:" in message
        )
        assert "echo: listening on 8080" in message  # the last log lines
        assert "Handle SIGTERM in the server" in message and "exec-form ENTRYPOINT" in message  # the fix
        evidence = result.evidence
        assert evidence["sigterm_outcome"] == "ignored"
        assert evidence["exit_code"] is None
        assert evidence["seconds_to_exit"] >= GRACE
        (only,) = evidence["processes_before"]
        assert only.startswith("PID 1 (host pid ") and only.endswith(
            "python3 -u /opt/program/server.py serve"
        )
        assert without_state(evidence["processes_after"]) == without_state(evidence["processes_before"])
        no_containers_left()

    def test_shell_pid1_not_forwarding_fails(self, run_one: RunOne, twin_image: TwinImage) -> None:
        result = run_one(self.CHECK, twin_image("shutdown.idle.shell-pid1"))
        message = _outcome(result, self.CHECK, Outcome.FAILED)
        assert_still_running_after_the_grace(message)
        assert (
            "PID 1 (`/bin/sh /opt/program/serve serve`) is a shell: it got SIGTERM and did not pass it on, "
            "so the server (`python3 -u /opt/program/server.py serve`), its child, never saw it and still runs."
        ) in message
        assert "Fix: Make the server PID 1: `exec` it" in message
        assert "not sent again, the process tree shows why" in message
        assert result.duration_s < 2 * GRACE  # one grace period: a second SIGTERM would meet the same shell
        evidence = result.evidence
        assert "second_signalled_after_ready_s" not in evidence
        assert evidence["sigterm_outcome"] == "shell-no-forward"
        shell, server = evidence["processes_before"]
        assert shell.startswith("PID 1 (host pid ") and shell.endswith("/bin/sh /opt/program/serve serve")
        assert server.startswith("  host pid ") and server.endswith("python3 -u /opt/program/server.py serve")
        assert without_state(evidence["processes_after"]) == without_state(evidence["processes_before"])

    def test_server_exits_but_pid1_lingers_fails(self, run_one: RunOne, twin_image: TwinImage) -> None:
        result = run_one(self.CHECK, twin_image("shutdown.idle.pid1-lingers"))
        message = _outcome(result, self.CHECK, Outcome.FAILED)
        assert_still_running_after_the_grace(message)
        assert (
            "The server (`python3 -u /opt/program/server.py serve`) exited after SIGTERM, but PID 1 "
            "(`/bin/sh /opt/program/serve serve`), waiting on `tail -f /dev/null`, kept running: the "
            "container stops only when PID 1 exits."
        ) in message
        assert "echo: SIGTERM" in message and "echo: stopped" in message  # the server did stop
        assert "Fix: Let PID 1 end when the server does" in message
        assert "not sent again, the process tree shows why" in message
        assert result.duration_s < 2 * GRACE
        evidence = result.evidence
        assert evidence["sigterm_outcome"] == "pid1-lingers"
        assert any(
            line.endswith("python3 -u /opt/program/server.py serve") for line in evidence["processes_before"]
        )
        after = evidence["processes_after"]
        assert after[0].endswith("/bin/sh /opt/program/serve serve")
        assert not any(line.endswith("python3 -u /opt/program/server.py serve") for line in after)
        assert any(line.endswith("tail -f /dev/null") for line in after)

    def test_late_handler_passes_idle_and_points_to_early(
        self, run_one: RunOne, twin_image: TwinImage
    ) -> None:
        result = run_one(self.CHECK, twin_image("shutdown.early"))
        message = _outcome(result, self.CHECK, Outcome.PASSED)
        assert "after SIGTERM with code 0, sent " in message
        assert "right after the first /ping 200, was ignored: see shutdown.early" in message
        assert result.evidence["sigterm_outcome"] == "no-handler-yet"
        assert result.evidence["second_signalled_after_ready_s"] >= GRACE

    def test_good_image_passes(
        self, run_one: RunOne, echo_image: str, no_containers_left: Callable[[], None]
    ) -> None:
        result = run_one(self.CHECK, echo_image)
        message = _outcome(result, self.CHECK, Outcome.PASSED)
        assert message.startswith("exited ") and "after SIGTERM with code 0" in message
        assert "ms after the first /ping 200" in message
        assert result.evidence["exit_code"] == 0
        assert result.evidence["sigterm_outcome"] == "exited"
        assert result.evidence["seconds_to_exit"] < 1.0
        assert result.evidence["signalled_after_ready_s"] < 1.0
        no_containers_left()

    def test_never_healthy_is_skipped(self, run_one: RunOne, echo_image: str) -> None:
        result = run_one(self.CHECK, echo_image, environment={"EXIT_AT_START": "3"})
        message = _outcome(result, self.CHECK, Outcome.SKIPPED)
        assert "exited with code 3" in message and "start.healthy" in message


class TestEarly:
    CHECK = "shutdown.early"

    def test_twin_installing_its_handler_late_fails(
        self, run_one: RunOne, twin_image: TwinImage, no_containers_left: Callable[[], None]
    ) -> None:
        result = run_one(self.CHECK, twin_image(self.CHECK))
        message = _outcome(result, self.CHECK, Outcome.FAILED)
        assert "ms after the first /ping 200 was ignored: the container still ran" in message
        assert f"SIGKILL it after {GRACE:g} s" in message
        assert "a second SIGTERM, " in message and "stopped it in " in message and "(code 0)" in message
        assert "PID 1 has no SIGTERM handler yet when it reports healthy" in message
        assert "echo: SIGTERM handler installed" in message  # the last log lines
        assert "Fix: Install the SIGTERM handler before /ping answers 200" in message
        evidence = result.evidence
        assert evidence["sigterm_outcome"] == "no-handler-yet"
        assert evidence["signalled_after_ready_s"] < 2.0  # before the twin's handler is in place
        assert evidence["second_signalled_after_ready_s"] >= GRACE
        assert evidence["exit_code"] == 0
        # nothing stopped
        assert without_state(evidence["processes_after"]) == without_state(evidence["processes_before"])
        no_containers_left()

    def test_good_image_passes(self, run_one: RunOne, echo_image: str) -> None:
        result = run_one(self.CHECK, echo_image)
        message = _outcome(result, self.CHECK, Outcome.PASSED)
        assert "ms after the first /ping 200, with code 0" in message

    def test_ignoring_always_is_left_to_idle(self, run_one: RunOne, twin_image: TwinImage) -> None:
        result = run_one(self.CHECK, twin_image("shutdown.idle"))
        message = _outcome(result, self.CHECK, Outcome.SKIPPED)
        assert "ignores SIGTERM whenever it comes (see shutdown.idle)" in message


class TestOneRun:
    """The shutdown group on one Target, as `smlocal check` runs it: one container for idle and early."""

    def test_ignoring_image_costs_two_grace_periods_not_three(
        self, twin_image: TwinImage, tmp_path: Path, no_containers_left: Callable[[], None]
    ) -> None:
        started = time.monotonic()
        results = _run_group(twin_image("shutdown.idle"), tmp_path)
        took = time.monotonic() - started
        by_id = {r.id: r for r in results}
        _outcome(by_id["shutdown.idle"], "shutdown.idle", Outcome.FAILED)
        _outcome(by_id["shutdown.early"], "shutdown.early", Outcome.SKIPPED)
        message = _outcome(by_id["shutdown.in-flight"], "shutdown.in-flight", Outcome.FAILED)
        assert "was answered (HTTP 200" in message
        assert (
            f"shutdown.idle saw it still running {GRACE:g} s after SIGTERM; not waited for again" in message
        )
        assert by_id["shutdown.in-flight"].evidence["exit_not_awaited"] == "shutdown.idle"
        assert by_id["shutdown.in-flight"].duration_s < GRACE
        assert by_id["shutdown.early"].duration_s < 0.5  # judged from idle's trial
        assert took < 3 * GRACE + 6, took
        no_containers_left()

    def test_good_image_one_container_for_idle_and_early(self, echo_image: str, tmp_path: Path) -> None:
        target = Target(CheckConfig(image=echo_image, limits=FAST_LIMITS, cache_dir=tmp_path / "check"))
        started: list[str] = []
        start = target.start

        def counted(*args: Any, **kwargs: Any) -> RunningContainer:
            container = start(*args, **kwargs)
            started.append(container.handle.name)
            return container

        target.start = counted  # type: ignore[method-assign]
        results = run_checks(select(["shutdown"]), target)
        assert [(r.id, r.outcome) for r in results] == [
            ("shutdown.idle", Outcome.PASSED),
            ("shutdown.early", Outcome.PASSED),
            ("shutdown.in-flight", Outcome.PASSED),
        ]
        assert len(started) == 2, started  # the trial's container and the in-flight check's

    def test_late_handler_in_flight_points_to_early(self, twin_image: TwinImage, tmp_path: Path) -> None:
        results = _run_group(twin_image("shutdown.early"), tmp_path)
        assert [(r.id, r.outcome) for r in results] == [
            ("shutdown.idle", Outcome.PASSED),
            ("shutdown.early", Outcome.FAILED),
            ("shutdown.in-flight", Outcome.FAILED),
        ]
        message = results[2].message
        assert_still_running_after_the_grace(message)
        assert "a SIGTERM this soon after the first /ping 200 is ignored: see shutdown.early" in message


def _run_group(image: str, tmp_path: Path) -> list[CheckResult]:
    target = Target(CheckConfig(image=image, limits=FAST_LIMITS, cache_dir=tmp_path / "check"))
    return run_checks(select(["shutdown"]), target)


class TestInFlight:
    CHECK = "shutdown.in-flight"

    def test_twin_dropping_requests_fails(
        self, run_one: RunOne, twin_image: TwinImage, no_containers_left: Callable[[], None]
    ) -> None:
        result = run_one(self.CHECK, twin_image(self.CHECK))
        message = _outcome(result, self.CHECK, Outcome.FAILED)
        assert "got no answer" in message
        assert result.evidence["response"] in message  # what was seen: EOF or reset
        assert "exited" in message and "after SIGTERM with code 0" in message
        assert "the rest 0.5 s after SIGTERM" in message
        assert "echo: SIGTERM" in message  # the last log lines
        assert "finish" in message  # the fix
        no_containers_left()

    def test_good_image_answers_then_exits(
        self, run_one: RunOne, echo_image: str, no_containers_left: Callable[[], None]
    ) -> None:
        result = run_one(self.CHECK, echo_image)
        message = _outcome(result, self.CHECK, Outcome.PASSED)
        assert message.startswith("the request in flight got HTTP 200 ")
        assert "after SIGTERM with code 0" in message
        assert result.evidence["continue"] is True  # the server's 100 Continue proved it read the headers
        assert result.evidence["response"] == "HTTP 200 with a 2-byte body"  # the {} payload echoed
        assert result.evidence["exit_code"] == 0
        assert result.evidence["seconds_to_exit"] < GRACE
        no_containers_left()

    def test_answered_but_not_exiting_fails(self, run_one: RunOne, twin_image: TwinImage) -> None:
        # The shutdown.idle twin ignores SIGTERM: it answers the request, then keeps running.
        result = run_one(self.CHECK, twin_image("shutdown.idle"))
        message = _outcome(result, self.CHECK, Outcome.FAILED)
        assert "was answered (HTTP 200" in message
        assert_still_running_after_the_grace(message)
        assert result.evidence["exit_code"] is None

    def test_a_larger_payload_is_held_and_answered(self, run_one: RunOne, echo_image: str) -> None:
        payload = b"x" * 100_000
        result = run_one(self.CHECK, echo_image, payload=payload, content_type="application/octet-stream")
        _outcome(result, self.CHECK, Outcome.PASSED)
        assert result.evidence["response"] == f"HTTP 200 with a {len(payload)}-byte body"


@pytest.fixture(scope="module")
def stack_twin(keepalive_image: str, docker_engine: docker.DockerClient) -> Callable[[str], str]:
    """Builds a twin on the gunicorn + Flask stack image. A module-level function: pytest 9.2 deprecates
    (an error under filterwarnings = error) a class-scoped fixture defined as an instance method."""

    def build(name: str) -> str:
        tag = f"{TWIN_PREFIX}/{name}:latest"
        build_image(TWINS_DIR / name, tag, buildargs={"STACK_IMAGE": keepalive_image}, client=docker_engine)
        return tag

    return build


class TestOnGunicorn:
    """The same traps on a real serving stack: gunicorn + Flask (the keep-alive test image)."""

    def test_exec_gunicorn_passes(self, run_one: RunOne, keepalive_image: str) -> None:
        for check_id in ("shutdown.idle", "shutdown.early"):
            result = run_one(check_id, keepalive_image)
            message = _outcome(result, check_id, Outcome.PASSED)
            assert "ms after the first /ping 200" in message

    def test_gunicorn_under_a_shell_fails(self, run_one: RunOne, stack_twin: Callable[[str], str]) -> None:
        result = run_one("shutdown.idle", stack_twin("shutdown.idle.gunicorn-shell"))
        message = _outcome(result, "shutdown.idle", Outcome.FAILED)
        assert (
            "PID 1 (`/bin/sh /opt/program/serve serve`) is a shell: it got SIGTERM and did not pass it on"
            in message
        )
        assert result.evidence["sigterm_outcome"] == "shell-no-forward"
        before = result.evidence["processes_before"]
        assert before[0].endswith("/bin/sh /opt/program/serve serve")
        assert any(
            "gunicorn" in line and line.startswith("    ") for line in before
        )  # master, then its worker

    def test_gunicorn_behind_tail_fails(self, run_one: RunOne, stack_twin: Callable[[str], str]) -> None:
        result = run_one("shutdown.idle", stack_twin("shutdown.idle.gunicorn-tail"))
        message = _outcome(result, "shutdown.idle", Outcome.FAILED)
        assert (
            "PID 1 (`tail -f /dev/null`) is `tail`, which serves nothing: it got SIGTERM and did not pass it on"
        ) in message
        assert "Fix: Make the server PID 1" in message
        assert result.evidence["sigterm_outcome"] == "shell-no-forward"
