"""Fuzzing every operation smlocal serves with members generated from botocore's own shapes.

For each operation of the four dispatch tables (SageMaker control plane and Application Auto Scaling
over json-1.1, CloudWatch over awsJson1_0 and rpc-v2-cbor, SageMaker Runtime over rest-json) a
seeded RNG builds requests from the operation's input shape: valid ones, and ones with one member
made wrong (wrong JSON type, out-of-range number, overlong string, bad enum, bad timestamp, null,
nested garbage), plus bodies that are no JSON object at all, wrong Content-Types and odd runtime
headers. Each goes as raw HTTP to a real server on 127.0.0.1 (no container engine: CreateModel
fails with its 400). Every answer must be below 500, except the 501 smlocal deliberately gives
for operations it does not implement, and AWS-shaped: an x-amzn-RequestId header and, for an
error, a body with `__type` and `message` (or the runtime's x-amzn-ErrorType and `message`).
"""

from __future__ import annotations

import http.client
import json
import os
import random
import string
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import botocore.model
import botocore.session
import cbor2
import pytest

from emulator.wire import autoscaling_api, cloudwatch_api, control_api
from tests.fixtures.no_engine import engine_free_server

#: FUZZ_SEED=n explores another sequence (the default one is what CI runs).
SEED = int(os.environ.get("FUZZ_SEED", "20261201"))
PER_OPERATION = 100
TIME_BUDGET_S = 60.0

_session = botocore.session.get_session()
MODELS = {
    name: _session.get_service_model(name)
    for name in ("sagemaker", "application-autoscaling", "cloudwatch", "sagemaker-runtime")
}
#: (service, operations served, X-Amz-Target prefix)
JSON_SERVICES = (
    ("sagemaker", sorted(control_api.OPERATIONS), "SageMaker"),
    ("application-autoscaling", sorted(autoscaling_api.OPERATIONS), autoscaling_api.TARGET_PREFIX),
    ("cloudwatch", sorted(cloudwatch_api.OPERATIONS), cloudwatch_api.SERVICE_ID),
)
#: Operations in the models that smlocal answers 501 NotImplemented, as it means to.
UNSERVED_SAMPLE = (
    ("sagemaker", "CreateTrainingJob", "SageMaker"),
    ("sagemaker", "CreateInferenceComponent", "SageMaker"),
)
RUNTIME_501: tuple[str, ...] = ()

FUZZ_IMAGE = "fuzz-image:latest"  # resolves (CreateModel succeeds); no container ever starts
#: Names drawn from small pools, so that requests meet the resources earlier requests created.
NAME_POOLS: dict[str, list[str]] = {
    "ModelName": ["fuzz-a", "fuzz-b"],
    "EndpointName": ["fuzz-a", "fuzz-b"],
    "EndpointConfigName": ["fuzz-a", "fuzz-b"],
    "VariantName": ["AllTraffic", "v2"],
    "ContainerImage": [FUZZ_IMAGE],
    "ResourceIdMaxLen1600": ["endpoint/fuzz-a/variant/AllTraffic", "endpoint/fuzz-b/variant/v2"],
    "AlarmName": ["fuzz-alarm"],
    "PolicyName": ["fuzz-policy"],
}

