"""Telling SIGTERM outcomes apart from a container's process list (the twins prove it on real images)."""

from __future__ import annotations

from contract_tests.checks.sigterm import IGNORED, PID1_LINGERS, SHELL_NO_FORWARD, diagnose, tree
from emulator.runtime.base import ProcessInfo

SHELL = ProcessInfo(100, 90, "Ss", "/bin/sh /opt/program/serve serve", main=True)
SERVER = ProcessInfo(101, 100, "S", "python3 serve.py")
TAIL = ProcessInfo(102, 100, "S", "tail -f /dev/null")


def test_pid1_the_server_ignoring_sigterm() -> None:
    server = ProcessInfo(100, 90, "Ssl", "python3 serve.py", main=True)
    found = diagnose((server,), (server,))
    assert found.outcome == IGNORED and "PID 1 (`python3 serve.py`) is the server" in found.seen


def test_a_shell_that_does_not_forward() -> None:
    found = diagnose((SHELL, SERVER), (SHELL, SERVER))
    assert found.outcome == SHELL_NO_FORWARD
    assert "is a shell" in found.seen and "(`python3 serve.py`), its child, never saw it" in found.seen


def test_tail_as_pid1_does_not_forward_either() -> None:
    tail = ProcessInfo(100, 90, "Ss", "tail -f /dev/null", main=True)
    found = diagnose((tail, SERVER), (tail, SERVER))
    assert found.outcome == SHELL_NO_FORWARD and "`tail`, which serves nothing" in found.seen


def test_the_server_exits_and_pid1_lingers_a_zombie_counts_as_exited() -> None:
    zombie = ProcessInfo(101, 100, "Z", "[python3] <defunct>")
    for after in ((SHELL, TAIL), (SHELL, zombie, TAIL)):
        found = diagnose((SHELL, SERVER, TAIL), after)
        assert found.outcome == PID1_LINGERS
        assert "waiting on `tail -f /dev/null`, kept running" in found.seen


def test_tree_indents_children_under_pid1() -> None:
    assert tree((SHELL, SERVER, TAIL)) == [
        "PID 1 (host pid 100) [Ss] /bin/sh /opt/program/serve serve",
        "  host pid 101 [S] python3 serve.py",
        "  host pid 102 [S] tail -f /dev/null",
    ]
