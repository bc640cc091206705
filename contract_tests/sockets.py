"""Waiting on a socket without select.select(), which refuses file descriptors of 1024 and above: the
checks also run inside a user's pytest process (the plugin), which may hold many files."""

from __future__ import annotations

import selectors
import socket


def readable(sock: socket.socket, timeout_s: float) -> bool:
    """Whether the socket has something to read (data, or the peer's close) within `timeout_s`."""
    with selectors.DefaultSelector() as selector:
        selector.register(sock, selectors.EVENT_READ)
        return bool(selector.select(max(timeout_s, 0.0)))
