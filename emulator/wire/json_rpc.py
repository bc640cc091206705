"""The json-1.1 request path shared by SageMaker's and Application Auto Scaling's control planes:
look the operation up, parse the JSON object, validate it against botocore's model, call the
handler, answer JSON or the AWS-shaped error."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from aiohttp import web

from emulator.errors import SmlocalError, UnknownOperation, ValidationFailed
from emulator.wire.errors import control_error
from emulator.wire.service_models import operation_model
from emulator.wire.validation import validate_input

JSON_11 = "application/x-amz-json-1.1"
Params = Mapping[str, Any]
S = TypeVar("S")


def parse_object(body: bytes) -> dict[str, Any]:
    """The request body as a JSON object (an empty body is `{}`)."""
    try:
        params = json.loads(body) if body else {}
    except ValueError as exc:
        raise ValidationFailed(f"The request body is not valid JSON: {exc}") from exc
    if not isinstance(params, dict):
        raise ValidationFailed("The request body must be a JSON object.")
    return params


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
        validate_input(operation_model(service, operation).input_shape, validatable(operation, params))
        result = await handler(svc, params)
    except (SmlocalError, KeyError, TypeError, ValueError) as exc:
        return control_error(exc, request_id)
    return web.Response(
        body=json.dumps(result).encode(), headers={"Content-Type": JSON_11, "x-amzn-RequestId": request_id}
    )
