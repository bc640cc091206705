"""invocations.media-params, .unsupported-media and .malformed-payload (contract_tests/checks/media.py):
each judged on its twin (tests/fixtures/twins/<check-id>/, env flags of the echo image), on the good echo
image, and on real serving stacks (tests/fixtures/stacks.py): Flask under gunicorn (MODE=framework
handles media types as Flask does, MODE=naive as hand-written servers often do) and uvicorn + FastAPI
as its documentation writes a model."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from contract_tests.check_config import Payload
from contract_tests.registry import select
from contract_tests.result import CheckResult, Outcome

pytestmark = pytest.mark.docker

RunOne = Callable[..., CheckResult]
TwinImage = Callable[[str], str]

CHECKS = ["invocations.media-params", "invocations.unsupported-media", "invocations.malformed-payload"]
CSV = Payload(b"1,2\n3,4\n", "text/csv", source="--payload rows.csv")
NAIVE = {"MODE": "naive"}


def passed(result: CheckResult, check_id: str) -> str:
    assert result.id == check_id
    assert result.outcome is Outcome.PASSED, f"{result.outcome}: {result.message}"
    return result.message


def warning(result: CheckResult, check_id: str) -> str:
    passed(result, check_id)
    (text,) = result.warnings
    assert "Invocation5XXErrors" in text and "Fix: " in text
    return text


def test_every_check_has_a_twin_and_an_example() -> None:
    checks = [c for c in select(["invocations"]) if c.func.__module__ == "contract_tests.checks.media"]
    assert [c.id for c in checks] == CHECKS
    twins = Path(__file__).parents[1] / "fixtures" / "twins"
    for c in checks:
        assert (twins / c.id / "Dockerfile").is_file()
        assert c.before and c.after and c.fix


@pytest.mark.parametrize("check_id", CHECKS)
def test_good_echo_image_passes(run_one: RunOne, echo_image: str, check_id: str) -> None:
    result = run_one(check_id, echo_image)
    passed(result, check_id)
    assert result.warnings == ()


# ------------------------------------------------------------------------ invocations.media-params


def test_exact_content_type_compare_fails(run_one: RunOne, twin_image: TwinImage) -> None:
    result = run_one("invocations.media-params", twin_image("invocations.media-params"))
    assert result.outcome is Outcome.FAILED, result.message
    message = result.message
    assert message.startswith(
        "POST /invocations with a charset parameter added to the Content-Type was refused"
    )
    assert "Content-Type: application/json; charset=utf-8 was answered HTTP 415" in message
    assert "Content-Type: application/json;charset=UTF-8 was answered HTTP 415" in message
    assert "unsupported Content-Type 'application/json; charset=utf-8'" in message  # the body, quoted
    assert "where Content-Type: application/json gets HTTP 200" in message
    assert "Fix: Compare the media type, not the whole header" in message
    assert result.evidence["answers"] == {
        "application/json": {
            "application/json": 200,
            "application/json; charset=utf-8": 415,
            "application/json;charset=UTF-8": 415,
        }
    }


def test_bare_type_refused_too_is_skipped(run_one: RunOne, twin_image: TwinImage) -> None:
    result = run_one(
        "invocations.media-params", twin_image("invocations.media-params"), content_type="text/plain"
    )
    assert result.outcome is Outcome.SKIPPED, result.message
    assert "Content-Type: text/plain itself is answered HTTP 415" in result.message
    assert "configure a payload the model accepts" in result.message


def test_charset_only_model_fails_on_the_bare_type(run_one: RunOne, twin_image: TwinImage) -> None:
    """The charset trap in reverse: configured with a charset, the model refuses the bare type."""
    image = twin_image("invocations.media-params.charset-only")
    result = run_one(
        "invocations.media-params", image, payload=b"1,2\n", content_type="text/csv; charset=utf-8"
    )
    assert result.outcome is Outcome.FAILED, result.message
    message = result.message
    assert message.startswith(
        "POST /invocations with the charset parameter removed from the Content-Type was refused: "
        "Content-Type: text/csv was answered HTTP 415"
    )
    assert "unsupported Content-Type 'text/csv'" in message  # the body, quoted
    assert "Content-Type: text/csv;charset=UTF-8 was answered HTTP 415" in message  # Java's spelling too
    assert "where Content-Type: text/csv; charset=utf-8 gets HTTP 200" in message
    assert "the SageMaker Python SDK's serializers: CSVSerializer sends `text/csv`" in message
    assert "would get ModelError for every request" in message
    assert "Fix: Compare the media type, not the whole header" in message
    assert "(UTF-8 when none is given)" in message
    assert result.evidence["answers"] == {
        "text/csv; charset=utf-8": {
            "text/csv; charset=utf-8": 200,
            "text/csv": 415,
            "text/csv;charset=UTF-8": 415,
        }
    }


def test_charset_only_flask_model_fails_on_the_bare_type(run_one: RunOne, mediaapp_image: str) -> None:
    """The same trap on Flask under gunicorn: `request.content_type == "text/csv; charset=utf-8"`."""
    env = {"MODE": "naive", "NAIVE_CSV_TYPE": "text/csv; charset=utf-8"}
    csv = {"payload": b"1,2\n3,4\n", "content_type": "text/csv; charset=utf-8"}
    result = run_one("invocations.media-params", mediaapp_image, environment=env, **csv)
    assert result.outcome is Outcome.FAILED, result.message
    assert result.message.startswith(
        "POST /invocations with the charset parameter removed from the Content-Type was refused: "
        "Content-Type: text/csv was answered HTTP 500"
    )
    assert "Internal Server Error" in result.message  # Flask's page, quoted
    assert "where Content-Type: text/csv; charset=utf-8 gets HTTP 200" in result.message
    assert "Fix: Compare the media type, not the whole header" in result.message


def test_charset_given_is_tried_bare_too(run_one: RunOne, echo_image: str) -> None:
    result = run_one("invocations.media-params", echo_image, content_type="text/csv; charset=utf-8")
    message = passed(result, "invocations.media-params")
    assert "text/csv; charset=utf-8 also as 'text/csv' and 'text/csv;charset=UTF-8'" in message
    assert set(result.evidence["answers"]["text/csv; charset=utf-8"]) == {
        "text/csv; charset=utf-8",
        "text/csv",
        "text/csv;charset=UTF-8",
    }


def test_each_configured_type_is_tried(run_one: RunOne, mediaapp_image: str) -> None:
    good = run_one("invocations.media-params", mediaapp_image, extra_payloads=(CSV,))
    message = passed(good, "invocations.media-params")
    assert "application/json with '; charset=utf-8' and ';charset=UTF-8'" in message
    assert "text/csv with '; charset=utf-8'" in message
    assert good.warnings == ()

    naive = run_one("invocations.media-params", mediaapp_image, environment=NAIVE, extra_payloads=(CSV,))
    assert naive.outcome is Outcome.FAILED, naive.message
    assert "Content-Type: application/json; charset=utf-8 was answered HTTP 500" in naive.message
    assert "Content-Type: text/csv; charset=utf-8 was answered HTTP 500" in naive.message
    assert "where Content-Type: text/csv gets HTTP 200" in naive.message
    assert set(naive.evidence["answers"]) == {"application/json", "text/csv"}


# ------------------------------------------------------------------- invocations.unsupported-media


def test_unsupported_media_answered_500_warns(run_one: RunOne, twin_image: TwinImage) -> None:
    result = run_one("invocations.unsupported-media", twin_image("invocations.unsupported-media"))
    text = warning(result, "invocations.unsupported-media")
    assert (
        "POST /invocations with Content-Type: application/x-smlocal-unsupported was answered HTTP 500" in text
    )
    assert "(deserves 415 Unsupported Media Type)" in text
    assert "POST /invocations with Accept: application/x-smlocal-unsupported was answered HTTP 500" in text
    assert "(deserves 406 Not Acceptable)" in text
    assert result.evidence["answers"] == {
        "Content-Type: application/x-smlocal-unsupported": 500,
        "Accept: application/x-smlocal-unsupported": 500,
    }


def test_unsupported_media_skipped_when_the_payload_gets_5xx(run_one: RunOne, twin_image: TwinImage) -> None:
    image = twin_image("invocations.unsupported-media")
    result = run_one("invocations.unsupported-media", image, content_type="text/plain")
    assert result.outcome is Outcome.SKIPPED, result.message
    assert "the configured payload itself is answered HTTP 500" in result.message


def test_unsupported_media_on_flask(run_one: RunOne, mediaapp_image: str) -> None:
    good = run_one("invocations.unsupported-media", mediaapp_image)
    message = passed(good, "invocations.unsupported-media")
    assert good.warnings == ()
    assert "Content-Type: application/x-smlocal-unsupported: HTTP 415" in message
    assert "Accept: application/x-smlocal-unsupported: HTTP 406" in message

    naive = run_one("invocations.unsupported-media", mediaapp_image, environment=NAIVE)
    text = warning(naive, "invocations.unsupported-media")
    assert "Content-Type: application/x-smlocal-unsupported was answered HTTP 500" in text
    assert "Accept: application/x-smlocal-unsupported was answered HTTP 500" in text


# ------------------------------------------------------------------ invocations.malformed-payload


def test_malformed_json_answered_500_warns(run_one: RunOne, twin_image: TwinImage) -> None:
    result = run_one("invocations.malformed-payload", twin_image("invocations.malformed-payload"))
    text = warning(result, "invocations.malformed-payload")
    assert (
        "POST /invocations with the configured payload truncated to 1 byte under Content-Type "
        "application/json was answered HTTP 500" in text
    )
    assert "malformed JSON" in text  # the container's answer, quoted
    assert "a payload that cannot be parsed deserves 400" in text
    assert result.evidence["answers"] == {"application/json": 500}


def test_malformed_payload_on_flask(run_one: RunOne, mediaapp_image: str) -> None:
    payload = b'{"rows": [[1, 2], [3, 4]]}'
    good = run_one("invocations.malformed-payload", mediaapp_image, payload=payload, extra_payloads=(CSV,))
    message = passed(good, "invocations.malformed-payload")
    assert good.warnings == ()
    assert (
        "the configured payload truncated to 13 bytes under Content-Type application/json: HTTP 400"
        in message
    )
    assert "bytes of binary garbage under Content-Type text/csv: HTTP 400" in message

    naive = run_one(
        "invocations.malformed-payload",
        mediaapp_image,
        payload=payload,
        extra_payloads=(CSV,),
        environment=NAIVE,
    )
    text = warning(naive, "invocations.malformed-payload")
    assert "truncated to 13 bytes under Content-Type application/json was answered HTTP 500" in text
    assert "bytes of binary garbage under Content-Type text/csv was answered HTTP 500" in text
    assert naive.evidence["answers"] == {"application/json": 500, "text/csv": 500}


# ------------------------------------------------------------------- uvicorn + FastAPI, as documented


def test_fastapi_defaults_pass_every_media_check(run_one: RunOne, fastapi_image: str) -> None:
    """FastAPI parses a JSON body whatever its charset (and here whatever its Content-Type), answers 422
    to bad JSON and ignores Accept: nothing to warn about."""
    results = {check_id: run_one(check_id, fastapi_image) for check_id in CHECKS}
    for check_id, result in results.items():
        passed(result, check_id)
        assert result.warnings == ()
    assert "application/json with '; charset=utf-8'" in results["invocations.media-params"].message
    assert (
        "Content-Type: application/x-smlocal-unsupported: HTTP 200"
        in results["invocations.unsupported-media"].message
    )
    assert "truncated to 1 byte under Content-Type application/json: HTTP 422" in (
        results["invocations.malformed-payload"].message
    )
