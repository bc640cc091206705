"""The lifecycle suite's accounting (tests/fixtures/lifecycle/outcomes.py): every request gets
exactly one outcome, and only the errors an event names count as SageMaker's own."""

from __future__ import annotations

from tests.fixtures.lifecycle.outcomes import Expected, Result, account, classify

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
        "failed": 0,
        "crossed": 1,
        "lost": 1,
    }
    assert tally.attempts == 1 + 2 + 1 + 1
    assert set(tally.bad()) == {"crossed", "lost"}
    assert tally.bad()["lost"] == {"the call never returned": 1}
