"""The lifecycle suite's accounting (tests/fixtures/lifecycle/outcomes.py): every request gets
exactly one outcome, and only the errors an event names count as SageMaker's own."""

from __future__ import annotations

from tests.fixtures.lifecycle.outcomes import Accepted, Expected, Result, account, classify

KILLED = Expected(errors={("ModelError", 424): "in flight on the killed instance"})


def test_an_answer_with_its_own_id_is_ok_and_another_id_is_crossed() -> None:
    assert classify(Result("r0-1", "answer", answered_id="r0-1"), Expected()) == ("ok", "answered")
    assert classify(Result("r0-1", "answer", answered_id="r1-1"), Expected()) == (
        "crossed",
        "answered with id 'r1-1'",
    )
    assert classify(Result("r0-1", "answer", answered_id=None), Expected())[0] == "crossed"


def test_an_error_counts_as_sagemakers_only_when_the_event_names_it() -> None:
    error = Result("r0-1", "error", code="ModelError", status=424, message="boom", attempts=1)
    assert classify(error, KILLED) == ("as_sagemaker", "ModelError (424): in flight on the killed instance")
    assert classify(error, Expected()) == ("failed", "ModelError (424): boom")
    other = Result("r0-1", "error", code="ValidationError", status=400, message="Endpoint x not found.")
    assert classify(other, KILLED) == ("failed", "ValidationError (400): Endpoint x not found.")


def test_a_connection_error_is_refused_only_while_smlocal_is_down() -> None:
    refused = Result("r0-1", "connect", message="Could not connect", attempts=3)
    assert classify(refused, Expected(server_down=True))[0] == "refused"
    assert classify(refused, Expected()) == (
        "failed",
        "connection error while smlocal was up: Could not connect",
    )


def test_a_read_timeout_is_lost() -> None:
    assert classify(Result("r0-1", "timeout", message="Read timeout"), Expected(server_down=True)) == (
        "lost",
        "no answer: Read timeout",
    )


def test_every_sent_request_is_accounted_for_once() -> None:
    results = [
        Result("a", "answer", answered_id="a"),
        Result("b", "error", code="ModelError", status=424, message="x", attempts=2),
        Result("a", "answer", answered_id="a"),  # a second outcome for one request
    ]
    tally = account(["a", "b", "c"], results, KILLED)
    assert tally.row() == {
        "sent": 3,
        "ok": 1,
        "as_sagemaker": 1,
        "refused": 0,
        "queued": 0,
        "failed": 0,
        "crossed": 1,
        "lost": 1,
    }
    assert tally.attempts == 1 + 2 + 1 + 1
    assert set(tally.bad()) == {"crossed", "lost"}
    assert tally.bad()["lost"] == {"the call never returned": 1}


ACCEPTED = Accepted("s3://b/out/r0-1.out", "s3://b/err/r0-1-error.out")
KILLED_ASYNC = Expected(failure_objects={"dropped the connection": "running on the killed instance"})


def _async(**settled: object) -> Result:
    return Result("r0-1", "async", accepted=ACCEPTED, **settled)  # type: ignore[arg-type]


def test_an_async_request_is_ok_when_its_output_carries_its_id() -> None:
    out = b'{"id": "r0-1"}'
    assert classify(_async(outputs=(out, out), answered_id="r0-1"), Expected()) == ("ok", "output written")
    assert classify(_async(outputs=(b"x",), answered_id="r1-1"), Expected()) == (
        "crossed",
        "output carries id 'r1-1'",
    )


def test_an_async_request_with_both_objects_or_two_outputs_is_crossed() -> None:
    out = b'{"id": "r0-1"}'
    both = _async(outputs=(out,), answered_id="r0-1", failure="Received server error (500)")
    assert classify(both, KILLED_ASYNC) == ("crossed", "both an output and a failure object")
    twice = _async(outputs=(out, b'{"id": "r0-1", "x": 1}'), answered_id="r0-1")
    assert classify(twice, Expected()) == (
        "crossed",
        "the output object was written twice with different content",
    )


def test_an_async_failure_object_is_sagemakers_only_when_the_event_names_its_text() -> None:
    failure = _async(
        failure="ModelError: the container dropped the connection while the request was in flight"
    )
    assert classify(failure, KILLED_ASYNC) == (
        "as_sagemaker",
        "failure object: running on the killed instance",
    )
    assert classify(failure, Expected())[0] == "failed"
    assert classify(failure, Expected())[1].startswith("failure object: ModelError: the container dropped")


def test_an_async_request_with_no_object_is_queued_while_the_queue_holds_requests_else_lost() -> None:
    assert classify(_async(queued=True), Expected())[0] == "queued"
    assert classify(_async(), Expected()) == (
        "lost",
        "accepted, then no output or failure object and an empty queue",
    )
    never_settled = Result("r0-1", "accepted", accepted=ACCEPTED)
    assert classify(never_settled, Expected()) == ("lost", "accepted, and never looked for in S3")


def test_queued_is_not_a_bad_outcome_and_the_bad_ones_are_kept_with_their_reasons() -> None:
    tally = account(
        ["r0-1", "r0-2"], [_async(queued=True), Result("r0-2", "async", accepted=ACCEPTED)], Expected()
    )
    assert tally.row()["queued"] == 1 and tally.row()["lost"] == 1
    assert set(tally.bad()) == {"lost"}


def test_a_stream_broken_mid_answer_is_a_connection_error_and_anything_else_a_failure() -> None:
    """A streamed answer whose connection broke (smlocal killed mid-stream) raised out of the load's
    worker thread, which died and left its request "never returned" (lost) in CI; now every
    exception of a call is a result."""
    from urllib3.exceptions import ProtocolError

    from tests.fixtures.lifecycle.load import call

    def broken(rt: object, request_id: str) -> str:
        raise ProtocolError("Connection broken: IncompleteRead(0 bytes read)")

    def odd(rt: object, request_id: str) -> str:
        raise ValueError("an event stream that made no sense")

    result = call(None, broken, "r0-0")
    assert result.kind == "connect"
    assert classify(result, Expected(server_down=True))[0] == "refused"
    assert classify(result, Expected())[0] == "failed"
    assert classify(call(None, odd, "r0-1"), Expected(server_down=True)) == (
        "failed",
        "ValueError (0): an event stream that made no sense",
    )
