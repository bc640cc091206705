"""What the invocation checks say about the answers they saw (pure logic, no container)."""

from __future__ import annotations

import httpx
import pytest

from contract_tests.checks.calls import Answer, errors_note


def answer(status: int | None, body: bytes = b"", content_type: str | None = None, **kw: object) -> Answer:
    headers = httpx.Headers({"content-type": content_type} if content_type else {})
    return Answer(status, headers, body, len(body), 0.01, **kw)  # type: ignore[arg-type]


def test_only_error_answers_are_said_with_the_first_answered_one() -> None:
    timeout = answer(None, error="no answer within 60 s", timed_out=True)
    note = errors_note([timeout, answer(500, b"Please provide a model_fn implementation"), answer(404)])
    assert (
        note
        == " (every answer was an error: HTTP 500 'Please provide a model_fn implementation'; see invocations.serves)"
    )
    assert (
        errors_note([timeout])
        == " (every answer was an error: no answer within 60 s; see invocations.serves)"
    )
    assert errors_note([answer(413)]) == " (every answer was an error: HTTP 413; see invocations.serves)"


@pytest.mark.parametrize("ok", [200, 204, 302, 399])
def test_one_answer_below_400_is_no_note(ok: int) -> None:
    assert errors_note([answer(500, b"x"), answer(ok)]) == ""
    assert errors_note([]) == ""


def test_a_long_error_body_is_cut() -> None:
    note = errors_note([answer(500, b"e" * 500)])
    assert f"HTTP 500 '{'e' * 80}…'" in note


def test_kinds_of_answers() -> None:
    assert answer(503).server_error and not answer(503).ok
    assert answer(None, error="refused").server_error  # no connection: not loaded yet, or gone
    timeout = answer(None, error="no answer within 2 s", timed_out=True)
    assert not timeout.server_error and not timeout.answered
    assert answer(200).ok and not answer(200).server_error and not answer(404).server_error


def test_binary_bodies_are_not_quoted_as_text() -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(64))
    assert answer(200, png, "image/png").excerpt() == f"<{len(png):,} bytes of image/png>"
    assert answer(200, b"\x00\x01\x02").excerpt() == "<3 bytes of binary data>"
    assert answer(500, "modèle absent".encode()).excerpt() == "modèle absent"
    cut = answer(500, ("x" + "é" * 150).encode()).excerpt()  # cut inside a two-byte character: text
    assert cut.startswith("xéé") and cut.endswith("…")
