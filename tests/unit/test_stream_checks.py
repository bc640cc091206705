"""The streaming checks' pure parts: the strict chunked decoder (contract_tests/chunked.py), the timing
rule of streaming.incremental on hand-made answers, and the --streaming options (no Docker)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from contract_tests.check_config import DEFAULT_STREAM_BODY, CheckConfig, Payload
from contract_tests.checks import streaming
from contract_tests.checks.stream_calls import Arrival, StreamAnswer
from contract_tests.checks.streaming import FIRST_BYTE_SHARE, MIN_ARRIVALS, judge_timing, moments
from contract_tests.chunked import MAX_LINE_BYTES, ChunkedDecoder, FramingError
from contract_tests.cli import UsageError, stream_payload
from contract_tests.result import CheckFailed
from contract_tests.target import CheckContext

GIVEN = Payload(b"{}", "application/json", None, "--stream-body")
DEFAULT = Payload(DEFAULT_STREAM_BODY, "application/json", None, "the default stream body")


def decode(body: bytes, step: int = 1) -> tuple[bytes, ChunkedDecoder]:
    """Feed `body` in pieces of `step` bytes, then finish: the data and the decoder."""
    decoder, out = ChunkedDecoder(), []
    for i in range(0, len(body), step):
        out += decoder.feed(body[i : i + step])
    decoder.finish()
    return b"".join(out), decoder


def error_of(body: bytes, step: int = 1000) -> FramingError:
    with pytest.raises(FramingError) as caught:
        decode(body, step)
    return caught.value


# --- the decoder ---------------------------------------------------------------------------------


@pytest.mark.parametrize("step", [1, 3, 1000])
def test_valid_bodies_decode_whatever_the_reads(step: int) -> None:
    body = b"c\r\npart 000000\n\r\n5;name=value\r\nhello\r\nA  \r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n"
    data, decoder = decode(body, step)
    assert data == b"part 000000\nhello0123456789"
    assert decoder.done and [c.size for c in decoder.chunks] == [12, 5, 10, 0]
    assert [c.offset for c in decoder.chunks] == [0, 17, 38, 55]


def test_a_size_smaller_than_the_data_is_named_with_its_offset() -> None:
    error = error_of(b"b\r\npart 000000\n\r\n0\r\n\r\n")
    assert error.offset == 14
    assert error.message.startswith(
        "chunk 1 (size line at byte 0 declares 11 byte(s)) is not followed by CRLF"
    )
    assert "found b'\\n\\r\\n0\\r\\n\\r\\n'" in error.message
    assert error.data == [b"part 000000"]  # what was decoded before the error


def test_a_size_larger_than_the_data_ends_inside_the_chunk() -> None:
    error = error_of(b"20\r\npart 000000\n\r\n0\r\n\r\n")
    assert error.offset == 23
    assert error.message == (
        "the connection closed at byte 23 inside chunk 1 (19 of the 32 byte(s) its size line at byte 0 "
        "declares): the body must end with `0\\r\\n\\r\\n`"
    )


def test_data_without_its_crlf() -> None:
    error = error_of(b"3\r\nabc3\r\ndef\r\n0\r\n\r\n")
    assert error.offset == 6 and "is not followed by CRLF: found b'3\\r\\ndef" in error.message


@pytest.mark.parametrize(
    ("body", "offset", "text"),
    [
        (b"3\nabc\r\n", 0, "the chunk-size line b'3\\n' ends with a bare LF at byte 1"),
        (b"3\r\nabc\r\n0\r\n\n", 11, "the trailer line b'\\n' ends with a bare LF at byte 11"),
        (b"zz\r\nabc\r\n", 0, "the chunk-size line b'zz' does not start with a hexadecimal size"),
        (b"\r\nabc\r\n", 0, "the chunk-size line b'' does not start with a hexadecimal size"),
        (b"3\r\nabc\r\n", 8, "after 1 chunk(s), with no terminating zero-size chunk"),
        (b"3\r\nabc\r\n0\r\n", 11, "after the zero-size chunk, before the empty line that ends the body"),
        (b"3\r\nabc", 6, "after chunk 1's data, before its CRLF"),
        (b"3\r\nabc\r\n1", 9, "inside a chunk-size line (b'1' without its CRLF)"),
        (
            b"3\r\nabc\r\n0\r\n\r\nHTTP",
            13,
            "4 byte(s) after the terminating zero-size chunk, starting b'HTTP'",
        ),
    ],
)
def test_framing_errors(body: bytes, offset: int, text: str) -> None:
    error = error_of(body)
    assert error.offset == offset and text in error.message, error.message


def test_bytes_after_the_end_in_a_later_read() -> None:
    decoder = ChunkedDecoder()
    assert decoder.feed(b"0\r\n\r\n") == [] and decoder.done
    with pytest.raises(FramingError, match="1 byte\\(s\\) after the terminating zero-size chunk"):
        decoder.feed(b"x")


def test_a_line_without_end_is_bounded() -> None:
    error = error_of(b"1" * (MAX_LINE_BYTES + 1))
    assert error.offset == 0 and f"longer than {MAX_LINE_BYTES} bytes with no CRLF" in error.message


# --- the timing rule ------------------------------------------------------------------------------


def answer(*times_ms: float) -> StreamAnswer:
    arrivals = [Arrival(t / 1000, 12) for t in times_ms]
    return StreamAnswer(
        status=200, version="HTTP/1.1", headers=[("transfer-encoding", "chunked")], arrivals=arrivals,
        size=12 * len(arrivals), chunks=len(arrivals), complete=True,
    )  # fmt: skip


def test_reads_closer_than_the_gap_are_one_moment() -> None:
    assert moments(answer(1, 5, 9, 30, 35, 100).arrivals) == 3
    assert moments([]) == 0
    # a continuous stream (a read every 3 ms, never 10 ms apart) is one moment per 10 ms, not one
    assert moments(answer(*range(0, 100, 3)).arrivals) == 9  # at 0, 12, 24, ... 96 ms


def test_parts_spread_over_the_answer_pass() -> None:
    message = judge_timing(answer(2, 100, 200, 300, 400), GIVEN)
    assert message == (
        "streamed: 60 bytes in 5 chunk(s) arrived at 5 distinct moment(s) (10 ms or more apart), the "
        "first body byte 2 ms and the last 400 ms after the request"
    )


def test_a_burst_fails_and_says_why() -> None:
    with pytest.raises(CheckFailed) as caught:
        judge_timing(answer(700, 701, 703), GIVEN)
    text = caught.value.message
    assert text.startswith(
        "the answer is chunked but not streamed: 36 bytes in 3 chunk(s) arrived at 1 distinct"
    )
    assert f"body bytes at {MIN_ARRIVALS} or more distinct moments" in text
    assert "If the model is that fast, give a --stream-body that asks for a longer answer." in text
    assert "Fix: Write the answer with HTTP/1.1 chunked transfer encoding" in text
    with pytest.raises(CheckFailed, match="Give --stream-body with an input the model streams"):
        judge_timing(answer(700, 701, 703), DEFAULT)


def test_a_late_first_part_fails() -> None:
    with pytest.raises(CheckFailed) as caught:
        judge_timing(answer(600, 800, 1000), GIVEN)
    assert "the first part came late:" in caught.value.message
    assert f"at 60% of the time to the last (the rule: within {FIRST_BYTE_SHARE:.0%})" in caught.value.message
    judge_timing(answer(500, 800, 1000), GIVEN)  # exactly half: passes


# --- the options ----------------------------------------------------------------------------------


def test_stream_options() -> None:
    assert stream_payload(False, None, None) is None
    assert stream_payload(True, None, None) == DEFAULT
    given = stream_payload(True, '{"parts": 8}', None)
    assert given == Payload(b'{"parts": 8}', "application/json", None, "--stream-body")
    assert stream_payload(True, "hello", "text/plain").body == b"hello"  # not JSON: no JSON check


def test_stream_body_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "body.json"
    path.write_bytes(b'{"parts": 2}')
    assert stream_payload(True, f"@{path}", None).body == b'{"parts": 2}'


@pytest.mark.parametrize(
    ("args", "text"),
    [
        ((False, "{}", None), "--stream-body needs --streaming"),
        ((False, None, "text/plain"), "--stream-content-type needs --streaming"),
        ((True, "{nope", None), "--stream-body is not JSON (Expecting property name"),
        ((True, "@/no/such/file", None), "--stream-body @/no/such/file: No such file or directory"),
        ((True, None, " "), "--stream-content-type needs a media type"),
    ],
)
def test_stream_option_errors(args: tuple[bool, str | None, str | None], text: str) -> None:
    with pytest.raises(UsageError) as caught:
        stream_payload(*args)
    assert text in str(caught.value)
    with pytest.raises(UsageError, match="--sagemaker-"):
        stream_payload(*args, "--sagemaker-")


# --- streaming.incremental's answers that no test image gives (a fake target; the reader is real) -----


class FakeContainer:
    def state(self) -> SimpleNamespace:
        return SimpleNamespace(running=True, exit_code=None)

    def log_tail(self, lines: int = 15) -> str:
        return ""


def run_incremental(monkeypatch: pytest.MonkeyPatch, got: StreamAnswer, payload: Payload = GIVEN) -> str:
    """streaming.incremental's message (or CheckFailed's) on `got` as the run's stream."""
    monkeypatch.setattr(streaming, "shared", lambda ctx, container: got)
    target = SimpleNamespace(config=CheckConfig(image="x", stream=payload), healthy=FakeContainer)
    try:
        return streaming.incremental(CheckContext(target))  # type: ignore[arg-type]
    except CheckFailed as failed:
        return failed.message


