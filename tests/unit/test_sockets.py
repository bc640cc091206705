"""contract_tests.sockets: waiting on a socket in a process with many open files."""

from __future__ import annotations

import os
import resource
import socket

import pytest

from contract_tests.sockets import readable


def test_readable_works_past_select_s_descriptor_limit() -> None:
    """contract_tests.sockets.readable on a socket numbered 1024 or above, where select.select()
    raises "filedescriptor out of range" (the plugin runs in a user's busy pytest process)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"this process may open only {hard} files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    padding = []
    try:
        while len(padding) < 1100 and (not padding or padding[-1] < 1030):
            padding.append(os.dup(0 if os.isatty(0) else 2))
        a, b = socket.socketpair()  # the lowest free numbers: above the padding
        try:
            assert a.fileno() >= 1024
            assert readable(a, 0) is False
            b.sendall(b"x")
            assert readable(a, 1.0) is True
        finally:
            a.close()
            b.close()
    finally:
        for fd in padding:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
