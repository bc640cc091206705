"""The `application/vnd.amazon.eventstream` encoding of InvokeEndpointWithResponseStream's events.

One message (spec §2.1):

    [total_length u32][headers_length u32][prelude_crc u32 = CRC32(bytes 0..7)]
    [headers][payload][message_crc u32 = CRC32(bytes 0 .. end of payload)]

a header being `name_len u8, name, type u8 (7: string), value_len u16, value`. Only string headers
are written. The events (spec §2.2): PayloadPart (`:message-type` event, raw bytes), and the two
exceptions ModelStreamError (`{"Message", "ErrorCode"}`) and InternalStreamFailure (`{"Message"}`),
`:message-type` exception. botocore's own decoder (botocore.eventstream) reads what this writes:
the unit tests decode every message with it.
"""

from __future__ import annotations

import json
import struct
import zlib

#: botocore refuses a payload over 24 MiB in one message (spec §2.1): a larger part is split.
MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
_PRELUDE = struct.Struct(">II")
_CRC = struct.Struct(">I")
_STRING = 7


def _headers(*pairs: tuple[str, str]) -> bytes:
    out = bytearray()
    for name, value in pairs:
        raw_name, raw_value = name.encode(), value.encode()
        out += (
            bytes((len(raw_name),))
            + raw_name
            + bytes((_STRING,))
            + struct.pack(">H", len(raw_value))
            + raw_value
        )
    return bytes(out)


def message(headers: bytes, payload: bytes) -> bytes:
    """One framed message: prelude, its CRC, headers, payload and the message CRC."""
    prelude = _PRELUDE.pack(len(headers) + len(payload) + 16, len(headers))
    prelude += _CRC.pack(zlib.crc32(prelude))
    crc = zlib.crc32(payload, zlib.crc32(headers, zlib.crc32(prelude)))
    return b"".join((prelude, headers, payload, _CRC.pack(crc)))


_PAYLOAD_PART = _headers(
    (":event-type", "PayloadPart"),
    (":content-type", "application/octet-stream"),
    (":message-type", "event"),
)


def payload_parts(data: bytes) -> bytes:
    """The PayloadPart message(s) that carry `data` (several when it is over MAX_PAYLOAD_BYTES)."""
    if len(data) <= MAX_PAYLOAD_BYTES:
        return message(_PAYLOAD_PART, data)
    view = memoryview(data)
    return b"".join(
        message(_PAYLOAD_PART, bytes(view[i : i + MAX_PAYLOAD_BYTES]))
        for i in range(0, len(data), MAX_PAYLOAD_BYTES)
    )


def _exception(kind: str, body: dict[str, str]) -> bytes:
    headers = _headers(
        (":exception-type", kind),
        (":content-type", "application/json"),
        (":message-type", "exception"),
    )
    return message(headers, json.dumps(body).encode())


def model_stream_error(text: str, error_code: str) -> bytes:
    """ModelStreamError: the model's stream failed after it began (StreamBroken,
    ModelInvocationTimeExceeded). boto3 raises EventStreamError with Code ModelStreamError."""
    return _exception("ModelStreamError", {"Message": text, "ErrorCode": error_code})


def internal_stream_failure(text: str) -> bytes:
    """InternalStreamFailure: smlocal's own failure after the stream began."""
    return _exception("InternalStreamFailure", {"Message": text})
