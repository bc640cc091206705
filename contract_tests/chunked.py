"""A strict, incremental decoder of HTTP/1.1 chunked bodies (RFC 9112 §7.1), for streaming.framing.

It is fed the body bytes as they come off a raw socket (the response head already taken off) and gives
back the data of each chunk as it is decoded; the first framing mistake raises FramingError with what
was wrong and its byte offset in the body as written on the wire. Strict where a sender must be exact:
each chunk is `HEX-SIZE [;extensions] CRLF DATA CRLF`, the body ends with a zero-size chunk, optional
trailer lines and an empty line (`0\\r\\n\\r\\n`), and nothing follows it. A bare LF, a size that is no
hexadecimal number, data longer or shorter than its size, and a connection closed before the end are
all errors (a lenient reader may accept a bare LF; a proxy need not, and the sender must not write one).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

#: A chunk-size (or trailer) line longer than this is an error (no real server writes one).
MAX_LINE_BYTES = 4096
#: Hex digits in a chunk size at most (16: any 64-bit size).
MAX_SIZE_DIGITS = 16
_HEX = frozenset(b"0123456789abcdefABCDEF")
_END = "`0\\r\\n\\r\\n`"  # how the terminating chunk reads in messages


class FramingError(Exception):
    """The chunked encoding is broken: `message` says what and where, `offset` is the body byte."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset
        #: the chunk data the failing feed() decoded before the error
        self.data: list[bytes] = []


class _State(enum.Enum):
    SIZE = "size"
    DATA = "data"
    DATA_END = "data-end"
    TRAILER = "trailer"
    DONE = "done"


@dataclass(frozen=True)
class Chunk:
    #: body offset of the chunk's size line
    offset: int
    size: int


