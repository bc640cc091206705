"""Every enum value and every member the installed botocore models allow, in every operation smlocal
serves (SageMaker's control plane, SageMaker Runtime, Application Auto Scaling, CloudWatch), sent by
a real boto3 client to a real smlocal server on 127.0.0.1 (no container engine: NoImagesRuntime):
none is answered 500 (boto3 would retry it). A value or member smlocal does not implement is a 400
that says "... is not supported by smlocal yet" (emulator/wire/unsupported.py), or it is served.

Each request is a minimal valid request of its operation (BASES, or the operation's required members)
plus one member, at any depth, set to a valid value (every value of an enum): a new botocore release
that adds a value or a member gets it tried here the day it is installed.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import botocore
import botocore.model
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from emulator.errors import ValidationFailed
from emulator.wire import autoscaling_api, cloudwatch_api, control_api, known_members, unsupported
from emulator.wire.java_patterns import matcher
from emulator.wire.service_models import operation_model
from tests.fixtures.no_engine import engine_free_server

IMAGE = "walk-image:latest"  # resolves (CreateModel succeeds); no container ever starts
RUNTIME_OPERATIONS = unsupported.RUNTIME_OPERATIONS
SERVED: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("sagemaker", tuple(sorted(control_api.OPERATIONS))),
    ("application-autoscaling", tuple(sorted(autoscaling_api.OPERATIONS))),
    ("cloudwatch", tuple(sorted(cloudwatch_api.OPERATIONS))),
    ("sagemaker-runtime", RUNTIME_OPERATIONS),
)

_TARGET = {
    "ServiceNamespace": "sagemaker",
    "ResourceId": "endpoint/walk/variant/AllTraffic",
    "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
}
_METRIC = {"Namespace": "AWS/SageMaker", "MetricName": "Invocations"}
_VARIANT = {
    "VariantName": "AllTraffic",
    "ModelName": "walk",
    "InitialInstanceCount": 1,
    "InstanceType": "ml.m5.large",
}
#: Minimal valid requests that reach the handlers' parsing (resources named "walk" exist).
BASES: dict[str, dict[str, Any]] = {
    "CreateModel": {"ModelName": "walk", "PrimaryContainer": {"Image": IMAGE}},
    "CreateEndpointConfig": {"EndpointConfigName": "walk", "ProductionVariants": [_VARIANT]},
    "CreateEndpoint": {"EndpointName": "walk", "EndpointConfigName": "walk"},
    "UpdateEndpoint": {"EndpointName": "walk", "EndpointConfigName": "walk"},
    "UpdateEndpointWeightsAndCapacities": {
        "EndpointName": "walk",
        "DesiredWeightsAndCapacities": [{"VariantName": "AllTraffic", "DesiredInstanceCount": 1}],
    },
    "RegisterScalableTarget": {**_TARGET, "MinCapacity": 1, "MaxCapacity": 2},
    "PutScalingPolicy": {
        **_TARGET,
        "PolicyName": "walk",
        "PolicyType": "TargetTrackingScaling",
        "TargetTrackingScalingPolicyConfiguration": {
            "TargetValue": 10.0,
            "PredefinedMetricSpecification": {
                "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"
            },
        },
    },
    "PutMetricAlarm": {
        **_METRIC,
        "AlarmName": "walk",
        "Statistic": "Sum",
        "Period": 60,
        "EvaluationPeriods": 1,
        "Threshold": 1.0,
        "ComparisonOperator": "GreaterThanThreshold",
    },
    "GetMetricStatistics": {**_METRIC, "StartTime": 1_700_000_000, "EndTime": 1_700_003_600, "Period": 60},
    "GetMetricData": {
        "MetricDataQueries": [{"Id": "q1", "MetricStat": {"Metric": _METRIC, "Period": 60, "Stat": "Sum"}}],
        "StartTime": 1_700_000_000,
        "EndTime": 1_700_003_600,
    },
    "InvokeEndpoint": {"EndpointName": "walk", "Body": b"x"},
    "InvokeEndpointWithResponseStream": {"EndpointName": "walk", "Body": b"x"},
    "InvokeEndpointAsync": {"EndpointName": "walk", "InputLocation": "s3://bucket/key"},
}

#: Strings tried in order for a member with a pattern; the first that matches is its value.
_CANDIDATES = (
    "walk",
    "s3://bucket/key/",
    "arn:aws:iam::123456789012:role/walk",
    "arn:aws:sns:us-east-1:123456789012:walk",
    "arn:aws:sagemaker:us-east-1:123456789012:endpoint/walk",
    "arn:aws:kms:us-east-1:123456789012:key/walk",
    "https://example.com/walk",
    "123456789012",
    "walk.example.com/walk:1",
    "sagemaker",
    "application/json",
    "/metrics",
    "1",
    "a",
    "*",
    "ml.m5.large",
    "mig-1g.10gb",
    "arn:aws:application-autoscaling:us-east-1:123456789012:scalable-target/walk",
)


def _string(shape: botocore.model.Shape) -> str:
    meta = shape.metadata
    pattern = meta.get("pattern")
    matches = matcher(pattern) if pattern is not None else None
    lo, hi = int(meta.get("min", 0)), int(meta.get("max", 1 << 30))
    for text in _CANDIDATES:
        if lo <= len(text) <= hi and (matches is None or matches(text)):
            return text
    raise AssertionError(f"no candidate string fits {shape.name} (pattern {pattern!r}, {lo}-{hi}): add one")


def minimal(shape: botocore.model.Shape, depth: int = 0) -> Any:
    """A valid value of `shape`: required members only, lists of their minimum length (at least 1
    for a required list), enums' first value."""
    t = shape.type_name
    meta = shape.metadata
    if t == "structure":
        return {name: minimal(shape.members[name], depth + 1) for name in shape.required_members}
    if t == "list":
        return [minimal(shape.member, depth + 1) for _ in range(max(int(meta.get("min", 0)), 1))]
    if t == "map":
        return {_string(shape.key): minimal(shape.value, depth + 1)}
    if t == "string":
        return meta["enum"][0] if meta.get("enum") else _string(shape)
    if t in ("integer", "long"):
        return max(int(meta.get("min", 1)), 1) if "max" not in meta else int(meta.get("min", meta["max"]))
    if t in ("float", "double"):
        return float(meta.get("min", 1.0))
    if t == "boolean":
        return True
    if t == "timestamp":
        return 1_700_000_000
    if t == "blob":
        return b"x"
    return {}