_VARIANT = {
    "VariantName": "AllTraffic",
    "ModelName": "fuzz-a",
    "InitialInstanceCount": 1,
    "InstanceType": "ml.m5.large",
}
_TARGET = {
    "ServiceNamespace": "sagemaker",
    "ResourceId": "endpoint/fuzz-a/variant/AllTraffic",
    "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
}
_METRIC = {"Namespace": "AWS/SageMaker", "MetricName": "Invocations"}
#: Valid requests that reach deep into the handlers (resources named from NAME_POOLS); the fuzzer
#: sends them and mutations of them, besides requests built from the shapes alone.
BASES: dict[str, dict[str, Any]] = {
    "CreateModel": {
        "ModelName": "fuzz-a",
        "PrimaryContainer": {"Image": FUZZ_IMAGE, "Environment": {"A": "1"}},
    },
    "CreateEndpointConfig": {"EndpointConfigName": "fuzz-a", "ProductionVariants": [_VARIANT]},
    "CreateEndpoint": {"EndpointName": "fuzz-a", "EndpointConfigName": "fuzz-a"},
    "UpdateEndpoint": {
        "EndpointName": "fuzz-a",
        "EndpointConfigName": "fuzz-b",
        "DeploymentConfig": {
            "RollingUpdatePolicy": {
                "MaximumBatchSize": {"Type": "INSTANCE_COUNT", "Value": 1},
                "WaitIntervalInSeconds": 0,
            }
        },
    },
    "UpdateEndpointWeightsAndCapacities": {
        "EndpointName": "fuzz-a",
        "DesiredWeightsAndCapacities": [{"VariantName": "AllTraffic", "DesiredInstanceCount": 2}],
    },
    "RegisterScalableTarget": {**_TARGET, "MinCapacity": 1, "MaxCapacity": 3},
    "PutScalingPolicy": {
        **_TARGET,
        "PolicyName": "fuzz-policy",
        "PolicyType": "TargetTrackingScaling",
        "TargetTrackingScalingPolicyConfiguration": {
            "TargetValue": 10.0,
            "PredefinedMetricSpecification": {
                "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"
            },
        },
    },
    "DescribeScalingActivities": {"ServiceNamespace": "sagemaker"},
    "PutMetricAlarm": {
        **_METRIC,
        "AlarmName": "fuzz-alarm",
        "Dimensions": [{"Name": "EndpointName", "Value": "fuzz-a"}],
        "Statistic": "Sum",
        "Period": 60,
        "EvaluationPeriods": 1,
        "Threshold": 1.0,
        "ComparisonOperator": "GreaterThanThreshold",
    },
    "SetAlarmState": {"AlarmName": "fuzz-alarm", "StateValue": "ALARM", "StateReason": "fuzz"},
    "GetMetricStatistics": {
        **_METRIC,
        "StartTime": 1_700_000_000,
        "EndTime": 1_700_003_600,
        "Period": 60,
        "Statistics": ["Sum", "Average"],
    },
    "GetMetricData": {
        "MetricDataQueries": [
            {"Id": "q1", "MetricStat": {"Metric": _METRIC, "Period": 60, "Stat": "Sum"}},
        ],
        "StartTime": 1_700_000_000,
        "EndTime": 1_700_003_600,
    },
}

SETUP = (
    ("sagemaker", "CreateModel"),
    ("sagemaker", "CreateEndpointConfig"),
    ("sagemaker", "CreateEndpoint"),
    ("application-autoscaling", "RegisterScalableTarget"),
    ("application-autoscaling", "PutScalingPolicy"),
    ("cloudwatch", "PutMetricAlarm"),
)

GARBAGE: tuple[Any, ...] = (
    None,
    True,
    0,
    -1,
    2**63,
    -(2**70),
    1.5e308,
    "",
    "x" * 5000,
    "\u0000\ud7ff\ufffd",
    "'; DROP TABLE models; --",
    [],
    {},
    [[[[[[[[[[[[[[[[[[[[{}]]]]]]]]]]]]]]]]]]]],
    {"a": {"b": {"c": [1, "2", None, {"d": []}]}}},
    "2024-13-45T99:99:99Z",
    "not-a-timestamp",
)


