"""SageMaker's control plane over json-1.1: `POST /` with `X-Amz-Target: SageMaker.<Operation>`.

Table-driven: validate against botocore's model, parse, one call into hosting, serialise.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any

from aiohttp import web

from emulator.hosting.endpoints.service import HostingService
from emulator.model.listing import ListQuery, list_page
from emulator.wire import json_rpc, serialize
from emulator.wire.errors import unknown_target
from emulator.wire.service_models import SAGEMAKER, operation_names
from emulator.wire.timestamps import parse_timestamp

Params = Mapping[str, Any]
Handler = Callable[[HostingService, Params], Awaitable[dict[str, Any]]]


def _time(value: Any) -> datetime | None:
    return None if value is None else parse_timestamp(value)


def _query(params: Params) -> ListQuery:
    return ListQuery(
        name_contains=params.get("NameContains"),
        creation_time_before=_time(params.get("CreationTimeBefore")),
        creation_time_after=_time(params.get("CreationTimeAfter")),
        last_modified_time_before=_time(params.get("LastModifiedTimeBefore")),
        last_modified_time_after=_time(params.get("LastModifiedTimeAfter")),
        status_equals=params.get("StatusEquals"),
        sort_by=params.get("SortBy", "CreationTime"),
        sort_order=params.get("SortOrder", "Descending"),
        max_results=int(params.get("MaxResults", 10)),
        next_token=params.get("NextToken"),
    )


def _page(key: str, items: list[dict[str, Any]], token: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {key: items}
    if token:
        out["NextToken"] = token
    return out


async def create_model(svc: HostingService, p: Params) -> dict[str, Any]:
    model = await svc.create_model(**serialize.create_model_input(p))
    return {"ModelArn": model.arn}


async def describe_model(svc: HostingService, p: Params) -> dict[str, Any]:
    return serialize.describe_model(svc.describe_model(p["ModelName"]))


async def delete_model(svc: HostingService, p: Params) -> dict[str, Any]:
    svc.delete_model(p["ModelName"])
    return {}


async def list_models(svc: HostingService, p: Params) -> dict[str, Any]:
    items, token = list_page(list(svc.models), _query(p))
    return _page("Models", [serialize.model_summary(m) for m in items], token)


async def create_endpoint_config(svc: HostingService, p: Params) -> dict[str, Any]:
    config = svc.create_endpoint_config(**serialize.create_endpoint_config_input(p))
    return {"EndpointConfigArn": config.arn}


async def describe_endpoint_config(svc: HostingService, p: Params) -> dict[str, Any]:
    return serialize.describe_endpoint_config(svc.describe_endpoint_config(p["EndpointConfigName"]))


async def delete_endpoint_config(svc: HostingService, p: Params) -> dict[str, Any]:
    svc.delete_endpoint_config(p["EndpointConfigName"])
    return {}


async def list_endpoint_configs(svc: HostingService, p: Params) -> dict[str, Any]:
    items, token = list_page(list(svc.endpoint_configs), _query(p))
    return _page("EndpointConfigs", [serialize.endpoint_config_summary(c) for c in items], token)


async def create_endpoint(svc: HostingService, p: Params) -> dict[str, Any]:
    endpoint = svc.create_endpoint(**serialize.create_endpoint_input(p))
    return {"EndpointArn": endpoint.arn}


async def describe_endpoint(svc: HostingService, p: Params) -> dict[str, Any]:
    return serialize.describe_endpoint(svc.describe_endpoint(p["EndpointName"]))


async def delete_endpoint(svc: HostingService, p: Params) -> dict[str, Any]:
    svc.delete_endpoint(p["EndpointName"])
    return {}


async def update_endpoint(svc: HostingService, p: Params) -> dict[str, Any]:
    endpoint = svc.update_endpoint(**serialize.update_endpoint_input(p))
    return {"EndpointArn": endpoint.arn}


async def update_endpoint_weights_and_capacities(svc: HostingService, p: Params) -> dict[str, Any]:
    endpoint = svc.update_endpoint_weights_and_capacities(
        **serialize.update_endpoint_weights_and_capacities_input(p)
    )
    return {"EndpointArn": endpoint.arn}


async def list_endpoints(svc: HostingService, p: Params) -> dict[str, Any]:
    items, token = list_page(
        list(svc.endpoints),
        _query(p),
        last_modified=lambda e: e.last_modified_time,
        status=lambda e: e.status.value,
    )
    return _page("Endpoints", [serialize.endpoint_summary(e) for e in items], token)


async def create_inference_component(svc: HostingService, p: Params) -> dict[str, Any]:
    component = svc.create_inference_component(**serialize.create_inference_component_input(p))
    return {"InferenceComponentArn": component.arn}


async def describe_inference_component(svc: HostingService, p: Params) -> dict[str, Any]:
    """The component as the control plane knows it, with its live copy counts from hosting."""
    component = svc.describe_inference_component(p["InferenceComponentName"])
    runtime = svc.inference_component_runtime(component.name)
    return serialize.describe_inference_component(
        component, runtime, svc.account.endpoint_arn(component.endpoint_name)
    )


async def list_inference_components(svc: HostingService, p: Params) -> dict[str, Any]:
    """EndpointNameEquals and VariantNameEquals select before the shared filters and paging, so that a
    page holds MaxResults of the selected components."""
    endpoint, variant = p.get("EndpointNameEquals"), p.get("VariantNameEquals")
    selected = [
        c
        for c in svc.inference_components
        if (endpoint is None or c.endpoint_name == endpoint)
        and (variant is None or c.variant_name == variant)
    ]
    items, token = list_page(
        selected,
        _query(p),
        last_modified=lambda c: c.last_modified_time,
        status=lambda c: c.status.value,
    )
    summaries = [
        serialize.inference_component_summary(c, svc.account.endpoint_arn(c.endpoint_name)) for c in items
    ]
    return _page("InferenceComponents", summaries, token)


async def update_inference_component(svc: HostingService, p: Params) -> dict[str, Any]:
    component = svc.update_inference_component(**serialize.update_inference_component_input(p))
    return {"InferenceComponentArn": component.arn}


async def update_inference_component_runtime_config(svc: HostingService, p: Params) -> dict[str, Any]:
    component = svc.update_inference_component_runtime_config(
        **serialize.update_inference_component_runtime_config_input(p)
    )
    return {"InferenceComponentArn": component.arn}


async def delete_inference_component(svc: HostingService, p: Params) -> dict[str, Any]:
    svc.delete_inference_component(p["InferenceComponentName"])
    return {}


OPERATIONS: dict[str, Handler] = {
    "CreateModel": create_model,
    "DescribeModel": describe_model,
    "DeleteModel": delete_model,
    "ListModels": list_models,
    "CreateEndpointConfig": create_endpoint_config,
    "DescribeEndpointConfig": describe_endpoint_config,
    "DeleteEndpointConfig": delete_endpoint_config,
    "ListEndpointConfigs": list_endpoint_configs,
    "CreateEndpoint": create_endpoint,
    "DescribeEndpoint": describe_endpoint,
    "DeleteEndpoint": delete_endpoint,
    "ListEndpoints": list_endpoints,
    "UpdateEndpoint": update_endpoint,
    "UpdateEndpointWeightsAndCapacities": update_endpoint_weights_and_capacities,
    "CreateInferenceComponent": create_inference_component,
    "DescribeInferenceComponent": describe_inference_component,
    "ListInferenceComponents": list_inference_components,
    "UpdateInferenceComponent": update_inference_component,
    "UpdateInferenceComponentRuntimeConfig": update_inference_component_runtime_config,
    "DeleteInferenceComponent": delete_inference_component,
}


def _validatable(operation: str, params: Params) -> Params:
    """Local model data (file:// or a path) is smlocal's extension to the s3:// pattern: let it pass."""
    if operation != "CreateModel":
        return params
    copy = dict(params)
    for key in ("PrimaryContainer",):
        if isinstance(copy.get(key), dict) and serialize.is_local_uri(
            str(copy[key].get("ModelDataUrl", "s3://"))
        ):
            copy[key] = {k: v for k, v in copy[key].items() if k != "ModelDataUrl"}
    if isinstance(copy.get("Containers"), list):
        copy["Containers"] = [
            {k: v for k, v in c.items() if k != "ModelDataUrl" or not serialize.is_local_uri(str(v))}
            if isinstance(c, dict)
            else c
            for c in copy["Containers"]
        ]
    return copy


async def handle(request: web.Request, svc: HostingService, target: str) -> web.Response:
    """`target` is the part of X-Amz-Target after 'SageMaker.'."""
    request_id = str(uuid.uuid4())
    if target not in operation_names(SAGEMAKER):
        return unknown_target(f"SageMaker.{target}", request_id)
    return await json_rpc.dispatch(
        svc, OPERATIONS, SAGEMAKER, "SageMaker", target, await request.read(), request_id, _validatable
    )
