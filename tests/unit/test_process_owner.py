"""The owner of a check container: a process on this host, told apart from a later one of the same pid."""

from __future__ import annotations

import os
import subprocess
import sys

from emulator.process_owner import check_labels, host, owner_gone, start_stamp
from emulator.runtime.labels import OWNER, OWNER_HOST, OWNER_STARTED


def test_this_process_owns_its_labels() -> None:
    labels = check_labels()
    assert labels[OWNER] == f"check-{os.getpid()}"
    assert labels[OWNER_HOST] == host()
    assert labels[OWNER_STARTED] and labels[OWNER_STARTED] == start_stamp(os.getpid())
    assert not owner_gone(labels)


def test_a_reused_pid_is_not_the_owner() -> None:
    labels = {**check_labels(), OWNER_STARTED: "1@00000000"}  # this pid, but an earlier process's start
    assert owner_gone(labels)


def test_an_exited_process_is_gone_and_a_zombie_too() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    labels = check_labels(child.pid)
    assert not owner_gone(labels)
    child.kill()
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie
    assert owner_gone(labels)
    child.wait()
    assert owner_gone(labels)


def test_what_cannot_be_judged_here_is_never_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    dead = check_labels(child.pid)
    assert owner_gone(dead)
    assert not owner_gone({**dead, OWNER_HOST: "another-host"})  # another host's pid means nothing here
    assert not owner_gone({OWNER: dead[OWNER]})  # a label from before the host was recorded
    assert not owner_gone({**dead, OWNER: "0123456789abcdef"})  # a server's container, not a check run's
    assert not owner_gone({**check_labels(), OWNER_STARTED: ""})  # a live pid, no start time to compare
