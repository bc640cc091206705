"""invocations.keepalive's verdict on one round of measurements (contract_tests/checks/keepalive.py):
a stall is a clear median difference seen in most pairs, never one slow sample; and the media checks'
malformed bodies are really malformed."""

from __future__ import annotations

import json

import pytest

from contract_tests.check_config import Payload
from contract_tests.checks.keepalive import PAIRS, Round
from contract_tests.checks.media import GARBAGE, malformed, media_type

MS = 0.001


def a_round(kept_ms: list[float], fresh_ms: list[float]) -> Round:
    return Round([k * MS for k in kept_ms], [f * MS for f in fresh_ms])


def test_a_delayed_ack_stall_on_every_kept_request_is_a_stall() -> None:
    r = a_round([42.5] * PAIRS, [1.3] * PAIRS)
    assert r.stalled and r.slower_pairs == PAIRS
    assert "median 42.5 ms on one kept-alive connection, 1.3 ms on new connections" in r.describe()


def test_load_spikes_on_a_few_kept_requests_are_no_stall() -> None:
    # four of seven kept-alive requests hit by 50 ms of scheduling delay: the median moves, the pairs
    # do not agree (5 of 7 are needed)
    r = a_round([0.5, 50, 0.6, 51, 0.5, 52, 53], [1.0] * PAIRS)
    assert r.slower_pairs == 4 and not r.stalled


def test_a_small_consistent_difference_is_no_stall() -> None:
    r = a_round([12.0] * PAIRS, [1.0] * PAIRS)  # every pair 11 ms slower: under both thresholds
    assert not r.stalled


def test_slow_new_connections_are_no_stall() -> None:
    assert not a_round([1.0] * PAIRS, [45.0] * PAIRS).stalled


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"{}", "application/json"),
        (b'{"rows": [[1, 2]]}', "application/json; charset=utf-8"),
        (b"12345678", "application/vnd.api+json"),
        (b"[1]", "application/json"),
    ],
)
def test_json_payloads_are_made_unparseable(body: bytes, content_type: str) -> None:
    cut, what = malformed(Payload(body, content_type))
    with pytest.raises(ValueError):
        json.loads(cut)
    assert what


def test_other_types_get_garbage() -> None:
    assert malformed(Payload(b"1,2\n", "text/csv")) == (GARBAGE, f"{len(GARBAGE)} bytes of binary garbage")
    assert media_type("Text/CSV ; charset=utf-8") == "text/csv"
