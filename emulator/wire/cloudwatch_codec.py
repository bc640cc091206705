"""The two wire codecs of CloudWatch: smithy-rpc-v2-cbor (CBOR in and out, timestamps as tag 1) and
awsJson1_0 (JSON, timestamps as epoch seconds), each with its error answer (emulator.wire.errors).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import cbor2
from aiohttp import web

from emulator.errors import MalformedRequest
from emulator.wire.errors import cbor_error, query_json_error
from emulator.wire.json_rpc import parse_json

JSON_10 = "application/x-amz-json-1.0"


@dataclass(frozen=True)
class Codec:
    decode: Callable[[bytes], Any]
    encode: Callable[[dict[str, Any] | None, str], web.Response]
    error: Callable[[Exception, str], web.Response]


def _cbor_decode(body: bytes) -> Any:
    try:
        return cbor2.loads(body) if body else {}
    except (cbor2.CBORDecodeError, ValueError, TypeError, RecursionError) as exc:
        raise MalformedRequest(f"The request body is not valid CBOR: {exc}") from exc


def _cbor_encode(result: dict[str, Any] | None, request_id: str) -> web.Response:
    headers = {"smithy-protocol": "rpc-v2-cbor", "x-amzn-RequestId": request_id}
    if result is None:  # an operation without output: an empty body
        return web.Response(body=b"", headers=headers)
    headers["Content-Type"] = "application/cbor"
    return web.Response(body=cbor2.dumps(result, datetime_as_timestamp=True, timezone=UTC), headers=headers)


def _json_decode(body: bytes) -> Any:
    return parse_json(body)


def _epoch(value: Any) -> float:
    if isinstance(value, datetime):
        return value.timestamp()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _json_encode(result: dict[str, Any] | None, request_id: str) -> web.Response:
    body = json.dumps(result or {}, default=_epoch).encode()
    return web.Response(body=body, headers={"Content-Type": JSON_10, "x-amzn-RequestId": request_id})


CBOR = Codec(_cbor_decode, _cbor_encode, cbor_error)
JSON = Codec(_json_decode, _json_encode, query_json_error)