class Gen:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def text(self, lo: int = 1, hi: int = 12) -> str:
        alphabet = string.ascii_letters + string.digits
        return "".join(self.rng.choice(alphabet) for _ in range(self.rng.randint(lo, hi)))

    def valid(self, shape: botocore.model.Shape, depth: int = 0) -> Any:
        t = shape.type_name
        meta = shape.metadata
        if t == "structure":
            out: dict[str, Any] = {}
            required = set(shape.required_members)
            for name, member in shape.members.items():
                if member.serialization.get("location") in ("header", "uri", "querystring"):
                    continue
                if name in required or (depth < 3 and self.rng.random() < 0.3):
                    out[name] = self.valid(member, depth + 1)
            return out
        if t == "list":
            lo = int(meta.get("min", 0))
            count = max(lo, self.rng.randint(0, 2 if depth < 3 else 0))
            return [self.valid(shape.member, depth + 1) for _ in range(count)]
        if t == "map":
            return {self.text(): self.valid(shape.value, depth + 1) for _ in range(self.rng.randint(0, 2))}
        if t == "string":
            if meta.get("enum"):
                return self.rng.choice(meta["enum"])
            pool = NAME_POOLS.get(shape.name)
            if pool is not None and self.rng.random() < 0.7:
                return self.rng.choice(pool)
            lo = int(meta.get("min", 1))
            hi = int(meta.get("max", 40))
            return self.text(max(lo, 1), max(min(hi, 40), max(lo, 1)))
        if t in ("integer", "long"):
            lo = int(meta.get("min", 0))
            hi = int(meta.get("max", lo + 100))
            return self.rng.randint(lo, min(hi, lo + 1000))
        if t in ("float", "double"):
            lo = float(meta.get("min", 0))
            return lo + self.rng.random() * 10
        if t == "boolean":
            return self.rng.random() < 0.5
        if t == "timestamp":
            return self.rng.choice([time.time() - self.rng.randint(0, 10**6), "2026-01-01T00:00:00Z"])
        if t == "blob":
            return "aGVsbG8="
        return {}

    def wrong(self, shape: botocore.model.Shape) -> Any:
        """A value this shape must refuse (or a plain odd one)."""
        t = shape.type_name
        meta = shape.metadata
        choices: list[Any] = list(GARBAGE)
        if t == "string":
            choices += [123, ["a"], {"a": 1}, "x" * (int(meta.get("max", 300)) + 1)]
            if meta.get("enum"):
                choices += ["NotAnEnumValue", meta["enum"][0].lower() + "?"]
            if meta.get("pattern"):
                choices += ["-bad_pattern-", "../../etc/passwd", " leading space"]
        elif t in ("integer", "long", "float", "double"):
            choices += ["60", int(meta.get("min", 0)) - 1, int(meta.get("max", 2**31)) + 1, 2**31, 1e300]
        elif t == "timestamp":
            choices += ["abc", "2026-02-30", 1e20, -1e20, True, [1], "", "12:00"]
        elif t in ("list", "map", "structure"):
            choices += ["a string", 7, [None], {"x": None}, [self.rng.choice(GARBAGE)]]
        return self.rng.choice(choices)

    def mutate(self, shape: botocore.model.Shape, value: Any, depth: int = 0) -> Any:
        """`value` (valid for `shape`) with one member somewhere replaced by a wrong one."""
        t = shape.type_name
        if t == "structure" and isinstance(value, dict) and shape.members:
            name = self.rng.choice(list(shape.members))
            member = shape.members[name]
            copy = dict(value)
            if name in copy and depth < 4 and self.rng.random() < 0.5:
                copy[name] = self.mutate(member, copy[name], depth + 1)
            elif name in copy and self.rng.random() < 0.2:
                del copy[name]
            else:
                copy[name] = self.wrong(member)
            return copy
        if t == "list" and isinstance(value, list) and value and self.rng.random() < 0.6:
            i = self.rng.randrange(len(value))
            return value[:i] + [self.mutate(shape.member, value[i], depth + 1)] + value[i + 1 :]
        if t == "map" and isinstance(value, dict) and self.rng.random() < 0.5:
            return {**value, self.rng.choice(["", "x" * 300, "bad key!"]): self.wrong(shape.value)}
        return self.wrong(shape)


