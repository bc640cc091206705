"""The json-1.1 request path shared by SageMaker's and Application Auto Scaling's control planes:
look the operation up, parse the JSON object, validate it against botocore's model, call the
handler, answer JSON or the AWS-shaped error."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from aiohttp import web

from emulator.errors import MalformedRequest, SmlocalError, UnknownOperation
from emulator.wire import unsupported
from emulator.wire.errors import control_error
from emulator.wire.service_models import operation_model
from emulator.wire.validation import validate_input

JSON_11 = "application/x-amz-json-1.1"
Params = Mapping[str, Any]
S = TypeVar("S")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def parse_json(body: bytes) -> Any:
    """Strict JSON (no NaN or Infinity, which Python's json would accept); an empty body is `{}`.
    MalformedRequest (SerializationException) when it is not JSON."""
    try:
        return json.loads(body, parse_constant=_no_constant) if body else {}
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise MalformedRequest(f"The request body is not valid JSON: {exc}") from exc


def parse_object(body: bytes) -> dict[str, Any]:
    """The request body as a JSON object (an empty body is `{}`)."""
    params = parse_json(body)
    if not isinstance(params, dict):
        raise MalformedRequest("The request body must be a JSON object.")
    return params


def without_nulls(value: Any) -> Any:
    """A JSON null member is an absent member (as AWS reads it): drop them all, at every depth, so
    that handlers' `.get(name, default)` sees the default. Validation ran first: it refused nulls
    where they are not allowed (required members, list items, map values)."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


async def dispatch(
    svc: S,
    operations: Mapping[str, Callable[[S, Params], Awaitable[dict[str, Any]]]],
    service: str,
    service_title: str,
    operation: str,
    body: bytes,
    request_id: str,
    validatable: Callable[[str, Params], Params] = lambda operation, params: params,
) -> web.Response:
    """`service` names botocore's model; `validatable` may drop smlocal's extensions before
    validation (the handler still sees them)."""
    try:
        handler = operations.get(operation)
        if handler is None:
            raise UnknownOperation(service_title, operation)
        params = parse_object(body)
        shape = operation_model(service, operation).input_shape
        validate_input(shape, validatable(operation, params))
        unsupported.check(shape, params, service)  # what the model allows and smlocal does not implement: 400
        result = await handler(svc, without_nulls(params))
    except (SmlocalError, KeyError, TypeError, ValueError) as exc:
        return control_error(exc, request_id)
    return web.Response(
        body=json.dumps(result).encode(), headers={"Content-Type": JSON_11, "x-amzn-RequestId": request_id}
    )
