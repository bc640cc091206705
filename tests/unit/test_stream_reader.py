"""The streaming checks' raw-socket reader (contract_tests/checks/stream_calls.py) against a scripted
server on 127.0.0.1 (no Docker): arrival times, the answers the checks tell apart (HTTP/1.0, a body
ended by the close, a short Content-Length, a chunked error body), its time limit, and the abrupt leave."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from contract_tests.check_config import Payload
from contract_tests.checks import stream_calls
from contract_tests.checks.stream_calls import StreamAnswer, stream
from emulator.config import ContractLimits

PAYLOAD = Payload(b'{"parts": 3}', "application/json", None, "--stream-body")
HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


class Scripted:
    """Accepts one connection, reads the request, then sends each (delay_s, bytes) step and closes."""

    def __init__(self, steps: list[tuple[float, bytes]], close: bool = True) -> None:
        self.steps, self.close = steps, close
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.request = b""
        self.after: BaseException | None = None  # what the server's next recv got after the script
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            try:
                while b"\r\n\r\n" not in self.request or not self.request.endswith(PAYLOAD.body):
                    self.request += conn.recv(4096)
                for delay, data in self.steps:
                    time.sleep(delay)
                    conn.sendall(data)
                if not self.close:
                    conn.settimeout(5)
                    conn.recv(1)
            except OSError as exc:
                self.after = exc
        self.done.set()


class Runner:
    def __init__(self) -> None:
        self.servers: list[Scripted] = []

    def __call__(
        self, steps: list[tuple[float, bytes]], leave: bool = False, limit_s: float = 2.0
    ) -> StreamAnswer:
        server = Scripted(steps, close=not leave)
        self.servers.append(server)
        ctx = SimpleNamespace(config=SimpleNamespace(limits=ContractLimits(invocation_timeout_s=limit_s)))
        container = SimpleNamespace(base_url=f"http://127.0.0.1:{server.port}")
        answer = stream(ctx, container, PAYLOAD, leave_after_first=leave)  # type: ignore[arg-type]
        assert server.done.wait(10)
        return answer


@pytest.fixture
def serve() -> Iterator[Runner]:
    runner = Runner()
    yield runner
    for server in runner.servers:
        server.listener.close()


def test_request_and_timed_chunks(serve: Runner) -> None:
    got = serve([(0, HEAD + b"3\r\nabc\r\n"), (0.1, b"3\r\ndef\r\n"), (0.1, b"0\r\n\r\n")])
    assert got.ok and got.chunked and got.complete and got.version == "HTTP/1.1"
    assert (got.size, got.chunks, got.start) == (6, 2, b"abcdef")
    assert [a.size for a in got.arrivals] == [3, 3]
    assert got.arrivals[1].at_s - got.arrivals[0].at_s >= 0.09
    assert got.describe().startswith("HTTP 200, 6 bytes in 2 chunk(s) over ")


def test_the_request(serve: Runner) -> None:
    serve([(0, HEAD + b"0\r\n\r\n")])
    head, body = serve.servers[-1].request.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /invocations HTTP/1.1" and body == PAYLOAD.body
    assert set(lines[2:]) == {
        "Content-Type: application/json",
        f"Content-Length: {len(PAYLOAD.body)}",
        "Accept-Encoding: identity",
    }


def test_http_10_close_delimited(serve: Runner) -> None:
    got = serve([(0, b"HTTP/1.0 200 OK\r\n\r\nall of it")])
    assert got.version == "HTTP/1.0" and not got.chunked and got.content_length is None
    assert got.complete and got.start == b"all of it"


def test_short_content_length(serve: Runner) -> None:
    got = serve([(0, b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")])
    assert not got.complete
    assert (
        got.error
        == "the container closed the connection after 3 of the 10 bytes its Content-Length announced"
    )


def test_chunked_error_body_is_decoded(serve: Runner) -> None:
    body = b'{"error": "no"}'
    got = serve(
        [
            (
                0,
                b"HTTP/1.1 503 Busy\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n"
                % (len(body), body),
            )
        ]
    )
    assert got.status == 503 and not got.ok and got.start == body and got.excerpt() == '{"error": "no"}'


def test_a_stall_is_timed(serve: Runner) -> None:
    got = serve([(0, HEAD + b"3\r\nabc\r\n"), (1.0, b"0\r\n\r\n")], limit_s=0.3)
    assert got.timed_out and not got.complete and got.size == 3
    assert got.error == "no byte for 0.3 s after 3 body bytes"


def test_no_head_in_time(serve: Runner) -> None:
    got = serve([(1.0, HEAD)], limit_s=0.3)
    assert got.status is None and got.error == "no byte for 0.3 s waiting for the response head"


def test_leaving_resets_the_connection(serve: Runner) -> None:
    got = serve([(0, HEAD + b"3\r\nabc\r\n"), (0.2, b"0\r\n\r\n")], leave=True)
    assert got.left and not got.complete and got.size == 3
    after = serve.servers[-1].after  # the server's next write or read: a reset, not a clean close
    assert isinstance(after, ConnectionResetError | BrokenPipeError), after


def test_reading_stops_at_the_byte_cap(serve: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream_calls, "MAX_STREAM_BYTES", 5)
    got = serve([(0, HEAD + b"3\r\nabc\r\n"), (0.05, b"3\r\ndef\r\n"), (0.05, b"3\r\nghi\r\n0\r\n\r\n")])
    assert got.truncated and not got.complete and got.size == 6 and got.error is None


def test_the_whole_answer_has_a_time_limit(serve: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream_calls, "STREAM_TOTAL_FACTOR", 2)
    trickle = [(0.1, b"1\r\nx\r\n")] * 10  # a byte every 100 ms: never idle for the 0.3 s limit
    got = serve([(0, HEAD), *trickle, (0, b"0\r\n\r\n")], limit_s=0.3)
    assert got.timed_out and not got.complete and 3 <= got.size <= 7
    assert got.error == (
        f"the answer did not end within 0.6 s (2 times the invocation limit) after {got.size} body bytes"
    )
