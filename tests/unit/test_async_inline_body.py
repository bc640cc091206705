"""InvokeEndpointAsync's inline Body on every botocore: natively where the installed model has it
(botocore 1.44 does), added by emulator.wire.service_models where an older one lacks it, and the two
serve the same requests with the same answers. No test here depends on which botocore is installed:
the older model is the installed one with the member taken out, as botocore had it before 2026-06."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import botocore.model
import botocore.session
import pytest

from emulator.errors import ValidationFailed
from emulator.wire.service_models import (
    ASYNC_INLINE_BODY_MAX,
    SAGEMAKER_RUNTIME,
    _with_async_inline_body,
    operation_model,
)
from emulator.wire.validation import validate_input

OPERATION = "InvokeEndpointAsync"


def _installed() -> dict[str, Any]:
    loader = botocore.session.get_session().get_component("data_loader")
    return copy.deepcopy(loader.load_service_model(SAGEMAKER_RUNTIME, "service-2"))


def _input(data: dict[str, Any]) -> dict[str, Any]:
    shape: dict[str, Any] = data["shapes"][data["operations"][OPERATION]["input"]["shape"]]
    return shape


def _older(data: dict[str, Any]) -> dict[str, Any]:
    """The installed model as botocore had it before the inline Body: no Body, InputLocation required."""
    older = copy.deepcopy(data)
    shape = _input(older)
    shape["members"].pop("Body", None)
    shape.pop("payload", None)
    shape["required"] = sorted({*shape.get("required", []), "InputLocation"})
    return older


def _input_shape(data: dict[str, Any]) -> botocore.model.StructureShape:
    shape = botocore.model.ServiceModel(data, service_name=SAGEMAKER_RUNTIME).operation_model(OPERATION)
    return shape.input_shape


def _with_shim(data: dict[str, Any]) -> botocore.model.StructureShape:
    _with_async_inline_body(data)
    return _input_shape(data)


def _body_facts(shape: botocore.model.StructureShape) -> tuple[Any, ...]:
    body = shape.members["Body"]
    return (
        shape.serialization.get("payload"),
        sorted(shape.required_members),
        body.type_name,
        body.metadata.get("max"),
        body.metadata.get("sensitive"),
    )


def test_an_older_botocore_gets_the_member_as_the_current_model_defines_it() -> None:
    shim = _with_shim(_older(_installed()))
    assert _body_facts(shim) == ("Body", ["EndpointName"], "blob", ASYNC_INLINE_BODY_MAX, True)
    native = _input(_installed())["members"].get("Body")
    if native is not None:  # the installed botocore has it (1.44 does): the shim is the same contract
        assert _body_facts(shim) == _body_facts(_input_shape(_installed()))


def test_a_botocore_that_has_the_member_is_served_with_its_own_definition() -> None:
    data = _installed()
    native = copy.deepcopy(_input(data)["members"].get("Body"))
    _with_async_inline_body(data)
    served = operation_model(SAGEMAKER_RUNTIME, OPERATION).input_shape.members["Body"]
    if native is None:  # an older botocore: smlocal's own definition
        assert served.name == "SmlocalAsyncInlineBody"
    else:  # the installed model's, untouched
        assert _input(data)["members"]["Body"] == native
        assert served.name == native["shape"]


def _outcome(shape: botocore.model.StructureShape, params: Mapping[str, Any]) -> str:
    try:
        validate_input(shape, params)
    except ValidationFailed as exc:
        return exc.message
    return "valid"


@pytest.mark.parametrize(
    "params",
    [
        {"EndpointName": "ep", "Body": b"x" * ASYNC_INLINE_BODY_MAX},
        {"EndpointName": "ep", "Body": b"x" * (ASYNC_INLINE_BODY_MAX + 1)},
        {"EndpointName": "ep", "InputLocation": "s3://bucket/in.json"},
        {"EndpointName": "ep"},
    ],
    ids=["largest", "one-byte-over", "s3-input", "neither"],
)
def test_old_and_current_models_validate_alike(params: Mapping[str, Any]) -> None:
    shim = _outcome(_with_shim(_older(_installed())), params)
    served = _outcome(operation_model(SAGEMAKER_RUNTIME, OPERATION).input_shape, params)
    assert shim == served
    if len(params.get("Body", b"")) > ASYNC_INLINE_BODY_MAX:
        assert shim == (
            "1 validation error detected: Value at 'body' failed to satisfy constraint: "
            "Member must have length less than or equal to 128000"
        )
    else:  # "neither" is refused by the wire handler (exactly one of the two), not by the model
        assert shim == "valid"