def _json_default(value: Any) -> Any:
    raise TypeError(type(value).__name__)


def _dumps(value: Any) -> bytes:
    return json.dumps(value, default=_json_default).encode()


def _cbor_ready(value: Any, shape: botocore.model.Shape | None, rng: random.Random) -> Any:
    """CBOR carries timestamps as datetimes: convert some valid ones."""
    if shape is not None and shape.type_name == "timestamp" and isinstance(value, int | float):
        if rng.random() < 0.5 and -1e10 < value < 1e10:
            return datetime.fromtimestamp(value, UTC)
    if shape is not None and shape.type_name == "structure" and isinstance(value, dict):
        return {k: _cbor_ready(v, shape.members.get(k), rng) for k, v in value.items()}
    return value


class Client:
    """One keep-alive connection; reconnects when the server closes it."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)

    def close(self) -> None:
        self.conn.close()

    def send(self, method: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, Any, bytes]:
        for attempt in (1, 2):
            try:
                self.conn.request(method, path, body=body, headers=headers)
                resp = self.conn.getresponse()
                data = resp.read()
                if resp.getheader("Connection", "").lower() == "close":
                    self.conn.close()
                return resp.status, resp.headers, data
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.conn.close()
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")


Request = tuple[str, str, str, bytes, dict[str, str]]  # (label, method, path, body, headers)


def json_requests(rng: random.Random) -> Iterator[Request]:
    gen = Gen(rng)
    served = [(svc, op, prefix) for svc, ops, prefix in JSON_SERVICES for op in ops]
    prefixes = {svc: prefix for svc, _, prefix in JSON_SERVICES}
    json_10 = {"Content-Type": "application/x-amz-json-1.0"}
    json_11 = {"Content-Type": "application/x-amz-json-1.1"}
    for svc, op in SETUP:  # the resources the pooled names meet
        headers = {"X-Amz-Target": f"{prefixes[svc]}.{op}", **(json_10 if svc == "cloudwatch" else json_11)}
        for name in NAME_POOLS["ModelName"]:
            body = json.dumps(BASES[op]).replace('"fuzz-a"', f'"{name}"').encode()
            yield f"{svc}:{op}:setup", "POST", "/", body, headers
    # Every (operation, index) pair in a shuffled order, so that creations, updates and deletions
    # of the same few resources interleave.
    jobs = [(svc, op, prefix, i) for svc, op, prefix in served for i in range(PER_OPERATION)]
    jobs += [(svc, op, prefix, i) for svc, op, prefix in UNSERVED_SAMPLE for i in range(5)]
    rng.shuffle(jobs)
    for svc, op, prefix, i in jobs:
        shape = MODELS[svc].operation_model(op).input_shape
        content_type = "application/x-amz-json-1.0" if svc == "cloudwatch" else "application/x-amz-json-1.1"
        if True:
            base = BASES.get(op)
            if base is not None and rng.random() < 0.6:
                params = json.loads(json.dumps(base))
            else:
                params = gen.valid(shape) if shape is not None else {}
            kind = "valid" if i % 5 == 0 else "mutated"
            if kind == "mutated" and shape is not None:
                params = gen.mutate(shape, params)
            headers = {"X-Amz-Target": f"{prefix}.{op}", "Content-Type": content_type}
            if i % 17 == 3:
                headers["Content-Type"] = rng.choice(["text/plain", "application/json", "", "a/b; charset=x"])
            body = _dumps(params)
            if i % 13 == 7:
                body = rng.choice(
                    [
                        b"not json",
                        b"[1, 2]",
                        b'"text"',
                        b"{",
                        b"\xff\xfe\x00",
                        b"NaN",
                        b'{"A": NaN}',
                        b"null",
                        b"[" * 5000 + b"]" * 5000,
                        b'{"MaxResults": 1e999}',
                        b'{"x": ' + b"9" * 5000 + b"}",
                    ]
                )
                kind = "raw"
            yield f"{svc}:{op}:{kind}", "POST", "/", body, headers
            if svc == "cloudwatch" and i % 2 == 0:
                cbor_body = cbor2.dumps(_cbor_ready(params, shape, rng)) if kind != "raw" else body
                yield (
                    f"cloudwatch-cbor:{op}:{kind}",
                    "POST",
                    f"/service/{cloudwatch_api.SERVICE_ID}/operation/{op}",
                    cbor_body,
                    {"Content-Type": "application/cbor", "smithy-protocol": "rpc-v2-cbor"},
                )
    for target in ("", "SageMaker", "SageMaker.", "Nope.CreateModel", "SageMaker.NoSuchOperation"):
        headers = {"Content-Type": "application/x-amz-json-1.1"}
        if target:
            headers["X-Amz-Target"] = target
        yield f"target:{target}", "POST", "/", b"{}", headers


def _header_text(text: str) -> str:
    """Printable Latin-1 (control characters make the request invalid HTTP: see invalid_http)."""
    return "".join(c if " " <= c <= "~" or "\xa0" <= c <= "\xff" else "?" for c in text)[:7000]


def runtime_requests(rng: random.Random) -> Iterator[Request]:
    gen = Gen(rng)
    shape = MODELS["sagemaker-runtime"].operation_model("InvokeEndpoint").input_shape
    header_members = [
        (name, m) for name, m in shape.members.items() if m.serialization.get("location") == "header"
    ]
    for _ in range(PER_OPERATION * 2):
        name = rng.choice(
            ["ep", gen.text(), "a" * 64, "bad_name", "-x", "%2E%2E", "\u00e9t\u00e9", "x" * 300]
        )
        headers: dict[str, str] = {}
        for _name, member in header_members:
            if rng.random() < 0.3:
                value = gen.valid(member) if rng.random() < 0.5 else gen.wrong(member)
                text = value if isinstance(value, str) else json.dumps(value)
                headers[member.serialization["name"]] = _header_text(text)
        if rng.random() < 0.3:
            headers["Content-Type"] = rng.choice(
                ["", "text/plain", "x" * 2000, "application/json; charset=\u00ff"]
            )
        if rng.random() < 0.2:
            headers[rng.choice(["X-Odd", "Accept", "X-Amzn-SageMaker-Custom-Attributes"])] = rng.choice(
                ["", " ", "x" * 1025, "\t", "a,b;c=d"]
            )
        body = rng.choice([b"", b"{}", b"\x00" * 100, bytes(rng.getrandbits(8) for _ in range(64))])
        yield "runtime:InvokeEndpoint", "POST", f"/endpoints/{quote(name)}/invocations", body, headers
    for tail in (*RUNTIME_501, "async-invocations", "invocations-response-stream"):
        yield f"runtime:{tail}", "POST", f"/endpoints/ep/{tail}", b"{}", {"Content-Type": "application/json"}


def invalid_http(rng: random.Random) -> Iterator[Request]:
    """Requests aiohttp's HTTP parser refuses before any handler (400, its own text body)."""
    for header in ("Accept", "X-Amzn-SageMaker-Session-Id", "X-Amz-Target"):
        yield "http-invalid", "POST", "/endpoints/ep/invocations", b"{}", {header: "\x00\x01"}


