"""Domain errors -> AWS error responses: one table, for both wire protocols.

Control plane (json-1.1): body `{"__type": "...#Code", "message": ...}`; botocore keeps what follows '#'.
Runtime (rest-json): header `x-amzn-ErrorType: Code:http://internal.amazon.com/coral/com.amazon.sagemaker/`
and body `{"message": ...}`; ModelError carries SageMaker's five keys.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from aiohttp import web

from emulator.errors import (
    EngineError,
    ModelFault,
    ObjectNotFound,
    PayloadTooLarge,
    SmlocalError,
    UnknownOperation,
    ValidationFailed,
)

log = logging.getLogger(__name__)

CORAL_SAGEMAKER = "http://internal.amazon.com/coral/com.amazon.sagemaker/"


@dataclass(frozen=True)
class AwsError:
    control_code: str
    runtime_code: str
    status: int


#: First match wins: order from specific to general.
TABLE: tuple[tuple[type[Exception], AwsError], ...] = (
    (ValidationFailed, AwsError("ValidationException", "ValidationError", 400)),
    (ModelFault, AwsError("ValidationException", "ModelError", 424)),
    (ObjectNotFound, AwsError("ObjectNotFoundException", "ObjectNotFoundException", 400)),
    (PayloadTooLarge, AwsError("ValidationException", "", 413)),
    (UnknownOperation, AwsError("NotImplemented", "NotImplemented", 501)),
    (EngineError, AwsError("InternalFailure", "InternalFailure", 500)),
    (SmlocalError, AwsError("InternalFailure", "InternalFailure", 500)),
)
_INTERNAL = AwsError("InternalFailure", "InternalFailure", 500)


def lookup(exc: Exception) -> AwsError:
    for cls, error in TABLE:
        if isinstance(exc, cls):
            return error
    return _INTERNAL


def _message(exc: Exception) -> str:
    if isinstance(exc, SmlocalError):
        return exc.message
    log.exception("internal error", exc_info=exc)
    return f"smlocal internal error: {type(exc).__name__}: {exc}"


def control_error(exc: Exception, request_id: str) -> web.Response:
    error = lookup(exc)
    body = {"__type": f"com.amazon.coral.validate#{error.control_code}", "message": _message(exc)}
    return web.Response(
        status=error.status,
        body=json.dumps(body).encode(),
        headers={"Content-Type": "application/x-amz-json-1.1", "x-amzn-RequestId": request_id},
    )


def unknown_target(target: str, request_id: str) -> web.Response:
    body = {
        "__type": "com.amazon.coral.service#UnknownOperationException",
        "message": f"Unknown operation {target}",
    }
    return web.Response(
        status=400,
        body=json.dumps(body).encode(),
        headers={"Content-Type": "application/x-amz-json-1.1", "x-amzn-RequestId": request_id},
    )


def runtime_error(exc: Exception, request_id: str) -> web.Response:
    error = lookup(exc)
    headers = {"Content-Type": "application/json", "x-amzn-RequestId": request_id}
    body: dict[str, object]
    if isinstance(exc, ModelFault):
        body = {
            "ErrorCode": "CLIENT_ERROR_FROM_MODEL"
            if 400 <= exc.original_status < 500
            else "SERVER_ERROR_FROM_MODEL",
            "LogStreamArn": exc.log_group_arn,
            "Message": exc.message,
            "OriginalMessage": exc.original_message,
            "OriginalStatusCode": exc.original_status,
        }
    else:
        body = {"message": _message(exc)}
    if error.runtime_code:
        headers["x-amzn-ErrorType"] = f"{error.runtime_code}:{CORAL_SAGEMAKER}"
    return web.Response(status=error.status, body=json.dumps(body).encode(), headers=headers)
