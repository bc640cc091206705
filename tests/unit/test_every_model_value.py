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
from emulator.wire import known_members, unsupported
from emulator.wire.service_models import operation_model
from tests.fixtures.model_walk import (
    BASES,
    IMAGE,
    METRIC,
    REFUSAL_TAIL,
    SERVED,
    VARIANT,
    names,
    requests,
)
from tests.fixtures.no_engine import engine_free_server


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
            elif "not supported by smlocal" in message and not message.endswith(REFUSAL_TAIL):
                failures.append(f"{label}: a refusal not in the one text: {message}"[:400])
    assert sent > 0
    assert not failures, f"{len(failures)} of {sent} answered 5xx:\n" + "\n".join(failures)


@pytest.mark.parametrize("strategy", ["PREFIX_AWARE", "KV_AWARE"])
def test_a_routing_strategy_smlocal_does_not_implement_is_a_400(server: str, strategy: str) -> None:
    """botocore 1.44's RoutingStrategy values (were 500 InternalFailure, retried three times)."""
    variant = {**VARIANT, "ModelName": _fresh_model(server), "RoutingConfig": {"RoutingStrategy": strategy}}
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
        variant = {**VARIANT, "ModelName": model, "RoutingConfig": {"RoutingStrategy": strategy}}
        params = {"EndpointConfigName": name, "ProductionVariants": [variant]}
        assert _call(sm, "CreateEndpointConfig", params) == (200, "", "")
        described = sm.describe_endpoint_config(EndpointConfigName=name)
        assert described["ProductionVariants"][0]["RoutingConfig"] == {"RoutingStrategy": strategy}


def test_a_metric_without_its_namespace_is_a_400(server: str) -> None:
    """GetMetricData's Metric has no required members in the model (was 500: KeyError 'Namespace')."""
    for member in ("Namespace", "MetricName"):
        metric = {k: v for k, v in METRIC.items() if k != member}
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
    name = f"walk-model-{next(names)}"
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
    params = {"EndpointConfigName": "c", "ProductionVariants": [{**VARIANT, "EnableSSMAccess": True}]}
    with pytest.raises(ValidationFailed) as info:
        unsupported.check(shape, params, "sagemaker")
    assert info.value.message == f"ProductionVariant EnableSSMAccess{REFUSAL_TAIL}"
    unsupported.check(shape, {"EndpointConfigName": "c", "ProductionVariants": [VARIANT]}, "sagemaker")
    runtime = operation_model("sagemaker-runtime", "InvokeEndpoint").input_shape
    with pytest.raises(ValidationFailed) as info:
        unsupported.check(runtime, {"EndpointName": "e", "Body": b"x", "SessionId": "s"}, "sagemaker-runtime")
    assert info.value.message == f"InvokeEndpoint SessionId{REFUSAL_TAIL}"


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