def admin_requests(rng: random.Random) -> Iterator[Request]:
    for value in ("abc", "-1", "1e3", "", "10", "9" * 50):
        yield "admin:logs", "GET", f"/_smlocal/endpoints/ep/logs?tail={quote(value)}", b"", {}
    for value in ("maybe", "2", "true", "0"):
        yield "admin:logs", "GET", f"/_smlocal/endpoints/ep/logs?follow={value}", b"", {}
    for name in ("%2E%2E", "bad_name", "x" * 100, "ep"):
        yield "admin:logs", "GET", f"/_smlocal/endpoints/{name}/logs", b"", {}
        yield "admin:metrics", "GET", f"/_smlocal/endpoints/{name}/metrics", b"", {}
    for method, path in (("GET", "/nowhere"), ("DELETE", "/"), ("PUT", "/_smlocal/health"), ("GET", "/")):
        yield "other", method, path, b"", {}


def check_answer(label: str, status: int, headers: Any, data: bytes) -> str | None:
    """None if the answer is acceptable, else what is wrong with it."""
    if status >= 500 and not (status == 501 and _is_not_implemented(headers, data)):
        return f"status {status}: {data[:300]!r}"
    if label == "http-invalid":
        return None
    if not headers.get("x-amzn-RequestId"):
        return f"no x-amzn-RequestId (status {status})"
    if status < 400:
        return None
    content_type = headers.get("Content-Type", "")
    try:
        body = cbor2.loads(data) if "cbor" in content_type else json.loads(data)
    except ValueError:
        return f"error body is not JSON/CBOR: {data[:200]!r}"
    if not isinstance(body, dict) or not (body.get("message") or body.get("Message")):
        return f"error body without message: {body!r}"[:300]
    if label.startswith("runtime") or label.startswith("admin"):
        if not headers.get("x-amzn-ErrorType") and "__type" not in body:
            return f"runtime error without x-amzn-ErrorType: {body!r}"[:300]
    elif "__type" not in body:
        return f"error body without __type: {body!r}"[:300]
    return None


