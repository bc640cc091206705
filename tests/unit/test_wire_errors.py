"""emulator.wire.errors: the one table from domain errors to AWS error responses, checked with the
very parsers botocore uses on the client side."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from aiohttp import web
from botocore.awsrequest import HeadersDict
from botocore.parsers import JSONParser, RestJSONParser

from emulator.errors import (
    DeploymentFailed,
    EndpointNotFound,
    EngineUnavailable,
    ImageNotFound,
    ModelErrorResponse,
    ModelFault,
    ModelResponseTooLarge,
    ModelTimeout,
    ModelUnreachable,
    PayloadTooLarge,
    ResourceAlreadyExists,
    ResourceInProgress,
    ResourceNotFound,
    UnknownOperation,
    ValidationFailed,
)
from emulator.model import messages
from emulator.model.arns import Account
from emulator.wire import errors
from emulator.wire.service_models import operation_model

ACCOUNT = Account("us-east-1", "123456789012")
RID = "req-0123-4567"
CORAL = "http://internal.amazon.com/coral/com.amazon.sagemaker/"


def body(resp: web.Response) -> dict[str, Any]:
    assert isinstance(resp.body, bytes)
    parsed: dict[str, Any] = json.loads(resp.body)
    return parsed


def fault(cls: type[ModelFault], status: int, original: str) -> ModelFault:
    text = messages.model_error(status, original, ACCOUNT.console_logs_url("ep"), ACCOUNT.account_id)
    return cls(text, status, original, ACCOUNT.log_group_arn("ep"))


def botocore_parse(service: str, operation: str, resp: web.Response) -> dict[str, Any]:
    """What a boto3 client makes of the response: parse, then merge modeled error members
    (botocore.endpoint.Endpoint._add_modeled_error_fields)."""
    op = operation_model(service, operation)
    parser = RestJSONParser() if op.service_model.protocol == "rest-json" else JSONParser()
    assert isinstance(resp.body, bytes)
    response_dict = {
        "status_code": resp.status,
        "headers": HeadersDict(dict(resp.headers)),
        "body": resp.body,
    }
    parsed: dict[str, Any] = parser.parse(response_dict, op.output_shape)
    code = parsed.get("Error", {}).get("Code")
    shape = op.service_model.shape_for_error_code(code) if code else None
    if shape is not None:
        parsed.update(parser.parse(response_dict, shape))
    return parsed


# ------------------------------------------------------------------------------------ the table


@pytest.mark.parametrize(
    ("exc", "control", "runtime", "status"),
    [
        (ValidationFailed("x"), "ValidationException", "ValidationError", 400),
        (ResourceNotFound("x"), "ValidationException", "ValidationError", 400),
        (ResourceAlreadyExists("x"), "ValidationException", "ValidationError", 400),
        (ResourceInProgress("x"), "ValidationException", "ValidationError", 400),
        (EndpointNotFound("x"), "ValidationException", "ValidationError", 400),
        (fault(ModelErrorResponse, 404, "x"), "ValidationException", "ModelError", 424),
        (fault(ModelTimeout, 0, "x"), "ValidationException", "ModelError", 424),
        (PayloadTooLarge("x"), "ValidationException", "", 413),
        (UnknownOperation("sagemaker", "CreateX"), "NotImplemented", "NotImplemented", 501),
        (EngineUnavailable("x"), "InternalFailure", "InternalFailure", 500),
        (ImageNotFound("x"), "InternalFailure", "InternalFailure", 500),
        (DeploymentFailed("x"), "InternalFailure", "InternalFailure", 500),
        (RuntimeError("x"), "InternalFailure", "InternalFailure", 500),
        (KeyError("x"), "InternalFailure", "InternalFailure", 500),
    ],
)
def test_lookup(exc: Exception, control: str, runtime: str, status: int) -> None:
    assert errors.lookup(exc) == errors.AwsError(control, runtime, status)


# ---------------------------------------------------------------------------------- control plane


def test_control_validation_exception() -> None:
    text = messages.not_found("endpoint", ACCOUNT.endpoint_arn("MyEndpoint"))
    resp = errors.control_error(ResourceNotFound(text), RID)
    assert resp.status == 400
    assert resp.headers["x-amzn-RequestId"] == RID
    assert resp.headers["Content-Type"] == "application/x-amz-json-1.1"
    b = body(resp)
    assert b["__type"].endswith("#ValidationException")
    assert b["message"] == text
    parsed = botocore_parse("sagemaker", "DescribeEndpoint", resp)
    assert parsed["Error"]["Code"] == "ValidationException"
    assert parsed["Error"]["Message"] == text
    assert parsed["ResponseMetadata"]["RequestId"] == RID


def test_control_unknown_operation_is_501() -> None:
    resp = errors.control_error(UnknownOperation("sagemaker", "CreateInferenceComponent"), RID)
    assert resp.status == 501
    assert body(resp)["__type"].endswith("#NotImplemented")
    assert "CreateInferenceComponent" in body(resp)["message"]
    assert resp.headers["x-amzn-RequestId"] == RID


def test_control_unexpected_exception_is_internal_failure(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="emulator.wire.errors"):
        resp = errors.control_error(ZeroDivisionError("division by zero"), RID)
    assert resp.status == 500
    b = body(resp)
    assert b["__type"].endswith("#InternalFailure")
    assert "ZeroDivisionError" in b["message"]
    assert resp.headers["x-amzn-RequestId"] == RID
    assert any("internal error" in r.getMessage() for r in caplog.records)
    assert botocore_parse("sagemaker", "ListModels", resp)["Error"]["Code"] == "InternalFailure"


def test_unknown_target() -> None:
    resp = errors.unknown_target("SageMaker.Nope", RID)
    assert resp.status == 400
    assert body(resp)["__type"].endswith("#UnknownOperationException")
    assert resp.headers["x-amzn-RequestId"] == RID


# ---------------------------------------------------------------------------------------- runtime


def test_runtime_validation_error() -> None:
    text = messages.runtime_endpoint_not_found("ep", ACCOUNT.account_id)
    resp = errors.runtime_error(EndpointNotFound(text), RID)
    assert resp.status == 400
    assert resp.headers["x-amzn-ErrorType"] == f"ValidationError:{CORAL}"
    assert resp.headers["x-amzn-RequestId"] == RID
    assert body(resp) == {"message": text}
    parsed = botocore_parse("sagemaker-runtime", "InvokeEndpoint", resp)
    assert parsed["Error"]["Code"] == "ValidationError"
    assert parsed["Error"]["Message"] == text
    assert parsed["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert parsed["ResponseMetadata"]["RequestId"] == RID


@pytest.mark.parametrize(
    ("cls", "status", "error_code"),
    [
        (ModelErrorResponse, 404, "CLIENT_ERROR_FROM_MODEL"),
        (ModelErrorResponse, 400, "CLIENT_ERROR_FROM_MODEL"),
        (ModelErrorResponse, 500, "SERVER_ERROR_FROM_MODEL"),
        (ModelTimeout, 0, "SERVER_ERROR_FROM_MODEL"),
        (ModelUnreachable, 0, "SERVER_ERROR_FROM_MODEL"),
        (ModelResponseTooLarge, 0, "SERVER_ERROR_FROM_MODEL"),
    ],
)
def test_runtime_model_error(cls: type[ModelFault], status: int, error_code: str) -> None:
    exc = fault(cls, status, "container said no")
    resp = errors.runtime_error(exc, RID)
    assert resp.status == 424
    assert resp.headers["x-amzn-ErrorType"] == f"ModelError:{CORAL}"
    assert resp.headers["x-amzn-RequestId"] == RID
    b = body(resp)
    assert set(b) == {"ErrorCode", "LogStreamArn", "Message", "OriginalMessage", "OriginalStatusCode"}
    assert b["ErrorCode"] == error_code
    assert b["LogStreamArn"] == "arn:aws:logs:us-east-1:123456789012:log-group:/aws/sagemaker/Endpoints/ep"
    assert b["Message"] == exc.message
    assert b["OriginalMessage"] == "container said no"
    assert b["OriginalStatusCode"] == status
    assert isinstance(b["OriginalStatusCode"], int)

    parsed = botocore_parse("sagemaker-runtime", "InvokeEndpoint", resp)
    assert parsed["Error"]["Code"] == "ModelError"
    assert parsed["Error"]["Message"] == exc.message
    assert parsed["OriginalStatusCode"] == status
    assert parsed["OriginalMessage"] == "container said no"
    assert parsed["LogStreamArn"] == b["LogStreamArn"]


def test_runtime_model_error_message_for_404() -> None:
    exc = fault(ModelErrorResponse, 404, "not here")
    assert exc.message.startswith('Received client error (404) from primary with message "not here". ')
    parsed = botocore_parse("sagemaker-runtime", "InvokeEndpoint", errors.runtime_error(exc, RID))
    assert parsed["Error"]["Message"].startswith("Received client error (404) from primary")


def test_runtime_payload_too_large_is_413_without_error_type() -> None:
    text = messages.request_too_large(6291456)
    resp = errors.runtime_error(PayloadTooLarge(text), RID)
    assert resp.status == 413
    assert "x-amzn-ErrorType" not in resp.headers
    assert resp.headers["x-amzn-RequestId"] == RID
    assert body(resp) == {"message": text}
    parsed = botocore_parse("sagemaker-runtime", "InvokeEndpoint", resp)
    assert parsed["Error"]["Code"] == "413"  # boto3 shows "An error occurred (413)", as against AWS
    assert parsed["Error"]["Message"] == text


def test_runtime_unknown_operation_is_501() -> None:
    resp = errors.runtime_error(UnknownOperation("sagemaker-runtime", "InvokeEndpointAsync"), RID)
    assert resp.status == 501
    assert resp.headers["x-amzn-ErrorType"] == f"NotImplemented:{CORAL}"
    assert resp.headers["x-amzn-RequestId"] == RID
    assert botocore_parse("sagemaker-runtime", "InvokeEndpoint", resp)["Error"]["Code"] == "NotImplemented"


def test_runtime_unexpected_exception_is_internal_failure(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.CRITICAL + 1):
        resp = errors.runtime_error(ValueError("odd"), RID)
    assert resp.status == 500
    assert resp.headers["x-amzn-ErrorType"] == f"InternalFailure:{CORAL}"
    assert resp.headers["x-amzn-RequestId"] == RID
    assert "ValueError: odd" in body(resp)["message"]
    assert botocore_parse("sagemaker-runtime", "InvokeEndpoint", resp)["Error"]["Code"] == "InternalFailure"


@pytest.mark.parametrize(
    "exc",
    [
        ValidationFailed("v"),
        fault(ModelErrorResponse, 500, "m"),
        PayloadTooLarge("p"),
        UnknownOperation("s", "o"),
        EngineUnavailable("e"),
        RuntimeError("r"),
    ],
)
def test_every_response_has_a_request_id(exc: Exception, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.CRITICAL + 1):
        for resp in (errors.runtime_error(exc, RID), errors.control_error(exc, RID)):
            assert resp.headers["x-amzn-RequestId"] == RID
            json.loads(resp.body)  # type: ignore[arg-type]
