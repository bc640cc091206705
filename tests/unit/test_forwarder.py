"""The isolation forwarder (emulator/runtime/assets/forwarder.py) as a real process on 127.0.0.1:
bytes relayed both ways, an upstream close reaches the caller, a refused upstream is a reset."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from emulator.runtime.docker_isolation import forwarder_source


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def upstream() -> Iterator[socket.socket]:
    server = socket.create_server(("127.0.0.1", 0))
    yield server
    server.close()


def _forwarder(target_port: int) -> tuple[subprocess.Popen[bytes], int]:
    process, (listen,) = _forwarder_of(target_port)
    return process, listen


def _forwarder_of(*target_ports: int) -> tuple[subprocess.Popen[bytes], list[int]]:
    """A forwarder relaying a listen port of its own to each target port."""
    listens = [_free_port() for _ in target_ports]
    # the forwarder listens on every address of its (container) namespace; here: the host's loopback
    source = forwarder_source().replace('"0.0.0.0"', '"127.0.0.1"')
    pairs = [str(p) for pair in zip(target_ports, listens, strict=True) for p in pair]
    process = subprocess.Popen(
        [sys.executable, "-I", "-c", source, "127.0.0.1", *pairs], stdout=subprocess.PIPE
    )
    assert process.stdout is not None
    assert b"smlocal forwarder" in process.stdout.readline()  # listening
    return process, listens


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()  # SIGTERM ends it
    assert process.wait(timeout=5) == 0
    if process.stdout is not None:
        process.stdout.close()


def test_bytes_go_both_ways_and_an_upstream_close_reaches_the_caller(upstream: socket.socket) -> None:
    process, port = _forwarder(upstream.getsockname()[1])
    try:
        client = socket.create_connection(("127.0.0.1", port), timeout=5)
        conn, _ = upstream.accept()
        payload = bytes(range(256)) * 4096  # 1 MiB
        sender = threading.Thread(target=client.sendall, args=(payload,))
        sender.start()
        got = b""
        while len(got) < len(payload):
            got += conn.recv(1 << 16)
        sender.join()
        assert got == payload
        conn.sendall(b"answer")
        assert client.recv(100) == b"answer"
        conn.close()  # the container closes an idle keep-alive connection
        client.settimeout(5)
        assert client.recv(100) == b""  # ... and so does the caller's, at once
        client.close()
    finally:
        _stop(process)


def test_a_refused_upstream_resets_the_caller() -> None:
    process, port = _forwarder(_free_port())  # nothing listens there
    try:
        client = socket.create_connection(("127.0.0.1", port), timeout=5)
        started = time.monotonic()
        with pytest.raises(ConnectionResetError):
            client.sendall(b"GET /ping HTTP/1.1\r\n\r\n")
            client.recv(100)
        assert time.monotonic() - started < 2
        client.close()
    finally:
        _stop(process)


def test_each_listen_port_relays_to_its_own_target() -> None:
    """A multi-container instance's forwarder: one port per container of the instance."""
    first, second = socket.create_server(("127.0.0.1", 0)), socket.create_server(("127.0.0.1", 0))
    process, (one, two) = _forwarder_of(first.getsockname()[1], second.getsockname()[1])
    try:
        for listen, server, word in ((two, second, b"second"), (one, first, b"first")):
            client = socket.create_connection(("127.0.0.1", listen), timeout=5)
            server.settimeout(5)
            conn, _ = server.accept()
            conn.sendall(word)
            assert client.recv(100) == word
            conn.close()
            client.close()
    finally:
        _stop(process)
        first.close()
        second.close()
