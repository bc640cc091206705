"""One streamed POST /invocations over a raw socket, timed read by read (the streaming.* checks).

httpx would hide what the streaming checks judge (when each piece arrived, the chunk framing itself),
so the request is written by hand (one send, TCP_NODELAY, keep-alive as a proxy keeps it, `Accept-Encoding:
identity`) and the answer read off the socket: the head, then the body as it comes, each read time-stamped
and, for a chunked body, fed to contract_tests.chunked. The body is read to its end (the terminating
chunk, Content-Length bytes, or the connection's close), to the first framing error, or until a limit:
no byte for the invocation limit (before the first byte and between reads), the whole answer taking
STREAM_TOTAL_FACTOR times it, or MAX_STREAM_BYTES read. `leave_after_first` instead closes the connection
abruptly (RST) once the first body bytes arrived: a client going away mid-stream.

The first stream of a run (the shared one) is kept per Target: streaming.incremental and
streaming.framing judge the same answer.
"""

from __future__ import annotations

import socket
import struct
import time
import weakref
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from contract_tests.check_config import Payload
from contract_tests.chunked import ChunkedDecoder, FramingError
from contract_tests.running import RunningContainer
from contract_tests.sockets import readable
from contract_tests.target import CheckContext, Target

#: The whole answer may take this many times the invocation limit (300 s at SageMaker's 60 s) [U]:
#: a stream is one invocation, but a long generation outlasts one answer's limit.
STREAM_TOTAL_FACTOR = 5
#: Body bytes read at most; a longer stream is judged on its first MAX_STREAM_BYTES.
MAX_STREAM_BYTES = 64 * 1024 * 1024
#: Raw body bytes kept for quoting the place of a framing error.
RAW_KEPT_BYTES = 1024 * 1024
#: The response head is read up to this size.
MAX_HEAD_BYTES = 64 * 1024
READ_BYTES = 65536
#: Characters of a body quoted in messages.
BODY_EXCERPT = 120


@dataclass(frozen=True)
class Arrival:
    """One read that brought body data: when (seconds since the request was sent) and how much."""

    at_s: float
    size: int


@dataclass
class StreamAnswer:
    """What one streamed POST /invocations got; `error` says why it stopped short, if it did."""

    status: int | None = None
    version: str = ""
    #: response headers, names lower-cased, in order
    headers: list[tuple[str, str]] = field(default_factory=list)
    head_at_s: float | None = None
    arrivals: list[Arrival] = field(default_factory=list)
    #: body data bytes (decoded: chunk data only)
    size: int = 0
    #: the first BODY_EXCERPT-ish bytes of the data, for messages
    start: bytes = b""
    #: the body as it was on the wire (chunk framing included), its first RAW_KEPT_BYTES
    raw: bytes = b""
    chunks: int = 0
    framing: FramingError | None = None
    #: the body reached its end (terminating chunk, Content-Length, or the close of a close-delimited one)
    complete: bool = False
    #: the reader stopped at MAX_STREAM_BYTES
    truncated: bool = False
    #: the client closed the connection after the first body bytes (leave_after_first)
    left: bool = False
    error: str | None = None
    timed_out: bool = False
    #: seconds from the request sent to the last read
    total_s: float = 0.0

    def header(self, name: str) -> str | None:
        values = [v for k, v in self.headers if k == name]
        return ", ".join(values) if values else None

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    @property
    def chunked(self) -> bool:
        coding = (self.header("transfer-encoding") or "").split(",")[-1].strip().lower()
        return coding == "chunked"

    @property
    def content_length(self) -> int | None:
        value = self.header("content-length")
        return int(value) if value is not None and value.strip().isdigit() else None

    @property
    def first_s(self) -> float | None:
        return self.arrivals[0].at_s if self.arrivals else None

    @property
    def last_s(self) -> float | None:
        return self.arrivals[-1].at_s if self.arrivals else None

    def excerpt(self) -> str:
        text = self.start[:BODY_EXCERPT].decode("utf-8", "replace").strip()
        return text + ("…" if self.size > BODY_EXCERPT else "")

    def describe(self) -> str:
        """`HTTP 200, 96 bytes in 8 chunks over 702 ms` or why there was no answer."""
        if self.status is None:
            return self.error or "no answer"
        if not self.ok:
            return f"HTTP {self.status}" + (f" ({self.excerpt()!r})" if self.size else "")
        framing = f"{self.chunks} chunk(s)" if self.chunked else "one body"
        took = f" over {(self.last_s or 0) * 1000:.0f} ms" if self.arrivals else ""
        return f"HTTP {self.status}, {self.size:,} bytes in {framing}{took}"