@dataclass
class ChunkedDecoder:
    """feed() the body bytes in order, finish() when the connection closed; `done` after the end."""

    #: body bytes consumed so far (the offset of the first byte not decoded yet)
    offset: int = 0
    chunks: list[Chunk] = field(default_factory=list)
    _state: _State = _State.SIZE
    _buffer: bytes = b""  # bytes fed and not decoded yet (an incomplete line, a CR)
    _left: int = 0  # data bytes still to come in the current chunk
    _data: bytes = b""  # while feeding: the bytes being decoded, read from _pos
    _pos: int = 0

    @property
    def done(self) -> bool:
        return self._state is _State.DONE

    def feed(self, data: bytes) -> list[bytes]:
        """The chunk data decoded from `data` (pieces, in order; empty when none was complete enough);
        FramingError at the first mistake, with the data decoded before it (FramingError.data)."""
        out: list[bytes] = []
        try:
            self._feed(data, out)
        except FramingError as exc:
            exc.data = out
            raise
        return out

    def _feed(self, data: bytes, out: list[bytes]) -> None:
        if self._state is _State.DONE and data:
            raise FramingError(
                f"{len(data)} byte(s) after the terminating zero-size chunk, starting {_show(data)}: the "
                f"body must end with {_END}",
                self.offset,
            )
        # One buffer per feed, read through an index (slicing it per chunk would copy it per chunk).
        self._data, self._pos = self._buffer + data, 0
        try:
            self._decode(out)
        finally:
            self._buffer = self._data[self._pos :]
            self._data, self._pos = b"", 0

    def _decode(self, out: list[bytes]) -> None:
        while self._pos < len(self._data) and self._state is not _State.DONE:
            if self._state is _State.DATA:
                piece = self._data[self._pos : self._pos + self._left]
                self._take(len(piece))
                self._left -= len(piece)
                out.append(piece)
                if self._left == 0:
                    self._state = _State.DATA_END
            elif self._state is _State.DATA_END:
                ahead = self._peek(2)
                if ahead == b"\r":
                    break
                if ahead != b"\r\n":
                    chunk = self.chunks[-1]
                    raise FramingError(
                        f"chunk {len(self.chunks)} (size line at byte {chunk.offset} declares {chunk.size} "
                        f"byte(s)) is not followed by CRLF: found {_show(self._peek(32))}; a chunk's data "
                        "ends with CRLF, and its size line gives the data's exact length in hexadecimal",
                        self.offset,
                    )
                self._take(2)
                self._state = _State.SIZE
            else:
                line = self._line()
                if line is None:
                    break
                if self._state is _State.SIZE:
                    self._size_line(line)
                else:  # a trailer line (ignored), or the empty line that ends the body
                    self._take(len(line) + 2)
                    if line == b"":
                        self._state = _State.DONE
        if self._state is _State.DONE and self._pos < len(self._data):
            extra = self._data[self._pos :]
            self._pos = len(self._data)
            raise FramingError(
                f"{len(extra)} byte(s) after the terminating zero-size chunk, starting {_show(extra)}: the "
                f"body must end with {_END}",
                self.offset,
            )

    def finish(self) -> None:
        """The connection closed (or the reader stopped): FramingError unless the body ended."""
        if self._state is _State.DONE:
            return
        at = self.offset + len(self._buffer)
        if self._state is _State.DATA:
            chunk = self.chunks[-1]
            where = (
                f"inside chunk {len(self.chunks)} ({chunk.size - self._left} of the {chunk.size} byte(s) "
                f"its size line at byte {chunk.offset} declares)"
            )
        elif self._state is _State.DATA_END:
            where = f"after chunk {len(self.chunks)}'s data, before its CRLF"
        elif self._state is _State.TRAILER:
            where = "after the zero-size chunk, before the empty line that ends the body"
        elif self._buffer:
            where = f"inside a chunk-size line ({_show(self._buffer)} without its CRLF)"
        else:
            where = f"after {len(self.chunks)} chunk(s), with no terminating zero-size chunk"
        raise FramingError(f"the connection closed at byte {at} {where}: the body must end with {_END}", at)

    # ------------------------------------------------------------------------------------------ lines

    def _take(self, n: int) -> None:
        self._pos += n
        self.offset += n

    def _peek(self, n: int) -> bytes:
        return self._data[self._pos : self._pos + n]

    def _line(self) -> bytes | None:
        """The next CRLF-terminated line (without it), taken off the buffer; None until it is complete."""
        kind = "chunk-size" if self._state is _State.SIZE else "trailer"
        found = self._data.find(b"\n", self._pos, self._pos + MAX_LINE_BYTES + 1)
        if found < 0:
            if len(self._data) - self._pos > MAX_LINE_BYTES:
                raise FramingError(
                    f"a {kind} line longer than {MAX_LINE_BYTES} bytes with no CRLF, starting "
                    f"{_show(self._peek(32))}",
                    self.offset,
                )
            return None
        end = found - self._pos
        if end == 0 or self._data[found - 1] != 0x0D:
            raise FramingError(
                f"the {kind} line {_show(self._peek(end + 1))} ends with a bare LF at byte "
                f"{self.offset + end}: each line of the chunked encoding ends with CRLF",
                self.offset,
            )
        line = self._peek(end - 1)
        if b"\r" in line:
            raise FramingError(f"a bare CR in the line {_show(line)}", self.offset + line.index(b"\r"))
        return line

    def _size_line(self, line: bytes) -> None:
        size_text = line.split(b";", 1)[0].rstrip(b" \t")
        if not size_text or len(size_text) > MAX_SIZE_DIGITS or any(b not in _HEX for b in size_text):
            raise FramingError(
                f"the chunk-size line {_show(line)} does not start with a hexadecimal size "
                "(each chunk begins `SIZE-IN-HEX\\r\\n`)",
                self.offset,
            )
        size = int(size_text, 16)
        self.chunks.append(Chunk(self.offset, size))
        self._take(len(line) + 2)
        if size == 0:
            self._state = _State.TRAILER
        else:
            self._state, self._left = _State.DATA, size


def _show(data: bytes, limit: int = 24) -> str:
    """Bytes as a message quotes them: a Python bytes literal, cut at `limit`."""
    text = repr(data[:limit])
    return text + ("…" if len(data) > limit else "")
