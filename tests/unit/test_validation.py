"""Server-side validation of inputs against botocore's models, in Coral's wording."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import botocore.model
import pytest
import regex

from emulator.errors import MalformedRequest, ValidationFailed
from emulator.wire.java_patterns import compile_pattern, translate_java_pattern
from emulator.wire.service_models import (
    SERVICES,
    operation_model,
    operation_names,
    service_model,
)
from emulator.wire.validation import validate_input

NAME_PATTERN = "^[a-zA-Z0-9](-*[a-zA-Z0-9])*"  # the model's EndpointName pattern (check below)


def _errors(service: str, op: str, params: Mapping[str, Any]) -> str:
    with pytest.raises(ValidationFailed) as info:
        validate_input(operation_model(service, op).input_shape, params)
    return info.value.message


def _ok(service: str, op: str, params: Mapping[str, Any]) -> None:
    validate_input(operation_model(service, op).input_shape, params)


def _variant(**overrides: Any) -> dict[str, Any]:
    variant: dict[str, Any] = {
        "VariantName": "AllTraffic",
        "ModelName": "my-model",
        "InitialInstanceCount": 1,
        "InstanceType": "ml.m5.large",
    }
    variant.update(overrides)
    return variant


def _endpoint_name_pattern() -> str:
    shape = operation_model("sagemaker", "CreateEndpoint").input_shape.members["EndpointName"]
    pattern: str = shape.metadata["pattern"]
    return pattern


# --- service models ----------------------------------------------------------------------------


def test_service_models_load_and_are_cached() -> None:
    for service in SERVICES:
        assert service_model(service) is service_model(service)
    assert "CreateEndpoint" in operation_names("sagemaker")
    assert "InvokeEndpoint" in operation_names("sagemaker-runtime")
    assert "RegisterScalableTarget" in operation_names("application-autoscaling")
    op = operation_model("sagemaker", "CreateEndpoint")
    assert isinstance(op, botocore.model.OperationModel)
    assert op is operation_model("sagemaker", "CreateEndpoint")


def test_unknown_operation_or_service_is_key_error() -> None:
    with pytest.raises(KeyError):
        operation_model("sagemaker", "NoSuchOperation")
    with pytest.raises(KeyError):
        operation_model("s3", "GetObject")
    with pytest.raises(KeyError):
        operation_names("s3")


# --- CreateEndpoint ------------------------------------------------------------------------------


def test_bad_endpoint_name_fails_pattern() -> None:
    pattern = _endpoint_name_pattern()
    assert _errors("sagemaker", "CreateEndpoint", {"EndpointName": "my_ep", "EndpointConfigName": "c"}) == (
        "1 validation error detected: Value 'my_ep' at 'endpointName' failed to satisfy constraint: "
        f"Member must satisfy regular expression pattern: {pattern}"
    )


def test_pattern_applies_to_whole_value() -> None:
    # The runtime EndpointName pattern has no trailing anchor; a partial match is not enough.
    message = _errors("sagemaker-runtime", "InvokeEndpoint", {"EndpointName": "ok-then_bad", "Body": b""})
    assert message == (
        "1 validation error detected: Value 'ok-then_bad' at 'endpointName' failed to satisfy "
        f"constraint: Member must satisfy regular expression pattern: {NAME_PATTERN}"
    )


def test_64_char_endpoint_name_fails_length() -> None:
    name = "a" * 64
    message = _errors("sagemaker", "CreateEndpoint", {"EndpointName": name, "EndpointConfigName": "c"})
    assert message.startswith("1 validation error detected: ") or message.startswith("2 validation errors")
    assert (
        f"Value '{name}' at 'endpointName' failed to satisfy constraint: "
        "Member must have length less than or equal to 63"
    ) in message
    _ok("sagemaker", "CreateEndpoint", {"EndpointName": "a" * 63, "EndpointConfigName": "c"})


def test_missing_required_member_is_null() -> None:
    assert _errors("sagemaker", "CreateEndpoint", {"EndpointName": "ep"}) == (
        "1 validation error detected: Value null at 'endpointConfigName' failed to satisfy "
        "constraint: Member must not be null"
    )
    # JSON null counts as missing.
    assert "Value null at 'endpointConfigName'" in _errors(
        "sagemaker", "CreateEndpoint", {"EndpointName": "ep", "EndpointConfigName": None}
    )


def test_valid_inputs_pass() -> None:
    _ok(
        "sagemaker",
        "CreateEndpoint",
        {
            "EndpointName": "my-endpoint-1",
            "EndpointConfigName": "cfg",
            "Tags": [{"Key": "team", "Value": "ml"}],
        },
    )
    _ok(
        "sagemaker", "CreateEndpointConfig", {"EndpointConfigName": "cfg", "ProductionVariants": [_variant()]}
    )
    _ok(
        "sagemaker",
        "CreateModel",
        {
            "ModelName": "m",
            "ExecutionRoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
            "PrimaryContainer": {
                "Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/img:latest",
                "ModelDataUrl": "s3://bucket/model.tar.gz",
                "Environment": {"SAGEMAKER_PROGRAM": "inference.py"},
            },
            "Tags": [{"Key": "ünïcode key", "Value": "value 1"}],
        },
    )
    _ok(
        "sagemaker-runtime",
        "InvokeEndpoint",
        {
            "EndpointName": "ep",
            "Body": b"{}",
            "ContentType": "application/json",
            "Accept": "application/json",
            "CustomAttributes": "c000b4f9-df62-4c85-a0bf-7c525f9104a4, trace=1",
            "TargetVariant": "variant-1",
            "InferenceId": "id with spaces ~",
            "SessionId": "NEW_SESSION",
        },
    )
    _ok(
        "application-autoscaling",
        "RegisterScalableTarget",
        {
            "ServiceNamespace": "sagemaker",
            "ResourceId": "endpoint/ep/variant/AllTraffic",
            "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
            "MinCapacity": 1,
            "MaxCapacity": 4,
        },
    )


def test_unknown_members_are_ignored() -> None:
    _ok(
        "sagemaker",
        "CreateEndpoint",
        {"EndpointName": "ep", "EndpointConfigName": "c", "Bogus": [1, {"x": 2}]},
    )


# --- CreateEndpointConfig ----------------------------------------------------------------------


def test_eleven_variants_fail_list_length() -> None:
    variants = [_variant(VariantName=f"v{i}") for i in range(11)]
    message = _errors(
        "sagemaker", "CreateEndpointConfig", {"EndpointConfigName": "c", "ProductionVariants": variants}
    )
    assert message.startswith("1 validation error detected: Value '[{VariantName=v0, ModelName=my-model, ")
    assert message.endswith(
        "' at 'productionVariants' failed to satisfy constraint: "
        "Member must have length less than or equal to 10"
    )


def test_empty_variant_list_fails_min_length() -> None:
    message = _errors(
        "sagemaker", "CreateEndpointConfig", {"EndpointConfigName": "c", "ProductionVariants": []}
    )
    assert message == (
        "1 validation error detected: Value '[]' at 'productionVariants' failed to satisfy constraint: "
        "Member must have length greater than or equal to 1"
    )


def test_instance_count_zero_fails_value() -> None:
    message = _errors(
        "sagemaker",
        "CreateEndpointConfig",
        {"EndpointConfigName": "c", "ProductionVariants": [_variant(InitialInstanceCount=0)]},
    )
    assert message == (
        "1 validation error detected: Value '0' at 'productionVariants.1.member.initialInstanceCount' "
        "failed to satisfy constraint: Member must have value greater than or equal to 1"
    )


def test_invalid_instance_type_fails_enum() -> None:
    message = _errors(
        "sagemaker",
        "CreateEndpointConfig",
        {
            "EndpointConfigName": "c",
            "ProductionVariants": [_variant(), _variant(InstanceType="ml.bogus.huge")],
        },
    )
    enum = (
        operation_model("sagemaker", "CreateEndpointConfig")
        .input_shape.members["ProductionVariants"]
        .member.members["InstanceType"]
        .enum
    )
    assert message == (
        "1 validation error detected: Value 'ml.bogus.huge' at 'productionVariants.2.member.instanceType' "
        f"failed to satisfy constraint: Member must satisfy enum value set: [{', '.join(enum)}]"
    )
    assert "ml.m5.large, " in message


def test_several_errors_counted_joined_in_model_order() -> None:
    # Given out of model order on purpose; reported in model member order: EndpointConfigName,
    # ProductionVariants.1 (VariantName [required, missing], ModelName, InitialInstanceCount), Tags.
    params = {
        "Tags": [{"Key": "k", "Value": "v" * 257}],
        "ProductionVariants": [{"InitialInstanceCount": 0, "ModelName": "bad_model"}],
        "EndpointConfigName": "bad.config",
    }
    message = _errors("sagemaker", "CreateEndpointConfig", params)
    head, _, rest = message.partition(": ")
    assert head == "5 validation errors detected"
    items = rest.split("; ")
    assert len(items) == 5
    members = operation_model("sagemaker", "CreateEndpointConfig").input_shape.members
    config_pattern = members["EndpointConfigName"].metadata["pattern"]
    model_pattern = members["ProductionVariants"].member.members["ModelName"].metadata["pattern"]
    assert items == [
        "Value 'bad.config' at 'endpointConfigName' failed to satisfy constraint: "
        f"Member must satisfy regular expression pattern: {config_pattern}",
        "Value null at 'productionVariants.1.member.variantName' failed to satisfy constraint: "
        "Member must not be null",
        "Value 'bad_model' at 'productionVariants.1.member.modelName' failed to satisfy constraint: "
        f"Member must satisfy regular expression pattern: {model_pattern}",
        "Value '0' at 'productionVariants.1.member.initialInstanceCount' failed to satisfy "
        "constraint: Member must have value greater than or equal to 1",
        f"Value '{'v' * 257}' at 'tags.1.member.value' failed to satisfy constraint: "
        "Member must have length less than or equal to 256",
    ]


def test_pattern_and_length_both_reported() -> None:
    name = "_" * 64
    message = _errors("sagemaker", "CreateEndpoint", {"EndpointName": name, "EndpointConfigName": "c"})
    assert message == (
        f"2 validation errors detected: Value '{name}' at 'endpointName' failed to satisfy constraint: "
        f"Member must satisfy regular expression pattern: {_endpoint_name_pattern()}; "
        f"Value '{name}' at 'endpointName' failed to satisfy constraint: "
        "Member must have length less than or equal to 63"
    )


def test_map_paths() -> None:
    long_value = "v" * 1025
    message = _errors(
        "sagemaker",
        "CreateModel",
        {"ModelName": "m", "PrimaryContainer": {"Image": "img", "Environment": {"MY_VAR": long_value}}},
    )
    assert message == (
        f"1 validation error detected: Value '{long_value}' at 'primaryContainer.environment.MY_VAR' "
        "failed to satisfy constraint: Member must have length less than or equal to 1024"
    )
    bad_key = "BAD KEY"
    message = _errors(
        "sagemaker",
        "CreateModel",
        {"ModelName": "m", "PrimaryContainer": {"Image": "img", "Environment": {bad_key: "v"}}},
    )
    assert message.startswith(
        "1 validation error detected: Value 'BAD KEY' at 'primaryContainer.environment' failed to "
        "satisfy constraint: Map keys must satisfy constraint: "
        "[Member must satisfy regular expression pattern: "
    )


def test_type_errors_are_malformed_requests_reported_alone() -> None:
    """Coral deserialises before it validates: a wrong type hides the constraint violations."""
    shape = operation_model("sagemaker", "CreateEndpointConfig").input_shape
    with pytest.raises(MalformedRequest) as info:
        validate_input(
            shape,
            {"EndpointConfigName": "bad name!", "ProductionVariants": [_variant(InitialInstanceCount="1")]},
        )
    assert info.value.message == (
        "1 validation error detected: Value '1' at 'productionVariants.1.member.initialInstanceCount' "
        "failed to satisfy constraint: Member must be of type integer"
    )
    with pytest.raises(ValidationFailed) as constraint:
        validate_input(shape, {"EndpointConfigName": "bad name!", "ProductionVariants": [_variant()]})
    assert not isinstance(constraint.value, MalformedRequest)


@pytest.mark.parametrize(
    ("op", "member", "value", "type_name"),
    [
        ("ListModels", "CreationTimeAfter", "yesterday", "timestamp"),
        ("ListModels", "CreationTimeAfter", 1e22, "timestamp"),
        ("ListModels", "CreationTimeAfter", True, "timestamp"),
        ("ListModels", "MaxResults", 2**31, "integer"),
        ("ListModels", "MaxResults", float("nan"), "integer"),
    ],
)
def test_values_outside_their_type_are_malformed(op: str, member: str, value: Any, type_name: str) -> None:
    with pytest.raises(MalformedRequest) as info:
        validate_input(operation_model("sagemaker", op).input_shape, {member: value})
    assert info.value.message.endswith(f"Member must be of type {type_name}")


@pytest.mark.parametrize("value", [0, 1.5e9, "2026-01-01T00:00:00Z", "2026-01-01", "1767225600"])
def test_timestamps_as_clients_send_them_pass(value: Any) -> None:
    _ok("sagemaker", "ListModels", {"CreationTimeAfter": value})


def test_wrong_json_types_are_validation_errors() -> None:
    message = _errors(
        "sagemaker",
        "CreateEndpointConfig",
        {"EndpointConfigName": 5, "ProductionVariants": [_variant(InitialInstanceCount="1")]},
    )
    assert message == (
        "2 validation errors detected: Value '5' at 'endpointConfigName' failed to satisfy constraint: "
        "Member must be of type string; Value '1' at 'productionVariants.1.member.initialInstanceCount' "
        "failed to satisfy constraint: Member must be of type integer"
    )
    assert "Member must be of type list" in _errors(
        "sagemaker", "CreateEndpointConfig", {"EndpointConfigName": "c", "ProductionVariants": {"a": 1}}
    )
    assert "Member must be of type structure" in _errors(
        "sagemaker", "CreateEndpointConfig", {"EndpointConfigName": "c", "ProductionVariants": ["x"]}
    )
    assert "Member must be of type integer" in _errors(
        "sagemaker",
        "CreateEndpointConfig",
        {"EndpointConfigName": "c", "ProductionVariants": [_variant(InitialInstanceCount=True)]},
    )


# --- runtime -------------------------------------------------------------------------------------


def test_runtime_target_variant_too_long() -> None:
    variant = "v" * 100
    assert _errors(
        "sagemaker-runtime", "InvokeEndpoint", {"EndpointName": "ep", "Body": b"x", "TargetVariant": variant}
    ) == (
        f"1 validation error detected: Value '{variant}' at 'targetVariant' failed to satisfy "
        "constraint: Member must have length less than or equal to 63"
    )


def test_runtime_custom_attributes_non_ascii_is_hidden() -> None:
    secret = "tenant=Zürich-secret"
    message = _errors(
        "sagemaker-runtime",
        "InvokeEndpoint",
        {"EndpointName": "ep", "Body": b"x", "CustomAttributes": secret},
    )
    assert message == (
        "1 validation error detected: Value at 'customAttributes' failed to satisfy constraint: "
        "Member must satisfy regular expression pattern: \\p{ASCII}*"
    )
    assert "Zürich" not in message


def test_sensitive_member_hidden_for_length_too() -> None:
    secret = "s" * 1025
    message = _errors(
        "sagemaker-runtime",
        "InvokeEndpoint",
        {"EndpointName": "ep", "Body": b"x", "CustomAttributes": secret},
    )
    assert message == (
        "1 validation error detected: Value at 'customAttributes' failed to satisfy constraint: "
        "Member must have length less than or equal to 1024"
    )


def test_runtime_inference_id_leading_space() -> None:
    assert _errors(
        "sagemaker-runtime", "InvokeEndpoint", {"EndpointName": "ep", "Body": b"x", "InferenceId": " abc"}
    ) == (
        "1 validation error detected: Value ' abc' at 'inferenceId' failed to satisfy constraint: "
        "Member must satisfy regular expression pattern: \\A\\S[\\p{Print}]*\\z"
    )
    # \p{Print} is ASCII-only in Java, and \z is the absolute end (no trailing newline).
    for bad in ("abcé", "abc\n", "abc\t"):
        assert "inferenceId" in _errors(
            "sagemaker-runtime", "InvokeEndpoint", {"EndpointName": "ep", "Body": b"x", "InferenceId": bad}
        )


def test_runtime_body_blob_length_and_sensitivity() -> None:
    message = _errors(
        "sagemaker-runtime", "InvokeEndpoint", {"EndpointName": "ep", "Body": bytearray(6_291_457)}
    )
    assert message == (
        "1 validation error detected: Value at 'body' failed to satisfy constraint: "
        "Member must have length less than or equal to 6291456"
    )
    assert _errors("sagemaker-runtime", "InvokeEndpoint", {"EndpointName": "ep"}) == (
        "1 validation error detected: Value null at 'body' failed to satisfy constraint: "
        "Member must not be null"
    )


def test_runtime_async_header_integers_given_as_text() -> None:
    base = {"EndpointName": "ep", "InputLocation": "s3://bucket/input.json"}
    _ok("sagemaker-runtime", "InvokeEndpointAsync", {**base, "RequestTTLSeconds": "60"})
    assert _errors("sagemaker-runtime", "InvokeEndpointAsync", {**base, "RequestTTLSeconds": "59"}) == (
        "1 validation error detected: Value '59' at 'requestTTLSeconds' failed to satisfy constraint: "
        "Member must have value greater than or equal to 60"
    )
    assert "Member must be of type integer" in _errors(
        "sagemaker-runtime", "InvokeEndpointAsync", {**base, "InvocationTimeoutSeconds": "soon"}
    )


# --- patterns ------------------------------------------------------------------------------------


def _shapes(service: str) -> Iterator[tuple[str, dict[str, Any]]]:
    model = service_model(service)
    yield from model._shape_resolver._shape_map.items()


def _all_patterns() -> list[tuple[str, str, str]]:
    return [
        (service, name, shape["pattern"])
        for service in sorted(SERVICES)
        for name, shape in _shapes(service)
        if "pattern" in shape
    ]


def test_every_model_pattern_compiles() -> None:
    patterns = _all_patterns()
    assert len(patterns) > 100
    failures = []
    for service, name, pattern in patterns:
        try:
            compiled = compile_pattern(pattern)
            compiled.fullmatch("x")
        except Exception as exc:  # noqa: BLE001 - report every failure at once
            failures.append(f"{service}:{name} {pattern!r}: {exc!r}")
    assert not failures, "\n".join(failures)


def test_every_input_shape_builds_a_validator() -> None:
    for service in SERVICES:
        for op in operation_names(service):
            shape = operation_model(service, op).input_shape
            if shape is None:
                continue
            try:
                validate_input(shape, {})
            except ValidationFailed as exc:
                assert shape.required_members, (service, op)
                assert "Member must not be null" in exc.message
            else:
                assert not shape.required_members, (service, op)


@pytest.mark.parametrize(
    ("pattern", "good", "bad"),
    [
        ("\\p{ASCII}*", ["", "application/json", "\x00\x7f"], ["é", "\u2028"]),
        ("\\p{Print}+", ["a b~"], ["", "\t", "é", "a\n"]),
        ("\\A\\S[\\p{Print}]*\\z", ["a", "a b", "\u00a0a"], [" a", "a\n", "\ta", "a\u00a0"]),
        ("[\\S]+", ["abc", "é\u00a0"], ["a b", "a\tb", ""]),
        ("[\\S\\s]*", ["", "a b\n\té"], []),
        ("\\S(.*\\S)?", ["a", "a b"], ["a ", "a\u2028b", "a\rb"]),
        ("([\\p{L}\\p{Z}\\p{N}_.:\\/=+\\-@]*)${1,128}", ["Zürich 1", ""], ["a!", "a\n"]),
        ("[\\p{L}\\p{M}\\p{S}\\p{N}\\p{P}]+", ["ü€1!"], [" ", ""]),
        (
            "arn:[\\p{Alnum}\\-]+:lambda:[\\p{Alnum}\\-]+:[0-9]{12}:function:.*",
            ["arn:aws:lambda:us-east-1:123456789012:function:f"],
            ["arn:aẞ:lambda:x:123456789012:function:f"],
        ),
        ("[\\u0020-\\uD7FF\\uE000-\\uFFFD\\uD800\\uDC00-\\uDBFF\\uDFFF\\t]*", ["a\tb", "😀"], ["\n", "\x01"]),
        ("\\d+", ["0123"], ["١٢"]),
        ("[\\w-]+", ["a_b-c"], ["é"]),
        ("1|2", ["1", "2"], ["12", ""]),
        ("^(NEW_SESSION)$|^[a-zA-Z0-9](-*[a-zA-Z0-9])*$", ["NEW_SESSION", "abc-1"], ["NEW_SESSION\n", "-a"]),
    ],
)
def test_java_semantics(pattern: str, good: list[str], bad: list[str]) -> None:
    compiled = compile_pattern(pattern)
    for value in good:
        assert compiled.fullmatch(value), (pattern, value, translate_java_pattern(pattern))
    for value in bad:
        assert not compiled.fullmatch(value), (pattern, value, translate_java_pattern(pattern))


def test_compiled_patterns_are_cached() -> None:
    assert compile_pattern("\\p{ASCII}*") is compile_pattern("\\p{ASCII}*")


def test_unsupported_java_constructs_raise() -> None:
    for pattern in ("[a-z&&[^aeiou]]", "[a[b]]", "\\Qa.b\\E"):
        with pytest.raises(ValueError):
            translate_java_pattern(pattern)
    with pytest.raises(regex.error):
        compile_pattern("(unclosed")


def test_catastrophic_pattern_stays_fast() -> None:
    # '.*(?:[ \r\n\t].*)*' backtracks exponentially in `re`; the regex package copes.
    value = "a " * 2000 + "\u2028"
    assert not compile_pattern(".*(?:[ \\r\\n\\t].*)*").fullmatch(value, timeout=5)