def _is_not_implemented(headers: Any, data: bytes) -> bool:
    return b"NotImplemented" in data or "NotImplemented" in headers.get("x-amzn-ErrorType", "")


@pytest.fixture(scope="module")
def pinned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    """One server for the pinned cases below."""
    server = engine_free_server(tmp_path_factory.mktemp("pinned"))
    client = Client(server.url)
    try:
        yield client
    finally:
        client.close()
        server.stop()


def test_fuzzed_requests_never_get_a_5xx_and_always_an_aws_shaped_answer(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    server = engine_free_server(tmp_path / "state", known_images=frozenset({FUZZ_IMAGE}))
    try:
        client = Client(server.url)
        statuses: Counter[int] = Counter()
        operations: set[str] = set()
        problems: list[str] = []
        started = time.monotonic()
        sent = 0
        for source in (json_requests(rng), runtime_requests(rng), invalid_http(rng), admin_requests(rng)):
            for label, method, path, body, headers in source:
                status, resp_headers, data = client.send(method, path, body, headers)
                sent += 1
                statuses[status] += 1
                operations.add(":".join(label.split(":")[:2]))
                problem = check_answer(label, status, resp_headers, data)
                if problem is not None and len(problems) < 20:
                    problems.append(
                        f"{label} {method} {path[:100]} {str(headers)[:300]} body={body[:200]!r}: {problem}"
                    )
                assert time.monotonic() - started < TIME_BUDGET_S, f"fuzzing took over {TIME_BUDGET_S} s"
        elapsed = time.monotonic() - started
        health = client.send("GET", "/_smlocal/health", b"", {})
        client.close()
    finally:
        server.stop()
    served = sum(len(ops) for _, ops, _ in JSON_SERVICES) + 1  # + InvokeEndpoint
    print(
        f"\nfuzz: {sent} requests over {len(operations)} operations/routes ({served} served operations) "
        f"in {elapsed:.1f} s; statuses {dict(sorted(statuses.items()))}"
    )
    assert not problems, "\n".join(problems)
    assert health[0] == 200  # the server still serves
    assert sent >= 3000


@pytest.mark.parametrize(
    ("target", "body", "status", "error_type", "words"),
    [
        (
            "SageMaker.ListModels",
            b'{"CreationTimeAfter": "yesterday"}',
            400,
            "com.amazon.coral.service#SerializationException",
            "Value 'yesterday' at 'creationTimeAfter' failed to satisfy constraint: "
            "Member must be of type timestamp",
        ),
        (
            "SageMaker.ListEndpoints",
            b'{"CreationTimeBefore": 1e22}',
            400,
            "com.amazon.coral.service#SerializationException",
            "at 'creationTimeBefore' failed to satisfy constraint: Member must be of type timestamp",
        ),
        (
            "SageMaker.ListModels",
            b'{"MaxResults": null}',  # null is absent: the default page size
            200,
            None,
            None,
        ),
        (
            "SageMaker.ListModels",
            b"[" * 3000 + b"]" * 3000,
            400,
            "com.amazon.coral.service#SerializationException",
            "The request body is not valid JSON",
        ),
        (
            "SageMaker.ListModels",
            b'{"MaxResults": NaN}',
            400,
            "com.amazon.coral.service#SerializationException",
            "NaN is not a JSON value",
        ),
        (
            "SageMaker.ListModels",
            b'{"MaxResults": 99999999999}',
            400,
            "com.amazon.coral.service#SerializationException",
            "at 'maxResults' failed to satisfy constraint: Member must be of type integer",
        ),
        (
            "SageMaker.CreateEndpoint",
            b'{"EndpointName": "e", "EndpointConfigName": "c", '
            b'"DeploymentConfig": {"AutoRollbackConfiguration": {"Alarms": [{}]}}}',
            400,
            "com.amazon.coral.validate#ValidationException",
            "Each alarm of AutoRollbackConfiguration needs an AlarmName.",
        ),
    ],
)
def test_bad_members_get_the_aws_error(
    pinned: Client, target: str, body: bytes, status: int, error_type: str | None, words: str | None
) -> None:
    answer = pinned.send(
        "POST", "/", body, {"X-Amz-Target": target, "Content-Type": "application/x-amz-json-1.1"}
    )
    got_status, headers, data = answer
    parsed = json.loads(data)
    assert got_status == status, parsed
    assert headers["x-amzn-RequestId"]
    if error_type is not None:
        assert parsed["__type"] == error_type
        assert words is not None and words in parsed["message"], parsed["message"]


@pytest.mark.parametrize(
    ("path", "words"),
    [
        (
            "/_smlocal/endpoints/ep/logs?tail=abc",
            "Query parameter tail must be a whole number of lines (0 or more), not 'abc'.",
        ),
        ("/_smlocal/endpoints/ep/logs?tail=-3", "not '-3'"),
        ("/_smlocal/endpoints/ep/logs?follow=maybe", "Query parameter follow must be 1, true, 0 or false"),
        ("/_smlocal/endpoints/%2E%2E/logs", "'..' is not an endpoint name"),
        ("/_smlocal/endpoints/bad_name/metrics", "'bad_name' is not an endpoint name"),
    ],
)
def test_admin_routes_answer_400_for_bad_query_values(pinned: Client, path: str, words: str) -> None:
    status, headers, data = pinned.send("GET", path, b"", {})
    parsed = json.loads(data)
    assert status == 400, parsed
    assert parsed["__type"] == "com.amazon.coral.service#ValidationException"
    assert words in parsed["message"], parsed["message"]
    assert headers["x-amzn-RequestId"] and headers["x-amzn-ErrorType"].startswith("ValidationException:")


def test_a_body_over_the_cap_on_the_control_plane_is_an_aws_shaped_413(pinned: Client) -> None:
    """aiohttp refuses it itself (client_max_size); the guard middleware shapes the answer."""
    body = b'{"NameContains": "' + b"x" * 6_291_460 + b'"}'
    status, headers, data = pinned.send(
        "POST",
        "/",
        body,
        {"X-Amz-Target": "SageMaker.ListModels", "Content-Type": "application/x-amz-json-1.1"},
    )
    parsed = json.loads(data)
    assert status == 413
    assert parsed["__type"] == "com.amazon.coral.service#ValidationException"
    assert "Maximum request body size" in parsed["message"], parsed
    assert headers["x-amzn-RequestId"]