def test_http_10_and_close_delimited_answers_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    old = StreamAnswer(status=200, version="HTTP/1.0", complete=True, size=3, arrivals=[Arrival(0.1, 3)])
    assert run_incremental(monkeypatch, old).startswith(
        "POST /invocations was answered HTTP/1.0 (to an HTTP/1.1 request): chunked encoding, which "
        "SageMaker forwards part by part, needs HTTP/1.1.\nFix: Write the answer with HTTP/1.1 chunked"
    )
    closed = StreamAnswer(status=200, version="HTTP/1.1", complete=True, size=3, arrivals=[Arrival(0.1, 3)])
    assert run_incremental(monkeypatch, closed).startswith(
        "POST /invocations with --stream-body (2 bytes, application/json) was answered without "
        "Transfer-Encoding: chunked or Content-Length (a body ended by closing the connection): the answer "
        "is not streamed."
    )


def test_no_answer_to_the_default_body_says_to_give_one(monkeypatch: pytest.MonkeyPatch) -> None:
    none = StreamAnswer(error="no byte for 60 s waiting for the response head", timed_out=True)
    assert run_incremental(monkeypatch, none, DEFAULT) == (
        f"POST /invocations with the default stream body ({len(DEFAULT_STREAM_BODY)} bytes, application/json) "
        "got no answer: no byte for 60 s waiting for the response head. Give --stream-body with an input the "
        "model streams an answer to (the default body is a text-generation request)."
    )
