"""CloudWatch in both protocols botocore's cloudwatch model lists and clients speak:

* smithy-rpc-v2-cbor: `POST /service/GraniteServiceVersion20100801/operation/<Operation>`, CBOR in and
  out (timestamps as tag 1, epoch seconds);
* awsJson1_0: `POST /` with `X-Amz-Target: GraniteServiceVersion20100801.<Operation>` (what boto3's
  client resolves to: botocore prefers `json` to `smithy-rpc-v2-cbor` in its protocol priority).

Errors are `{"__type", "message"}` with the awsQueryCompatible `x-amzn-query-error` header
(wire/errors.py). Table-driven like control_api: decode (wire/cloudwatch_codec.py), validate against
botocore's cloudwatch model, run the operation (wire/cloudwatch_operations.py: parse into
emulator.model.alarms values, one call into the AlarmService, PascalCase answers), serialise with the
request's codec.
"""

from __future__ import annotations

import uuid

from aiohttp import web

from emulator.errors import SmlocalError, UnknownOperation, ValidationFailed
from emulator.hosting.monitoring.alarms import AlarmService
from emulator.wire import unsupported
from emulator.wire.cloudwatch_codec import CBOR, JSON, Codec
from emulator.wire.cloudwatch_operations import (
    Handler,
    delete_alarms,
    describe_alarm_history,
    describe_alarms,
    disable_alarm_actions,
    enable_alarm_actions,
    get_metric_data,
    get_metric_statistics,
    list_metrics,
    put_metric_alarm,
    set_alarm_state,
)
from emulator.wire.errors import query_error_response, unknown_target
from emulator.wire.json_rpc import without_nulls
from emulator.wire.service_models import CLOUDWATCH, operation_model, operation_names
from emulator.wire.validation import validate_input

SERVICE_ID = "GraniteServiceVersion20100801"  # the model's targetPrefix
PATH = f"/service/{SERVICE_ID}/operation/{{operation}}"

OPERATIONS: dict[str, Handler] = {
    "PutMetricAlarm": put_metric_alarm,
    "DescribeAlarms": describe_alarms,
    "DeleteAlarms": delete_alarms,
    "SetAlarmState": set_alarm_state,
    "EnableAlarmActions": enable_alarm_actions,
    "DisableAlarmActions": disable_alarm_actions,
    "DescribeAlarmHistory": describe_alarm_history,
    "GetMetricStatistics": get_metric_statistics,
    "GetMetricData": get_metric_data,
    "ListMetrics": list_metrics,
}


def dispatch(svc: AlarmService, operation: str, body: bytes, request_id: str, codec: Codec) -> web.Response:
    try:
        handler = OPERATIONS.get(operation)
        if handler is None:
            raise UnknownOperation("CloudWatch", operation)
        params = codec.decode(body)
        if not isinstance(params, dict):
            raise ValidationFailed("The request body must be a map of the operation's members.")
        shape = operation_model(CLOUDWATCH, operation).input_shape
        validate_input(shape, params)
        unsupported.check(shape, params, CLOUDWATCH)
        result = handler(svc, without_nulls(params))
    except (SmlocalError, KeyError, TypeError, ValueError) as exc:
        return codec.error(exc, request_id)
    return codec.encode(result, request_id)


async def handle_cbor(request: web.Request, svc: AlarmService) -> web.Response:
    """`POST /service/GraniteServiceVersion20100801/operation/{operation}` (smithy-rpc-v2-cbor)."""
    request_id = str(uuid.uuid4())
    operation = request.match_info["operation"]
    if operation not in operation_names(CLOUDWATCH):
        return query_error_response(
            400,
            "com.amazon.coral.service#UnknownOperationException",
            None,
            f"Unknown operation {SERVICE_ID}.{operation}",
            request_id,
            cbor=True,
        )
    if request.headers.get("smithy-protocol") != "rpc-v2-cbor":
        # Smithy requires the header; requiring it also makes every request to this route one a
        # browser preflights (a web page cannot post CBOR here as a "simple" request).
        return query_error_response(
            400,
            "com.amazon.coral.validate#ValidationException",
            "ValidationError",
            "Requests to the rpc-v2-cbor protocol need the header smithy-protocol: rpc-v2-cbor.",
            request_id,
            cbor=True,
        )
    return dispatch(svc, operation, await request.read(), request_id, CBOR)


async def handle_json(request: web.Request, svc: AlarmService, operation: str) -> web.Response:
    """`POST /` with `X-Amz-Target: GraniteServiceVersion20100801.{operation}` (awsJson1_0)."""
    request_id = str(uuid.uuid4())
    if operation not in operation_names(CLOUDWATCH):
        return unknown_target(f"{SERVICE_ID}.{operation}", request_id)
    return dispatch(svc, operation, await request.read(), request_id, JSON)