def values(shape: botocore.model.Shape) -> list[Any]:
    """The values tried for a leaf: every enum value, else one valid value (both booleans)."""
    if shape.type_name == "string" and shape.metadata.get("enum"):
        return list(shape.metadata["enum"])
    if shape.type_name == "boolean":
        return [True, False]
    return [minimal(shape)]


Path_ = tuple[str, ...]


def member_paths(shape: botocore.model.Shape, stack: tuple[str, ...] = ()) -> Iterator[tuple[Path_, Any]]:
    """(path of member names, value) for every member at every depth (a list's item is its first
    element; recursive shapes are entered once)."""
    if shape.type_name != "structure" or shape.name in stack:
        return
    for name, member in shape.members.items():
        target = member.member if member.type_name == "list" else member
        if target.type_name == "structure" and target.name not in stack + (shape.name,):
            yield (name,), minimal(member)
            for sub, value in member_paths(target, stack + (shape.name,)):
                yield (name, *sub), value
        elif target.type_name == "structure":
            continue
        else:
            for value in values(target):
                yield (name,), [value] if member.type_name == "list" else value


def with_member(shape: botocore.model.Shape, base: dict[str, Any], path: Path_, value: Any) -> dict[str, Any]:
    """`base` with the member at `path` set to `value` (missing parents made minimal)."""
    out = dict(base)
    name, rest = path[0], path[1:]
    member = shape.members[name]
    if not rest:
        out[name] = value
        return out
    if member.type_name == "list":
        items = list(out.get(name) or [minimal(member.member)])
        items[0] = with_member(member.member, dict(items[0]), rest, value)
        out[name] = items
    else:
        out[name] = with_member(member, dict(out.get(name) or minimal(member)), rest, value)
    return out


_REFUSAL_TAIL = " is not supported by smlocal yet. See docs/api-coverage.md."
_names = itertools.count()

#: Members whose value is a resource name: Create* requests get a fresh one (so that "already
#: exists" never answers before the request is parsed); the others keep the base's "walk".
_FRESH = {
    "CreateModel": "ModelName",
    "CreateEndpointConfig": "EndpointConfigName",
    "CreateEndpoint": "EndpointName",
}


