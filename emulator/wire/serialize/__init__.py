"""AWS shapes <-> domain values. The only package where SageMaker's PascalCase names appear: requests.py
(AWS -> domain), responses.py (domain -> AWS), components.py (inference components, both directions),
common.py (what they share)."""

from __future__ import annotations

from emulator.wire.serialize.common import JSON, LOCAL_URI_PREFIXES, is_local_uri
from emulator.wire.serialize.components import (
    create_inference_component_input,
    describe_inference_component,
    inference_component_summary,
    update_inference_component_input,
    update_inference_component_runtime_config_input,
)
from emulator.wire.serialize.requests import (
    async_inference_input,
    container_definition,
    create_endpoint_config_input,
    create_endpoint_input,
    create_model_input,
    managed_instance_scaling,
    production_variant,
    serverless_input,
    update_endpoint_input,
    update_endpoint_weights_and_capacities_input,
)
from emulator.wire.serialize.responses import (
    describe_endpoint,
    describe_endpoint_config,
    describe_model,
    endpoint_config_summary,
    endpoint_summary,
    managed_instance_scaling_output,
    model_summary,
    variant_description,
)

__all__ = [
    "JSON",
    "LOCAL_URI_PREFIXES",
    "is_local_uri",
    "container_definition",
    "create_model_input",
    "production_variant",
    "serverless_input",
    "create_endpoint_config_input",
    "async_inference_input",
    "create_endpoint_input",
    "update_endpoint_weights_and_capacities_input",
    "update_endpoint_input",
    "describe_model",
    "describe_endpoint_config",
    "describe_endpoint",
    "model_summary",
    "variant_description",
    "endpoint_config_summary",
    "endpoint_summary",
    "managed_instance_scaling",
    "managed_instance_scaling_output",
    "create_inference_component_input",
    "update_inference_component_input",
    "update_inference_component_runtime_config_input",
    "describe_inference_component",
    "inference_component_summary",
]