def request_bytes(payload: Payload, host: str, port: int) -> bytes:
    head = (
        f"POST /invocations HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: {payload.content_type}\r\nContent-Length: {len(payload.body)}\r\n"
        "Accept-Encoding: identity\r\n" + (f"Accept: {payload.accept}\r\n" if payload.accept else "") + "\r\n"
    )
    return head.encode("latin-1") + payload.body


def stream(
    ctx: CheckContext, container: RunningContainer, payload: Payload, *, leave_after_first: bool = False
) -> StreamAnswer:
    """POST /invocations with `payload` to `container`, read as described in the module docstring."""
    url = urlsplit(container.base_url)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    limit = ctx.config.limits.invocation_timeout_s
    answer = StreamAnswer()
    try:
        sock = socket.create_connection((host, port), timeout=limit)
    except OSError as exc:
        answer.error = f"no connection to the container ({type(exc).__name__}: {exc or 'no detail'})"
        return answer
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sent = time.monotonic()
        _Reader(sock, answer, sent, limit, leave_after_first).run(request_bytes(payload, host, port))
    finally:
        if answer.left:  # abruptly: SO_LINGER 0 makes close() send RST, as a killed client does
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    return answer


class _Reader:
    def __init__(
        self, sock: socket.socket, answer: StreamAnswer, sent: float, limit: float, leave: bool
    ) -> None:
        self.sock, self.answer, self.sent, self.limit, self.leave = sock, answer, sent, limit, leave
        self.deadline = sent + limit * STREAM_TOTAL_FACTOR

    def run(self, request: bytes) -> None:
        answer = self.answer
        try:
            self.sock.sendall(request)
            self.sent = time.monotonic()
            self.deadline = self.sent + self.limit * STREAM_TOTAL_FACTOR
            rest = self._head()
            if rest is None:
                return
            if not answer.ok:
                self._error_body(rest)
            elif answer.chunked:
                self._chunked(rest)
            else:
                self._plain(rest)
        except OSError as exc:
            answer.error = f"the connection failed ({type(exc).__name__}: {exc or 'no detail'})"
        finally:
            answer.total_s = time.monotonic() - self.sent

    def _recv(self, what: str) -> bytes | None:
        """The next bytes (b"" when the peer closed); None, with answer.error, on a time limit."""
        now = time.monotonic()
        wait = min(self.limit, self.deadline - now)
        if wait <= 0 or not readable(self.sock, wait):
            self.answer.timed_out = True
            if time.monotonic() >= self.deadline - 0.001:
                self.answer.error = (
                    f"the answer did not end within {self.limit * STREAM_TOTAL_FACTOR:g} s "
                    f"({STREAM_TOTAL_FACTOR} times the invocation limit) {what}"
                )
            else:
                self.answer.error = f"no byte for {self.limit:g} s {what}"
            return None
        return self.sock.recv(READ_BYTES)

    def _head(self) -> bytes | None:
        answer, buffer = self.answer, b""
        while b"\r\n\r\n" not in buffer:
            if len(buffer) > MAX_HEAD_BYTES:
                answer.error = f"no end of the response head in {MAX_HEAD_BYTES:,} bytes"
                return None
            data = self._recv("waiting for the response head")
            if data is None:
                return None
            if not data:
                answer.error = "the container closed the connection before answering" + (
                    f" (after {len(buffer)} bytes of a head)" if buffer else ""
                )
                return None
            buffer += data
        answer.head_at_s = time.monotonic() - self.sent
        head, rest = buffer.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            answer.error = f"not an HTTP status line: {lines[0][:80]!r}"
            return None
        answer.version, answer.status = parts[0], int(parts[1])
        for line in lines[1:]:
            name, _, value = line.partition(":")
            answer.headers.append((name.strip().lower(), value.strip()))
        return rest

    def _data(self, pieces: list[bytes]) -> None:
        size = sum(len(p) for p in pieces)
        if not size:
            return
        answer = self.answer
        answer.arrivals.append(Arrival(time.monotonic() - self.sent, size))
        if len(answer.start) < BODY_EXCERPT * 2:
            answer.start += b"".join(pieces)[: BODY_EXCERPT * 2]
        answer.size += size
        if answer.size >= MAX_STREAM_BYTES:
            answer.truncated = True

    def _keep_raw(self, data: bytes) -> None:
        if len(self.answer.raw) < RAW_KEPT_BYTES:
            self.answer.raw += data[: RAW_KEPT_BYTES - len(self.answer.raw)]

    def _stop_early(self) -> bool:
        """After a read: whether to stop (a client leaving after the first bytes, or enough read)."""
        if self.leave and self.answer.arrivals and not self.answer.complete:
            self.answer.left = True
            return True
        return self.answer.truncated

    def _chunked(self, data: bytes) -> None:
        answer, decoder = self.answer, ChunkedDecoder()
        try:
            while True:
                if data:
                    self._keep_raw(data)
                    pieces = decoder.feed(data)
                    answer.chunks = sum(1 for c in decoder.chunks if c.size)
                    answer.complete = decoder.done
                    self._data(pieces)
                    if decoder.done or self._stop_early():
                        return
                got = self._recv(f"after {answer.size:,} body bytes")
                if got is None:
                    return
                if not got:
                    decoder.finish()
                    return
                data = got
        except FramingError as exc:
            answer.framing = exc
            answer.chunks = sum(1 for c in decoder.chunks if c.size)
            self._data(exc.data)  # what the read with the error brought before it
            answer.left = self.leave and bool(answer.arrivals)

    def _plain(self, data: bytes) -> None:
        answer, length = self.answer, self.answer.content_length
        while True:
            if data:
                if length is not None:
                    data = data[: max(0, length - answer.size)]
                self._keep_raw(data)
                self._data([data])
                if length is not None and answer.size >= length:
                    answer.complete = True
                    return
                if self._stop_early():
                    return
            got = self._recv(f"after {answer.size:,} body bytes")
            if got is None:
                return
            if not got:
                if length is None:
                    answer.complete = True  # a close-delimited body ends with the connection
                else:
                    answer.error = (
                        f"the container closed the connection after {answer.size:,} of the "
                        f"{length:,} bytes its Content-Length announced"
                    )
                return
            data = got

    def _error_body(self, data: bytes) -> None:
        """A non-2xx answer's body, read for its message: at most 4 KiB, a read waited for 2 s at most."""
        answer = self.answer
        decoder = ChunkedDecoder() if answer.chunked else None
        while len(answer.start) < 4096:
            if data:
                try:
                    piece = data if decoder is None else b"".join(decoder.feed(data))
                except FramingError:
                    return
                answer.start += piece
                answer.size += len(piece)
                if decoder is not None and decoder.done:
                    return
            if answer.content_length is not None and answer.size >= answer.content_length:
                return
            if not readable(self.sock, min(self.limit, 2.0)):
                return
            data = self.sock.recv(READ_BYTES)
            if not data:
                return


# ------------------------------------------------------------------------------- the shared stream

_SHARED: weakref.WeakKeyDictionary[Target, StreamAnswer] = weakref.WeakKeyDictionary()


def shared(ctx: CheckContext, container: RunningContainer) -> StreamAnswer:
    """The run's first stream of the stream payload (streaming.incremental and framing judge it)."""
    found = _SHARED.get(ctx.target)
    if found is None:
        assert ctx.config.stream is not None
        found = _SHARED[ctx.target] = stream(ctx, container, ctx.config.stream)
    return found
