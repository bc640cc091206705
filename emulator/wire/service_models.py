"""botocore's own service models for the APIs smlocal serves, loaded once per process.

The emulator validates and routes requests with the very models boto3 uses to build them, so the
two cannot drift: `operation_model("sagemaker", "CreateEndpoint").input_shape` is the shape the
client serialised. Models come from botocore's data loader (its bundled `data/` plus any
`AWS_DATA_PATH` / `~/.aws/models` overrides, exactly as a boto3 client in the same environment
would see them). Everything is cached with functools.cache: the first call for a service parses
its JSON (sagemaker: a few hundred ms), later calls are a dict lookup.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import botocore.model
import botocore.session

SAGEMAKER = "sagemaker"
SAGEMAKER_RUNTIME = "sagemaker-runtime"
APPLICATION_AUTOSCALING = "application-autoscaling"
CLOUDWATCH = "cloudwatch"

SERVICES: frozenset[str] = frozenset({SAGEMAKER, SAGEMAKER_RUNTIME, APPLICATION_AUTOSCALING, CLOUDWATCH})


@functools.cache
def _session() -> botocore.session.Session:
    return botocore.session.Session()


#: InvokeEndpointAsync's inline Body (SageMaker's model since 2026-06, spec §1.3): at most 128,000
#: bytes, InputLocation then optional (exactly one of the two).
ASYNC_INLINE_BODY_MAX = 128_000


@functools.cache
def service_model(service: str) -> botocore.model.ServiceModel:
    """The botocore ServiceModel of one of SERVICES; KeyError for any other name. sagemaker-runtime's
    InvokeEndpointAsync is served as SageMaker's current model has it (an inline Body) even where the
    installed botocore predates it, so that newer clients work against an older smlocal install."""
    if service not in SERVICES:
        raise KeyError(service)
    if service != SAGEMAKER_RUNTIME:
        return _session().get_service_model(service)
    loader = _session().get_component("data_loader")
    data = copy.deepcopy(loader.load_service_model(service, "service-2"))
    _with_async_inline_body(data)
    return botocore.model.ServiceModel(data, service_name=service)


def _with_async_inline_body(data: dict[str, Any]) -> None:
    shape = data["shapes"][data["operations"]["InvokeEndpointAsync"]["input"]["shape"]]
    if "Body" in shape["members"]:
        return  # a botocore that has it: its own definition
    data["shapes"]["SmlocalAsyncInlineBody"] = {
        "type": "blob",
        "max": ASYNC_INLINE_BODY_MAX,
        "sensitive": True,
    }
    shape["members"]["Body"] = {"shape": "SmlocalAsyncInlineBody"}
    shape["payload"] = "Body"
    shape["required"] = [m for m in shape.get("required", []) if m != "InputLocation"]


@functools.cache
def operation_names(service: str) -> frozenset[str]:
    """The names of every operation the service's model defines (e.g. "CreateEndpoint")."""
    return frozenset(service_model(service).operation_names)


@functools.cache
def operation_model(service: str, name: str) -> botocore.model.OperationModel:
    """The OperationModel of `name` in `service`; KeyError for an unknown service or operation."""
    if name not in operation_names(service):
        raise KeyError(f"{service}:{name}")
    return service_model(service).operation_model(name)
