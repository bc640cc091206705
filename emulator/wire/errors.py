"""Domain errors -> AWS error responses: one table, for both wire protocols.

Control plane (json-1.1): body `{"__type": "...#Code", "message": ...}`; botocore keeps what follows '#'.
Runtime (rest-json): header `x-amzn-ErrorType: Code:http://internal.amazon.com/coral/com.amazon.sagemaker/`
and body `{"message": ...}`; ModelError carries SageMaker's five keys.
CloudWatch (awsQueryCompatible; awsJson1_0 or smithy-rpc-v2-cbor): body `{"__type": "ns#Shape",
"message": ...}` in JSON or CBOR and header `x-amzn-query-error: Code;Sender`, from which botocore takes
the query-protocol code (`ResourceNotFound`, `ValidationError`...): the second table, QUERY_TABLE.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

import cbor2
from aiohttp import web

from emulator.errors import (
    AccessDenied,
    AlarmNotFound,
    ArnNotFound,
    EngineError,
    InvalidFormat,
    InvalidNextToken,
    InvalidParameterCombination,
    InvalidParameterValue,
    MalformedRequest,
    MissingAuthentication,
    ModelFault,
    ModelNotReady,
    ObjectNotFound,
    PayloadTooLarge,
    ResourceLimitExceeded,
    SmlocalError,
    Throttled,
    TooManyTags,
    UnknownOperation,
    UnrecognizedClient,
    ValidationFailed,
)

log = logging.getLogger(__name__)

CORAL_SAGEMAKER = "http://internal.amazon.com/coral/com.amazon.sagemaker/"


CORAL_VALIDATE = "com.amazon.coral.validate"
CORAL_SERVICE = "com.amazon.coral.service"


@dataclass(frozen=True)
class AwsError:
    control_code: str
    runtime_code: str
    status: int
    #: the namespace of the json-1.1 `__type` (botocore keeps only what follows '#')
    namespace: str = CORAL_VALIDATE


#: First match wins: order from specific to general.
TABLE: tuple[tuple[type[Exception], AwsError], ...] = (
    # Coral's deserialiser answers type errors and unparsable bodies before validation runs.
    (MalformedRequest, AwsError("SerializationException", "ValidationError", 400, CORAL_SERVICE)),
    (ValidationFailed, AwsError("ValidationException", "ValidationError", 400)),
    # modelled by SageMaker's Create*/Update* operations (spec §11.1); status [U]: 400, as a client error
    (ResourceLimitExceeded, AwsError("ResourceLimitExceeded", "ResourceLimitExceeded", 400, CORAL_SERVICE)),
    (ModelFault, AwsError("ValidationException", "ModelError", 424)),
    (ModelNotReady, AwsError("ModelNotReadyException", "ModelNotReadyException", 429)),
    (ObjectNotFound, AwsError("ObjectNotFoundException", "ObjectNotFoundException", 400)),
    (ArnNotFound, AwsError("ResourceNotFoundException", "ResourceNotFoundException", 400)),
    (TooManyTags, AwsError("TooManyTagsException", "TooManyTagsException", 400)),
    (PayloadTooLarge, AwsError("ValidationException", "", 413)),
    # [U] status: a serverless endpoint over MaxConcurrency (spec §1.5, §7); docs/serverless.md
    (Throttled, AwsError("ThrottlingException", "ThrottlingException", 400)),
    (UnknownOperation, AwsError("NotImplemented", "NotImplemented", 501)),
    # `--iam-policies`: 403, as AWS's rest-json front ends answer them (docs/api-coverage.md)
    (AccessDenied, AwsError("AccessDeniedException", "AccessDeniedException", 403, CORAL_SERVICE)),
    (
        UnrecognizedClient,
        AwsError("UnrecognizedClientException", "UnrecognizedClientException", 403, CORAL_SERVICE),
    ),
    (
        MissingAuthentication,
        AwsError(
            "MissingAuthenticationTokenException", "MissingAuthenticationTokenException", 403, CORAL_SERVICE
        ),
    ),
    (EngineError, AwsError("InternalFailure", "InternalFailure", 500)),
    (SmlocalError, AwsError("InternalFailure", "InternalFailure", 500)),
)
_INTERNAL = AwsError("InternalFailure", "InternalFailure", 500)


@dataclass(frozen=True)
class QueryError:
    """An error of an awsQueryCompatible service: the query-protocol code botocore reports, the
    modelled shape named in `__type`, the status."""

    code: str
    shape: str
    status: int


CLOUDWATCH_NS = "com.amazonaws.cloudwatch"
#: CloudWatch over rpc-v2-cbor; first match wins. Shapes as botocore's cloudwatch model names them.
QUERY_TABLE: tuple[tuple[type[Exception], QueryError], ...] = (
    (AlarmNotFound, QueryError("ResourceNotFound", f"{CLOUDWATCH_NS}#ResourceNotFound", 404)),
    (
        InvalidParameterValue,
        QueryError("InvalidParameterValue", f"{CLOUDWATCH_NS}#InvalidParameterValueException", 400),
    ),
    (
        InvalidParameterCombination,
        QueryError(
            "InvalidParameterCombination", f"{CLOUDWATCH_NS}#InvalidParameterCombinationException", 400
        ),
    ),
    (InvalidFormat, QueryError("InvalidFormat", f"{CLOUDWATCH_NS}#InvalidFormatFault", 400)),
    (InvalidNextToken, QueryError("InvalidNextToken", f"{CLOUDWATCH_NS}#InvalidNextToken", 400)),
    (ValidationFailed, QueryError("ValidationError", "com.amazon.coral.validate#ValidationException", 400)),
    (UnknownOperation, QueryError("NotImplemented", "NotImplemented", 501)),
    (SmlocalError, QueryError("InternalServiceError", f"{CLOUDWATCH_NS}#InternalServiceFault", 500)),
)
_QUERY_INTERNAL = QueryError("InternalServiceError", f"{CLOUDWATCH_NS}#InternalServiceFault", 500)


def query_lookup(exc: Exception) -> QueryError:
    for cls, error in QUERY_TABLE:
        if isinstance(exc, cls):
            return error
    return _QUERY_INTERNAL


def cbor_error(exc: Exception, request_id: str) -> web.Response:
    """An rpc-v2-cbor error answer, with the awsQueryCompatible header botocore reads the code from."""
    error = query_lookup(exc)
    return query_error_response(error.status, error.shape, error.code, _message(exc), request_id, cbor=True)


def query_json_error(exc: Exception, request_id: str) -> web.Response:
    """The same answer in awsJson1_0 (what boto3's cloudwatch client speaks by default)."""
    error = query_lookup(exc)
    return query_error_response(error.status, error.shape, error.code, _message(exc), request_id, cbor=False)


def query_error_response(
    status: int, shape: str, code: str | None, message: str, request_id: str, cbor: bool
) -> web.Response:
    headers = {"x-amzn-RequestId": request_id}
    if code is not None:
        headers["x-amzn-query-error"] = f"{code};{'Sender' if status < 500 else 'Receiver'}"
    document = {"__type": shape, "message": message}
    if cbor:
        headers.update({"Content-Type": "application/cbor", "smithy-protocol": "rpc-v2-cbor"})
        return web.Response(status=status, body=cbor2.dumps(document), headers=headers)
    headers["Content-Type"] = "application/x-amz-json-1.0"
    return web.Response(status=status, body=json.dumps(document).encode(), headers=headers)


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
    body = {"__type": f"{error.namespace}#{error.control_code}", "message": _message(exc)}
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


def plain_error(status: int, code: str, message: str, request_id: str) -> web.Response:
    """An AWS-shaped error for answers given before any protocol is known (the request guards,
    aiohttp's own HTTP errors, smlocal's admin routes): readable by botocore's json-1.1 parser
    (`__type`) and rest-json parser (`x-amzn-ErrorType`) alike."""
    body = {"__type": f"{CORAL_SERVICE}#{code}", "message": message}
    return web.Response(
        status=status,
        body=json.dumps(body).encode(),
        headers={
            "Content-Type": "application/x-amz-json-1.1",
            "x-amzn-RequestId": request_id,
            "x-amzn-ErrorType": f"{code}:{CORAL_SAGEMAKER}",
        },
    )
