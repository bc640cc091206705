"""The event-stream encoding, read back with botocore's own decoder (what boto3 users run)."""

from __future__ import annotations

import json

import pytest
from botocore.eventstream import ChecksumMismatch, EventStreamBuffer, EventStreamMessage

from emulator.wire import eventstream


def decode(data: bytes) -> list[EventStreamMessage]:
    buffer = EventStreamBuffer()
    buffer.add_data(data)
    return list(buffer)


def test_a_payload_part_is_what_botocore_decodes() -> None:
    (message,) = decode(eventstream.payload_parts(b"\x00hello\xff"))
    assert message.headers == {
        ":event-type": "PayloadPart",
        ":content-type": "application/octet-stream",
        ":message-type": "event",
    }
    assert message.payload == b"\x00hello\xff"


def test_an_empty_part_and_messages_split_across_reads_decode() -> None:
    data = eventstream.payload_parts(b"") + eventstream.payload_parts(b"abc")
    buffer = EventStreamBuffer()
    messages = []
    for i in range(len(data)):  # one byte at a time, as a slow network would hand them over
        buffer.add_data(data[i : i + 1])
        messages.extend(buffer)
    assert [m.payload for m in messages] == [b"", b"abc"]


def test_the_exceptions_carry_their_json_bodies() -> None:
    broken, internal = decode(
        eventstream.model_stream_error("it broke", "StreamBroken")
        + eventstream.internal_stream_failure("ours")
    )
    assert broken.headers[":message-type"] == "exception"
    assert broken.headers[":exception-type"] == "ModelStreamError"
    assert json.loads(broken.payload) == {"Message": "it broke", "ErrorCode": "StreamBroken"}
    assert internal.headers[":exception-type"] == "InternalStreamFailure"
    assert json.loads(internal.payload) == {"Message": "ours"}


@pytest.mark.parametrize("where", [9, -1], ids=["prelude", "message"])
def test_a_changed_byte_fails_its_crc(where: int) -> None:
    data = bytearray(eventstream.payload_parts(b"payload"))
    data[where] ^= 0x01
    with pytest.raises(ChecksumMismatch):
        decode(bytes(data))


def test_a_part_over_the_message_limit_is_split_into_several() -> None:
    big = bytes(range(256)) * (eventstream.MAX_PAYLOAD_BYTES // 256 * 2 + 3)
    messages = decode(eventstream.payload_parts(big))
    assert len(messages) == 3
    assert all(len(m.payload) <= eventstream.MAX_PAYLOAD_BYTES for m in messages)
    assert b"".join(m.payload for m in messages) == big
