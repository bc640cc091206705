"""emulator.interrupts: a signal held since start is delivered on release, to the handlers in place then;
one that comes during a deferred step is handled right after it, by the handler that was there."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from emulator.interrupts import HANDLED_SIGNALS, deferred, hold_signals, release_signals
from tests.fixtures.signals import default_sigint

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def recorded() -> Iterator[list[int]]:
    """SIGTERM recorded by a handler of the test's own; the handler and the mask put back after."""
    seen: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        seen.append(signum)

    before = signal.signal(signal.SIGTERM, handler)
    try:
        yield seen
    finally:
        release_signals()
        signal.signal(signal.SIGTERM, before)


def test_a_held_signal_waits_and_is_delivered_on_release(recorded: list[int]) -> None:
    hold_signals()
    assert set(HANDLED_SIGNALS) <= signal.pthread_sigmask(signal.SIG_BLOCK, [])
    # To this thread: pytest's process may have other threads (earlier tests' pools), which do not block
    # it and would take a process-wide signal at once. A held `smlocal check` has none that don't: its
    # threads are all started after spawn and inherit the mask until release.
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
    assert recorded == [] and signal.SIGTERM in signal.sigpending()
    release_signals()
    assert recorded == [signal.SIGTERM]
    assert not set(HANDLED_SIGNALS) & signal.pthread_sigmask(signal.SIG_BLOCK, [])


def test_release_without_hold_changes_nothing(recorded: list[int]) -> None:
    release_signals()
    assert recorded == [] and not set(HANDLED_SIGNALS) & signal.pthread_sigmask(signal.SIG_BLOCK, [])


@pytest.fixture
def python_ctrl_c() -> Iterator[None]:
    """SIGINT handled as an interactive Python handles it (KeyboardInterrupt) for the test. A process
    started in the background by a non-interactive shell (CI's `.ci/run`) inherits an ignored SIGINT,
    and Python then installs no handler: this test got no KeyboardInterrupt there."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def test_ctrl_c_during_a_deferred_step_comes_after_it_whole(python_ctrl_c: None) -> None:
    # Each signal here goes to this thread (pthread_kill): a process-wide one may be taken by another
    # thread of pytest's process that does not block it (see the first test).
    steps: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        with deferred():
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)
            steps.append("created")  # the step is not cut in two
            steps.append("owned")
    assert steps == ["created", "owned"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_ignored_ctrl_c_stays_ignored_after_a_deferred_step() -> None:
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        steps: list[str] = []
        with deferred():
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)
            steps.append("created")
        steps.append("went on")  # no KeyboardInterrupt, and not the default action (the process ends)
        assert steps == ["created", "went on"]
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


def test_sigterm_during_a_deferred_step_goes_to_the_handler_that_was_there(recorded: list[int]) -> None:
    with deferred():
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
        assert recorded == []
    assert recorded == [signal.SIGTERM]


def test_no_signal_no_delivery_and_nested_blocks_defer_to_the_outermost(recorded: list[int]) -> None:
    with deferred():
        with deferred():
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
        assert recorded == []  # still inside the outer block
    assert recorded == [signal.SIGTERM]
    with deferred():
        pass
    assert recorded == [signal.SIGTERM]


def test_off_the_main_thread_it_defers_nothing_and_touches_no_handler() -> None:
    before = signal.getsignal(signal.SIGINT)
    seen: list[object] = []

    def body() -> None:
        with deferred():
            seen.append(signal.getsignal(signal.SIGINT))

    worker = threading.Thread(target=body)
    worker.start()
    worker.join(timeout=10)
    assert seen == [before]


def _blocked_during(monkeypatch: pytest.MonkeyPatch, command: str, argv: list[str]) -> set[int]:
    """The handled signals still blocked while `command` runs, in a process started with them held."""
    from emulator import cli

    seen: list[set[int]] = []

    def record(args: object) -> int:
        seen.append(set(HANDLED_SIGNALS) & signal.pthread_sigmask(signal.SIG_BLOCK, []))
        return 0

    monkeypatch.setattr(cli, command, record)
    hold_signals()
    try:
        assert cli.main(argv) == 0
    finally:
        release_signals()
    return seen[0]


def test_main_releases_held_signals_for_a_command_without_handlers_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _blocked_during(monkeypatch, "cmd_ls", ["ls"]) == set()


def test_main_leaves_them_to_check_which_releases_them_once_its_handlers_are_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _blocked_during(monkeypatch, "cmd_check", ["check", "img:1"]) == set(HANDLED_SIGNALS)


PROGRAM = """
import sys
from emulator.interrupts import interrupt_handled
try:
    # as a Ctrl-C during an import lands in a method that dataclasses builds with exec()
    exec("import os, signal\\nos.kill(os.getpid(), signal.SIGINT)\\nfor _ in range(10_000): pass")
except KeyboardInterrupt:
    if sys.argv[1] == "handled":
        interrupt_handled()
    print("interrupted")
sys.exit(130)
"""


@pytest.mark.parametrize("handled", [True, False], ids=["handled", "not-told"])
def test_a_caught_ctrl_c_from_exec_code_exits_with_the_programs_status(tmp_path: Path, handled: bool) -> None:
    """`python -m` (how the tests start `smlocal check`): a KeyboardInterrupt caught after it came out
    of exec'd code still ended the process by SIGINT (-2), not with its 130; interrupt_handled() is
    what makes it 130. (CPython's mark, not the program's: if a Python release drops it, "not-told"
    exits 130 too and this test says so.)"""
    (tmp_path / "interrupted_run.py").write_text(PROGRAM)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    done = subprocess.run(
        [sys.executable, "-m", "interrupted_run", "handled" if handled else "not-told"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
        preexec_fn=default_sigint,
    )
    assert done.stdout == "interrupted\n", done.stderr
    assert done.returncode == (130 if handled else -signal.SIGINT), done.stderr