def requests(service: str, operation: str) -> Iterator[tuple[str, dict[str, Any]]]:
    shape = operation_model(service, operation).input_shape
    base = BASES.get(operation) or minimal(shape)
    for path, value in member_paths(shape):
        params = with_member(shape, base, path, value)
        fresh = _FRESH.get(operation)
        if fresh is not None and path != (fresh,):
            params[fresh] = f"walk-{next(_names)}"
        label = f"{operation}.{'.'.join(path)}={value!r}"[:200]
        yield label, params


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = engine_free_server(tmp_path_factory.mktemp("walk") / "state", known_images=frozenset({IMAGE}))
    try:
        yield server.url
    finally:
        server.stop()


def _client(url: str, service: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"max_attempts": 1, "mode": "standard"}, parameter_validation=False),
    )


def _setup(url: str) -> None:
    sm = _client(url, "sagemaker")
    sm.create_model(**BASES["CreateModel"])
    sm.create_endpoint_config(**BASES["CreateEndpointConfig"])
    sm.create_endpoint(**BASES["CreateEndpoint"])


def _call(client: Any, operation: str, params: dict[str, Any]) -> tuple[int, str, str]:
    method = getattr(client, botocore.xform_name(operation))
    try:
        answer = method(**params)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        return (
            exc.response["ResponseMetadata"]["HTTPStatusCode"],
            str(error.get("Code", "")),
            str(error.get("Message", "")),
        )
    body = answer.get("Body")
    if body is not None and hasattr(body, "__iter__"):
        for _ in body:  # drain an event stream (or a streaming body) so its errors show
            pass
    return answer["ResponseMetadata"]["HTTPStatusCode"], "", ""


@pytest.mark.parametrize(("service", "operations"), SERVED, ids=[s for s, _ in SERVED])
def test_no_value_or_member_of_the_model_is_a_500(
    server: str, service: str, operations: tuple[str, ...]
) -> None:
    _setup_once(server)
    client = _client(server, service)
    failures: list[str] = []
    sent = 0
    for operation in operations:
        for label, params in requests(service, operation):
            status, code, message = _call(client, operation, params)
            sent += 1
            if status >= 500:
                failures.append(f"{label}: {status} {code} {message}"[:400])
            elif "not supported by smlocal" in message and not message.endswith(_REFUSAL_TAIL):
                failures.append(f"{label}: a refusal not in the one text: {message}"[:400])
    assert sent > 0
    assert not failures, f"{len(failures)} of {sent} answered 5xx:\n" + "\n".join(failures)


@pytest.mark.parametrize("strategy", ["PREFIX_AWARE", "KV_AWARE"])
def test_a_routing_strategy_smlocal_does_not_implement_is_a_400(server: str, strategy: str) -> None:
    """botocore 1.44's RoutingStrategy values (were 500 InternalFailure, retried three times)."""
    variant = {**_VARIANT, "ModelName": _fresh_model(server), "RoutingConfig": {"RoutingStrategy": strategy}}
    status, code, message = _call(
        _client(server, "sagemaker"),
        "CreateEndpointConfig",
        {"EndpointConfigName": f"walk-{strategy.lower().replace('_', '-')}", "ProductionVariants": [variant]},
    )
    assert (status, code, message) == (
        400,
        "ValidationException",
        f"ProductionVariant RoutingConfig RoutingStrategy {strategy} is not supported by smlocal yet. "
        "See docs/api-coverage.md.",
    )


def test_the_implemented_routing_strategies_are_served(server: str) -> None:
    sm = _client(server, "sagemaker")
    model = _fresh_model(server)
    for strategy in sorted(unsupported.IMPLEMENTED_VALUES["RoutingStrategy"]):
        name = f"walk-ok-{strategy.lower().replace('_', '-')}"
        variant = {**_VARIANT, "ModelName": model, "RoutingConfig": {"RoutingStrategy": strategy}}
        params = {"EndpointConfigName": name, "ProductionVariants": [variant]}
        assert _call(sm, "CreateEndpointConfig", params) == (200, "", "")
        described = sm.describe_endpoint_config(EndpointConfigName=name)
        assert described["ProductionVariants"][0]["RoutingConfig"] == {"RoutingStrategy": strategy}


