"""The accept.* and invocations.* contract checks: each FAILS on its broken twin
(tests/fixtures/twins/<check-id>/, one env flag of the echo image) naming what it saw, and PASSES on the
good echo image; limits are read from the config, and accept.concurrent leaves the container healthy."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from contract_tests.check_config import CheckConfig, Payload
from contract_tests.checks.invocations import NOT_VERIFIED
from contract_tests.registry import select
from contract_tests.result import CheckResult, Outcome
from contract_tests.runner import run_check, run_checks
from contract_tests.target import Target
from emulator.config import ContractLimits
from tests.fixtures.twins import FAST_LIMITS

pytestmark = pytest.mark.docker

RunOne = Callable[..., CheckResult]
TwinImage = Callable[[str], str]

CHECKS = [
    "accept.concurrent",
    "invocations.serves",
    "invocations.timely",
    "invocations.ready-when-healthy",
    "invocations.warm-first-call",
    "invocations.content-type",
    "invocations.extra-headers",
    "invocations.large-body",
    "invocations.response-size",
]


def failed(result: CheckResult, check_id: str) -> str:
    assert result.id == check_id
    assert result.outcome is Outcome.FAILED, f"{result.outcome}: {result.message}"
    assert "Fix: " in result.message
    return result.message


@pytest.mark.parametrize("check_id", CHECKS)
def test_good_image_passes(run_one: RunOne, echo_image: str, check_id: str) -> None:
    result = run_one(check_id, echo_image)
    assert result.id == check_id
    assert result.outcome is Outcome.PASSED, f"{result.outcome}: {result.message}"
    assert result.warnings == ()


def test_good_image_messages_of_the_first_call_checks(run_one: RunOne, echo_image: str) -> None:
    serves = run_one("invocations.serves", echo_image, payload_given=True)
    assert serves.message.startswith(
        "POST /invocations with the configured payload (2 bytes, application/json): HTTP 200 in "
    )
    ready = run_one("invocations.ready-when-healthy", echo_image)
    assert ready.message.startswith("the first POST /invocations, ")
    assert " ms after /ping first answered 200, was answered HTTP 200 in " in ready.message
    warm = run_one("invocations.warm-first-call", echo_image)
    assert warm.message.startswith("the first POST /invocations took ") and "(median)" in warm.message
    assert [c["status"] for c in warm.evidence["first_calls"]] == [200, 200, 200]  # first + STEADY_CALLS
    for result in (serves, ready, warm):
        assert result.outcome is Outcome.PASSED and result.warnings == (), result.message
        assert "every answer was an error" not in result.message


def test_every_check_of_the_groups_has_a_twin() -> None:
    # media.py and keepalive.py checks (invocations.* too) are asserted in their own test files
    own = (
        "contract_tests.checks.accept",
        "contract_tests.checks.invocations",
        "contract_tests.checks.envelope",
    )
    registered = [c.id for c in select(["accept", "invocations"]) if c.func.__module__ in own]
    assert registered == CHECKS
    twins = Path(__file__).parents[1] / "fixtures" / "twins"
    assert all((twins / check_id / "Dockerfile").is_file() for check_id in CHECKS)


# -------------------------------------------------------------------------------- accept.concurrent


def test_single_threaded_twin_fails_accept(run_one: RunOne, twin_image: TwinImage) -> None:
    result = run_one("accept.concurrent", twin_image("accept.concurrent"))
    message = failed(result, "accept.concurrent")
    assert "GET /ping on a second connection was not answered within 250 ms in 2 attempt(s)" in message
    assert "no answer within 2 s (answered " in message  # each measurement, and when it came at last
    assert "only once the held invocation completed" in message
    measurements = result.evidence["measurements"]
    assert len(measurements) == 2
    for m in measurements:
        assert m["answered_s"] is None and m["late_answer_s"] is not None
        assert m["held_on"] == "the keep-alive connection of an answered GET /ping"
        assert m["invocation"] == "HTTP 200" and not m["answered_early"]


def test_accept_reports_the_measurement(run_one: RunOne, echo_image: str) -> None:
    result = run_one("accept.concurrent", echo_image)
    assert result.outcome is Outcome.PASSED, result.message
    assert "answered HTTP 200 in" in result.message and "limit 250 ms" in result.message
    (m,) = result.evidence["measurements"]
    assert m["answered_s"] < 0.25 and m["invocation"] == "HTTP 200"


def test_accept_with_an_empty_payload_holds_the_headers(
    run_one: RunOne, echo_image: str, twin_image: TwinImage
) -> None:
    assert run_one("accept.concurrent", echo_image, payload=b"").outcome is Outcome.PASSED
    result = run_one("accept.concurrent", twin_image("accept.concurrent"), payload=b"")
    failed(result, "accept.concurrent")


@pytest.mark.parametrize("image", ["good", "twin"])
def test_accept_leaves_the_shared_container_healthy(
    image: str, echo_image: str, twin_image: TwinImage, tmp_path: Path
) -> None:
    tag = echo_image if image == "good" else twin_image("accept.concurrent")
    (check,) = select(["accept.concurrent"])
    target = Target(CheckConfig(image=tag, limits=FAST_LIMITS, cache_dir=tmp_path))
    try:
        run_check(check, target)
        container = target.healthy()
        with httpx.Client(base_url=container.base_url, timeout=2) as client:
            assert client.get("/ping").status_code == 200
            assert client.post("/invocations", content=b"{}").status_code == 200
    finally:
        target.close()


# -------------------------------------------------------------------------------- invocations.*


def test_slow_twin_fails_timely(run_one: RunOne, twin_image: TwinImage) -> None:
    message = failed(run_one("invocations.timely", twin_image("invocations.timely")), "invocations.timely")
    assert "POST /invocations with the configured payload (2 bytes, application/json)" in message
    assert (
        "got no answer within 2 s (2 times: also right after /ping first answered 200); SageMaker allows 2 s"
        in (message)
    )


def test_timely_reads_the_limit(run_one: RunOne, twin_image: TwinImage) -> None:
    result = run_one(
        "invocations.timely",
        twin_image("invocations.timely"),
        limits=FAST_LIMITS.replace(invocation_timeout_s=8),
    )
    assert result.outcome is Outcome.PASSED, result.message
    assert "answered HTTP 200 in" in result.message and "limit 8 s" in result.message


def test_twin_without_content_type_fails(run_one: RunOne, twin_image: TwinImage) -> None:
    result = run_one("invocations.content-type", twin_image("invocations.content-type"))
    message = failed(result, "invocations.content-type")
    seen = "POST /invocations with Content-Type: application/json was answered HTTP 200 with a 2-byte body"
    assert f"{seen} and no Content-Type header" in message
    assert result.evidence["answers"]["Content-Type: application/json"]["content_type"] is None


def test_content_type_pass_names_both_answers(run_one: RunOne, echo_image: str) -> None:
    result = run_one("invocations.content-type", echo_image, payload=b"a,b\n", content_type="text/csv")
    assert result.outcome is Outcome.PASSED, result.message
    assert result.message == (
        "answered HTTP 200 with Content-Type 'text/csv'; with Accept: */*, HTTP 200 with Content-Type 'text/csv'"
    )
    assert result.warnings == ()


def test_content_type_names_a_json_body_labelled_text_html(run_one: RunOne, mediaapp_image: str) -> None:
    """Flask under gunicorn returning its JSON as a str: Flask labels it text/html. The probe is the Accept
    a client sends (`*/*`, the SDK Predictor's default), not the request's type: the old probe, Accept:
    text/csv, which no client of a JSON-answering model sends, got a 500 from the naive model's Accept
    test (a false FAIL), and its warning named the label only."""
    csv = {"payload": b"1,2\n3,4\n", "content_type": "text/csv"}
    result = run_one("invocations.content-type", mediaapp_image, environment={"MODE": "naive"}, **csv)
    assert result.outcome is Outcome.PASSED, result.message
    (warning,) = result.warnings
    assert warning.startswith(
        "the body is JSON but labelled text/html: POST /invocations with Content-Type: text/csv and with "
        "Content-Type: text/csv, Accept: */* was answered with a JSON body and Content-Type: text/html; "
        "charset=utf-8. SageMaker returns that label to the client as ContentType"
    )
    assert (
        "Fix: Label a JSON answer `Content-Type: application/json`: in Flask return `flask.jsonify(result)`"
        in (warning)
    )
    assert result.evidence["answers"] == {
        "Content-Type: text/csv": {"status": 200, "error": None, "content_type": "text/html; charset=utf-8"},
        "Content-Type: text/csv, Accept: */*": {
            "status": 200,
            "error": None,
            "content_type": "text/html; charset=utf-8",
        },
    }
    assert "with Accept: */*, HTTP 200 with Content-Type 'text/html; charset=utf-8'" in result.message

    # The issue's case: a JSON request; the old check warned "Accept: application/json was answered with
    # Content-Type text/html", never saying that the body is JSON.
    json_in = run_one("invocations.content-type", mediaapp_image, environment={"MODE": "naive"})
    assert json_in.outcome is Outcome.PASSED, json_in.message
    (warning,) = json_in.warnings
    assert warning.startswith(
        "the body is JSON but labelled text/html: POST /invocations with Content-Type: "
    )

    framework = run_one("invocations.content-type", mediaapp_image, **csv)  # flask.Response(mimetype=JSON)
    assert framework.outcome is Outcome.PASSED, framework.message
    assert framework.warnings == ()


def test_content_type_with_accept_given_tries_the_sdk_default(run_one: RunOne, echo_image: str) -> None:
    result = run_one("invocations.content-type", echo_image, accept="text/csv")
    assert result.outcome is Outcome.PASSED, result.message
    assert result.message.startswith(
        "answered HTTP 200 with Content-Type 'application/json'; with Accept: */*,"
    )
    assert result.warnings == ("Accept: text/csv was answered with Content-Type application/json",)
    assert set(result.evidence["answers"]) == {
        "Content-Type: application/json, Accept: text/csv",
        "Content-Type: application/json, Accept: */*",
    }


def test_strict_headers_twin_fails_and_names_the_headers(run_one: RunOne, twin_image: TwinImage) -> None:
    result = run_one("invocations.extra-headers", twin_image("invocations.extra-headers"))
    message = failed(result, "invocations.extra-headers")
    assert "answered HTTP 200 without extra headers but HTTP 400" in message
    assert "echo: unexpected headers" in message  # the container's own words
    assert "X-Amzn-SageMaker-Inference-Id alone: HTTP 400" in message
    assert "X-Amzn-Trace-Id alone: HTTP 400" in message
    assert "X-Forwarded-For alone" not in message
    assert result.evidence["alone"]["X-Forwarded-For"] == 200


def test_body_limit_twin_fails_large_body(run_one: RunOne, twin_image: TwinImage) -> None:
    result = run_one("invocations.large-body", twin_image("invocations.large-body"))
    message = failed(result, "invocations.large-body")
    assert "with a 6,291,456-byte body" in message
    assert "was refused HTTP 413 ('echo: body over 1000000 bytes')" in message
    assert result.evidence["status"] == 413


def test_large_body_reads_the_limit(run_one: RunOne, echo_image: str, twin_image: TwinImage) -> None:
    lowered = FAST_LIMITS.replace(max_request_bytes=900_000)
    result = run_one("invocations.large-body", twin_image("invocations.large-body"), limits=lowered)
    assert result.outcome is Outcome.PASSED, result.message
    assert "900,000-byte body" in result.message


def test_padded_twin_fails_response_size(run_one: RunOne, twin_image: TwinImage) -> None:
    result = run_one("invocations.response-size", twin_image("invocations.response-size"))
    message = failed(result, "invocations.response-size")
    assert "answered HTTP 200 with a body of 7,000,000 bytes (Content-Length 7000000)" in message
    assert "over SageMaker's 6,291,456-byte cap" in message
    assert result.evidence["response_bytes"] == 7_000_000


def test_response_size_reads_the_limit(run_one: RunOne, echo_image: str) -> None:
    result = run_one(
        "invocations.response-size", echo_image, limits=FAST_LIMITS.replace(max_response_bytes=1)
    )
    message = failed(result, "invocations.response-size")
    assert "with a body of 2 bytes" in message and "over SageMaker's 1-byte cap" in message


@pytest.mark.slow
def test_timely_twin_fails_with_sagemakers_default_limit(run_one: RunOne, twin_image: TwinImage) -> None:
    """A 70 s model against the real 60 s limit, not only a lowered one (about 2 minutes: the first calls
    wait twice, right after /ping's 200 and once more; timely reuses that)."""
    result = run_one(
        "invocations.timely", twin_image("invocations.timely.default-limit"), limits=ContractLimits()
    )
    message = failed(result, "invocations.timely")
    assert message.startswith(
        "POST /invocations with the configured payload (2 bytes, application/json) got no answer within 60 s "
        "(2 times: also right after /ping first answered 200); SageMaker allows 60 s."
    )
    assert result.evidence["limit_s"] == 60 and result.evidence["status"] is None


# -------------------------------------------------------------------------------- invocations.serves

SERVES_TWIN = "invocations.serves"
MODEL_FN = "'Please provide a model_fn implementation'"


def test_serves_fails_when_no_given_payload_gets_a_2xx(run_one: RunOne, twin_image: TwinImage) -> None:
    extra = Payload(b"1,2\n", "text/csv", "text/csv", "--payload b.csv")
    result = run_one(SERVES_TWIN, twin_image(SERVES_TWIN), payload_given=True, extra_payloads=(extra,))
    message = failed(result, SERVES_TWIN)
    assert message.startswith("no invocation succeeded: POST /invocations with the configured payload ")
    assert "the configured payload (2 bytes, application/json): HTTP 500 in " in message
    assert "--payload b.csv (4 bytes, text/csv, Accept text/csv): HTTP 500 in " in message
    assert message.count(f"({MODEL_FN})") == 2  # each payload's body excerpt
    assert "SageMaker would answer every client request with ModelError" in message
    assert "/opt/ml/model" in message and "--payload FILE --content-type T" in message  # the fix
    assert "Last log lines:" in message and '"POST /invocations HTTP/1.1" 500' in message
    assert [a["status"] for a in result.evidence["answers"]] == [500, 500]
    assert result.headline_warnings == ()


def test_serves_without_payload_warns_in_the_headline(run_one: RunOne, twin_image: TwinImage) -> None:
    result = run_one(SERVES_TWIN, twin_image(SERVES_TWIN))
    assert result.outcome is Outcome.PASSED, result.message
    assert result.message.startswith("no 2xx answer: POST /invocations with the default payload (2 bytes")
    assert "HTTP 500 in" in result.message and MODEL_FN in result.message
    assert result.warnings == (NOT_VERIFIED,) and result.headline_warnings == (NOT_VERIFIED,)
    assert NOT_VERIFIED == "no successful invocation: the model's serving was not verified; give --payload"


def test_serves_passes_when_one_of_several_payloads_gets_a_2xx(run_one: RunOne, echo_image: str) -> None:
    """The first input is refused (413, over the twin's MAX_BODY_BYTES), the second is served."""
    small = Payload(b"{}", "application/json", None, "--payload small.json")
    result = run_one(
        SERVES_TWIN,
        echo_image,
        payload=b"x" * 100,
        payload_given=True,
        extra_payloads=(small,),
        environment={"MAX_BODY_BYTES": "10"},
    )
    assert result.outcome is Outcome.PASSED, result.message
    assert (
        "POST /invocations with --payload small.json (2 bytes, application/json): HTTP 200" in result.message
    )
    assert "1 of 2 inputs answered 2xx" in result.message
    assert result.warnings == ()  # a 4xx to one input is the model's verdict on it, not a server error
    assert [a["status"] for a in result.evidence["answers"]] == [413, 200]


def test_serves_sends_no_accept_unless_given_as_boto3_does(run_one: RunOne, twin_image: TwinImage) -> None:
    """A server that refuses requests without an Accept header (406) fails: boto3 sends none unless
    the caller gives one, and SageMaker forwards what it got. Given `--accept */*` it serves."""
    twin = twin_image("invocations.serves.no-accept")
    result = run_one(SERVES_TWIN, twin, payload_given=True)
    message = failed(result, SERVES_TWIN)
    assert "the configured payload (2 bytes, application/json): HTTP 406 in " in message
    assert "('echo: no Accept header')" in message
    assert "The 406 came to a request without an Accept header: boto3 sends none" in message  # the fix
    assert [a["status"] for a in result.evidence["answers"]] == [406]
    accepted = run_one(SERVES_TWIN, twin, payload_given=True, accept="*/*")
    assert accepted.outcome is Outcome.PASSED, accepted.message
    assert "(2 bytes, application/json, Accept */*): HTTP 200" in accepted.message


def test_checks_that_saw_only_errors_say_so(twin_image: TwinImage, tmp_path: Path) -> None:
    """Every invocation check on an image that answers 500 to everything: none reads as a plain pass."""
    expected = {
        "invocations.timely": Outcome.PASSED,
        "invocations.ready-when-healthy": Outcome.PASSED,
        "invocations.warm-first-call": Outcome.PASSED,
        "invocations.content-type": Outcome.SKIPPED,
        "invocations.extra-headers": Outcome.PASSED,
        "invocations.large-body": Outcome.PASSED,
        "invocations.response-size": Outcome.PASSED,
    }
    target = Target(CheckConfig(image=twin_image(SERVES_TWIN), limits=FAST_LIMITS, cache_dir=tmp_path))
    results = run_checks(select(list(expected)), target)
    assert [r.id for r in results] == list(expected)
    note = f"(every answer was an error: HTTP 500 {MODEL_FN}; see invocations.serves)"
    for result in results:
        assert result.outcome is expected[result.id], f"{result.id}: {result.outcome}: {result.message}"
        # first, where the report's one-line row of a passed check shows it (a skip's reason ends with it)
        where = result.message.endswith if result.outcome is Outcome.SKIPPED else result.message.startswith
        assert where(note), f"{result.id}: {result.message}"
    ready = next(r for r in results if r.id == "invocations.ready-when-healthy")
    assert "and so did every call for 1" in ready.message  # retried for READY_WINDOW_S (10 s)
    assert "no sign of a model still loading" in ready.message


# -------------------------------------------------------------------------------- first calls


def test_ready_when_healthy_fails_a_model_that_serves_503_after_ping_200(
    run_one: RunOne, twin_image: TwinImage
) -> None:
    check_id = "invocations.ready-when-healthy"
    result = run_one(check_id, twin_image(check_id))
    message = failed(result, check_id)
    assert message.startswith(
        "/ping answered 200 but POST /invocations with the configured payload got HTTP 503 in "
    )
    assert "('echo: the model is not loaded yet') right after it" in message
    assert "after the 200 on it was answered HTTP 200 in" in message
    assert "these would be client errors on every new instance" in message
    calls = result.evidence["first_calls"]
    assert calls[0]["status"] == 503 and calls[0]["sent_s"] < 0.5
    recovered = next(c for c in calls if c["status"] == 200)
    assert 2.5 < recovered["sent_s"] < 5  # NOT_READY_S=3
    assert {c["status"] for c in calls[: calls.index(recovered)]} == {503}


def test_warm_first_call_fails_a_first_call_over_the_limit(run_one: RunOne, twin_image: TwinImage) -> None:
    check_id = "invocations.warm-first-call"
    result = run_one(check_id, twin_image(check_id))
    message = failed(result, check_id)
    assert message.startswith(
        "the first POST /invocations after /ping's first 200 got no answer within 2 s (SageMaker allows 2 s); "
        "the next one was answered HTTP 200 in"
    )
    assert "the model is loaded on the first request and that takes longer than the limit" in message
    calls = result.evidence["first_calls"]
    assert calls[0]["status"] is None and calls[0]["error"] == "no answer within 2 s"
    assert all(c["status"] == 200 for c in calls[1:])


def test_warm_first_call_warns_a_much_slower_first_call(run_one: RunOne, echo_image: str) -> None:
    result = run_one("invocations.warm-first-call", echo_image, environment={"LAZY_LOAD_S": "1.5"})
    assert result.outcome is Outcome.PASSED, result.message
    (warning,) = result.warnings
    assert warning.startswith("the first POST /invocations took 1.5")
    assert (
        "the next ones " in warning and " ms (median): the model is loaded or warmed on the first" in warning
    )
    assert "can exceed SageMaker's 2 s limit" in warning


def test_the_lazy_twins_other_checks_pass(run_one: RunOne, twin_image: TwinImage) -> None:
    """One broken rule, one failure: the lazy first call is warm-first-call's alone."""
    image = twin_image("invocations.warm-first-call")
    assert run_one("invocations.timely", image).outcome is Outcome.PASSED
    skipped = run_one("invocations.ready-when-healthy", image)
    assert skipped.outcome is Outcome.SKIPPED
    assert skipped.message == (
        "the first invocation after /ping's 200 got no answer within 2 s; see invocations.warm-first-call"
    )


def test_a_timeout_is_waited_out_once_per_request(twin_image: TwinImage, tmp_path: Path) -> None:
    """Every invocation of the twin takes 5 s (limit 2 s): the first calls wait twice (right after /ping's
    200, then the steady state), invocations.timely reports it, the dependent checks skip with a pointer
    at once, and accept.concurrent does not wait for its held invocation's answer."""
    ids = ["accept.concurrent", *(c for c in CHECKS if c.startswith("invocations."))]
    target = Target(
        CheckConfig(image=twin_image("invocations.timely"), limits=FAST_LIMITS, cache_dir=tmp_path)
    )
    target.startup()  # the first calls: two waits of the limit
    results = {r.id: r for r in run_checks(select(ids), target)}
    assert results["invocations.timely"].outcome is Outcome.FAILED
    assert "got no answer within 2 s (2 times: also right after /ping first answered 200)" in (
        results["invocations.timely"].message
    )
    assert results["accept.concurrent"].outcome is Outcome.PASSED
    assert results["invocations.serves"].outcome is Outcome.PASSED  # default payload: a warning
    assert results["invocations.serves"].headline_warnings == (NOT_VERIFIED,)
    seen = (
        "POST /invocations with the configured payload got no answer within 2 s (seen once, not sent again)"
    )
    for check_id in ("content-type", "extra-headers", "large-body", "response-size"):
        result = results[f"invocations.{check_id}"]
        assert result.outcome is Outcome.SKIPPED, result.message
        assert result.message == f"{seen}; see invocations.timely"
    assert results["invocations.warm-first-call"].message == (
        "every invocation got no answer within 2 s; see invocations.timely"
    )
    waited = {r.id: round(r.duration_s, 2) for r in results.values() if r.duration_s >= 2}
    assert not waited, f"checks that waited out the 2 s limit again: {waited}"