def test_a_metric_without_its_namespace_is_a_400(server: str) -> None:
    """GetMetricData's Metric has no required members in the model (was 500: KeyError 'Namespace')."""
    for member in ("Namespace", "MetricName"):
        metric = {k: v for k, v in _METRIC.items() if k != member}
        params = {**BASES["GetMetricData"]}
        params["MetricDataQueries"] = [
            {"Id": "q1", "MetricStat": {"Metric": metric, "Period": 60, "Stat": "Sum"}}
        ]
        assert _call(_client(server, "cloudwatch"), "GetMetricData", params) == (
            400,
            "ValidationError",
            f"A metric needs its {member}: smlocal finds metrics by namespace, name and dimensions.",
        )


def test_the_tables_name_what_the_models_hold() -> None:
    """IMPLEMENTED_VALUES and REFUSED_MEMBERS name shapes, members and values of the installed models,
    so that a renamed one fails here rather than silently stopping to refuse."""
    shapes: dict[str, botocore.model.Shape] = {}

    def collect(shape: botocore.model.Shape) -> None:
        if shape.name in shapes:
            return
        shapes[shape.name] = shape
        for child in (
            list(shape.members.values())
            if shape.type_name == "structure"
            else [shape.member]
            if shape.type_name == "list"
            else [shape.value]
            if shape.type_name == "map"
            else []
        ):
            collect(child)

    for service, operations in SERVED:
        for operation in operations:
            collect(operation_model(service, operation).input_shape)
    for name, implemented in unsupported.IMPLEMENTED_VALUES.items():
        assert implemented <= set(shapes[name].metadata["enum"]), name
    for name, members in unsupported.REFUSED_MEMBERS.items():
        assert set(members) <= set(shapes[name].members), name


def _fresh_model(url: str) -> str:
    """A model of its own (the walk deletes "walk" on its way)."""
    name = f"walk-model-{next(_names)}"
    _client(url, "sagemaker").create_model(ModelName=name, PrimaryContainer={"Image": IMAGE})
    return name


def _setup_once(url: str, done: set[str] = set()) -> None:  # noqa: B006 - one setup per server
    if url not in done:
        done.add(url)
        _setup(url)


def test_a_member_smlocal_has_never_seen_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a newer botocore's member meets: known_members.json lacks it, so it is a 400 (here the
    snapshot is made to lack two members of today's model)."""
    real = unsupported.known_members

    def without(service: str) -> dict[str, frozenset[str]]:
        known = dict(real(service))
        for shape, member in (("ProductionVariant", "EnableSSMAccess"), ("InvokeEndpointInput", "SessionId")):
            if shape in known:
                known[shape] = known[shape] - {member}
        return known

    monkeypatch.setattr(unsupported, "known_members", without)
    shape = operation_model("sagemaker", "CreateEndpointConfig").input_shape
    params = {"EndpointConfigName": "c", "ProductionVariants": [{**_VARIANT, "EnableSSMAccess": True}]}
    with pytest.raises(ValidationFailed) as info:
        unsupported.check(shape, params, "sagemaker")
    assert info.value.message == f"ProductionVariant EnableSSMAccess{_REFUSAL_TAIL}"
    unsupported.check(shape, {"EndpointConfigName": "c", "ProductionVariants": [_VARIANT]}, "sagemaker")
    runtime = operation_model("sagemaker-runtime", "InvokeEndpoint").input_shape
    with pytest.raises(ValidationFailed) as info:
        unsupported.check(runtime, {"EndpointName": "e", "Body": b"x", "SessionId": "s"}, "sagemaker-runtime")
    assert info.value.message == f"InvokeEndpoint SessionId{_REFUSAL_TAIL}"


def test_the_snapshot_is_the_installed_models_when_they_are_its_release() -> None:
    """known_members.json is what `python3 -m emulator.wire.known_members` writes for the release it
    names (on another release the walk above is the check: new members are refused, not 500s)."""
    text = (Path(unsupported.__file__).parent / unsupported.KNOWN_MEMBERS_FILE).read_text(encoding="utf-8")
    document = json.loads(text)
    if document["botocore"] != botocore.__version__:
        pytest.skip(
            f"the snapshot is of botocore {document['botocore']}, {botocore.__version__} is installed"
        )
    assert document == known_members.snapshot(known_members.SERVED)
