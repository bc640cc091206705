"""`--iam-policies`: IAM's evaluation as a table (policy, request -> decision), the documented examples
first, then every operator and element rule; the file format and what it refuses; the texts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from emulator.errors import AccessDenied, MissingAuthentication, PolicyFileInvalid, UnrecognizedClient
from emulator.model.iam_access import AccessPolicies, not_authorized
from emulator.model.iam_conditions import arn_matches
from emulator.model.iam_policy import Decision, Request, evaluate, parse_policy
from emulator.wire.access import access_key_id

ALLOWED, IMPLICIT, EXPLICIT = Decision.ALLOWED, Decision.IMPLICIT_DENY, Decision.EXPLICIT_DENY
ENDPOINT = "arn:aws:sagemaker:us-east-1:111122223333:endpoint/endpoint_name"
OTHER = "arn:aws:sagemaker:us-east-1:111122223333:endpoint/other"
HOST = "sagemaker:TargetContainerHostname"
INVOKE = "sagemaker:InvokeEndpoint"


def allow(condition: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    statement: dict[str, Any] = {"Effect": "Allow", "Action": INVOKE, "Resource": ENDPOINT, **fields}
    if condition is not None:
        statement["Condition"] = condition
    return statement


def deny(condition: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    return {**allow(condition, **fields), "Effect": "Deny"}


def doc(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def decide(
    statements: list[dict[str, Any]],
    host: str | None = None,
    action: str = INVOKE,
    resource: str = ENDPOINT,
    context: dict[str, tuple[str, ...]] | None = None,
) -> Decision:
    keys = dict(context or {})
    if host is not None:
        keys[HOST.lower()] = (host,)
    return evaluate([parse_policy(doc(*statements))], Request(action, resource, keys))


# The SageMaker developer guide's two policies for Direct endpoints ("Security with multi-container
# endpoints with direct invocation"): an allow list by hostname pattern, and allow-all but a deny list.
DOC_ALLOW_LIST = [allow({"StringLike": {HOST: ["customIps*", "common*"]}})]
DOC_DENY_LIST = [allow(), deny({"StringLike": {HOST: ["model_name*", "ManagedContainer*"]}})]

TABLE: list[tuple[str, list[dict[str, Any]], dict[str, Any], Decision]] = [
    # -- the documented examples
    ("doc allow list: customIps*", DOC_ALLOW_LIST, {"host": "customIpsA"}, ALLOWED),
    ("doc allow list: common*", DOC_ALLOW_LIST, {"host": "common"}, ALLOWED),
    ("doc allow list: other container", DOC_ALLOW_LIST, {"host": "secondContainer"}, IMPLICIT),
    ("doc allow list: no hostname (key absent)", DOC_ALLOW_LIST, {}, IMPLICIT),
    ("doc allow list: other endpoint", DOC_ALLOW_LIST, {"host": "common", "resource": OTHER}, IMPLICIT),
    ("doc deny list: allowed container", DOC_DENY_LIST, {"host": "secondContainer"}, ALLOWED),
    ("doc deny list: denied container", DOC_DENY_LIST, {"host": "model_name_2"}, EXPLICIT),
    ("doc deny list: ManagedContainer*", DOC_DENY_LIST, {"host": "ManagedContainer"}, EXPLICIT),
    ("doc deny list: no hostname", DOC_DENY_LIST, {}, ALLOWED),
    # -- evaluation logic: default deny, allow, explicit deny wins in any order
    ("no statement applies", [allow(Resource=OTHER)], {}, IMPLICIT),
    ("deny before allow", [deny(), allow()], {}, EXPLICIT),
    ("deny of another action", [allow(), deny(Action="sagemaker:DeleteEndpoint")], {}, ALLOWED),
    # -- Action: wildcards, case-insensitive, lists, NotAction
    ("sagemaker:*", [allow(Action="sagemaker:*")], {}, ALLOWED),
    ("sagemaker:Invoke*", [allow(Action="sagemaker:Invoke*")], {}, ALLOWED),
    ("sagemaker:InvokeEndpoint?", [allow(Action="sagemaker:InvokeEndpoint?")], {}, IMPLICIT),
    ("sagemaker:InvokeEndpoin?", [allow(Action="sagemaker:InvokeEndpoin?")], {}, ALLOWED),
    ("*", [allow(Action="*")], {}, ALLOWED),
    ("action case-insensitive", [allow(Action="SageMaker:invokeendpoint")], {}, ALLOWED),
    ("action list", [allow(Action=["s3:GetObject", INVOKE])], {}, ALLOWED),
    ("other service", [allow(Action="s3:*")], {}, IMPLICIT),
    ("prefix is not a wildcard", [allow(Action="sagemaker:Invoke")], {}, IMPLICIT),
    ("NotAction allows the rest", [{"Effect": "Allow", "NotAction": "s3:*", "Resource": "*"}], {}, ALLOWED),
    (
        "NotAction excludes it",
        [{"Effect": "Allow", "NotAction": "sagemaker:*", "Resource": "*"}],
        {},
        IMPLICIT,
    ),
    (
        "Deny NotAction (deny all but sagemaker)",
        [allow(), {"Effect": "Deny", "NotAction": "sagemaker:*", "Resource": "*"}],
        {},
        ALLOWED,
    ),
    # -- Resource: ARN wildcards, part by part, case-sensitive, NotResource
    ("resource *", [allow(Resource="*")], {}, ALLOWED),
    ("endpoint/*", [allow(Resource="arn:aws:sagemaker:us-east-1:111122223333:endpoint/*")], {}, ALLOWED),
    ("any region and account", [allow(Resource="arn:aws:sagemaker:*:*:endpoint/endpoint_*")], {}, ALLOWED),
    ("? in the name", [allow(Resource="arn:aws:sagemaker:*:*:endpoint/endpoint_nam?")], {}, ALLOWED),
    ("another account", [allow(Resource="arn:aws:sagemaker:*:444455556666:endpoint/*")], {}, IMPLICIT),
    (
        "upper-case name never matches",
        [allow(Resource=ENDPOINT.replace("endpoint_name", "Endpoint_Name"))],
        {},
        IMPLICIT,
    ),
    (
        "endpoint-config is not endpoint",
        [allow(Resource="arn:aws:sagemaker:*:*:endpoint-config/*")],
        {},
        IMPLICIT,
    ),
    ("NotResource", [{"Effect": "Allow", "Action": INVOKE, "NotResource": OTHER}], {}, ALLOWED),
    (
        "NotResource excludes it",
        [{"Effect": "Allow", "Action": INVOKE, "NotResource": ENDPOINT}],
        {},
        IMPLICIT,
    ),
    # -- StringEquals / StringNotEquals (case-sensitive; several values: any / none)
    ("StringEquals", [allow({"StringEquals": {HOST: "first"}})], {"host": "first"}, ALLOWED),
    (
        "StringEquals is case-sensitive",
        [allow({"StringEquals": {HOST: "first"}})],
        {"host": "First"},
        IMPLICIT,
    ),
    ("StringEquals: no wildcards", [allow({"StringEquals": {HOST: "fir*"}})], {"host": "first"}, IMPLICIT),
    (
        "StringEquals: any of the values",
        [allow({"StringEquals": {HOST: ["a", "first"]}})],
        {"host": "first"},
        ALLOWED,
    ),
    ("StringEquals: key absent", [allow({"StringEquals": {HOST: "first"}})], {}, IMPLICIT),
    (
        "key names are case-insensitive",
        [allow({"StringEquals": {HOST.upper(): "first"}})],
        {"host": "first"},
        ALLOWED,
    ),
    ("StringNotEquals", [allow({"StringNotEquals": {HOST: "first"}})], {"host": "second"}, ALLOWED),
    (
        "StringNotEquals: the value",
        [allow({"StringNotEquals": {HOST: "first"}})],
        {"host": "first"},
        IMPLICIT,
    ),
    (
        "StringNotEquals: none of the values",
        [allow({"StringNotEquals": {HOST: ["a", "b"]}})],
        {"host": "b"},
        IMPLICIT,
    ),
    ("StringNotEquals: key absent -> true", [allow({"StringNotEquals": {HOST: "first"}})], {}, ALLOWED),
    (
        "Deny StringNotEquals: key absent denies",
        [allow(), deny({"StringNotEquals": {HOST: "first"}})],
        {},
        EXPLICIT,
    ),
    (
        "StringEqualsIgnoreCase",
        [allow({"StringEqualsIgnoreCase": {HOST: "FIRST"}})],
        {"host": "first"},
        ALLOWED,
    ),
    (
        "StringNotEqualsIgnoreCase",
        [allow({"StringNotEqualsIgnoreCase": {HOST: "FIRST"}})],
        {"host": "first"},
        IMPLICIT,
    ),
    # -- StringLike / StringNotLike with * and ?
    ("StringLike *", [allow({"StringLike": {HOST: "team-a-*"}})], {"host": "team-a-x1"}, ALLOWED),
    (
        "StringLike * matches nothing too",
        [allow({"StringLike": {HOST: "team-a-*"}})],
        {"host": "team-a-"},
        ALLOWED,
    ),
    ("StringLike ?", [allow({"StringLike": {HOST: "model?"}})], {"host": "model1"}, ALLOWED),
    (
        "StringLike ? is one character",
        [allow({"StringLike": {HOST: "model?"}})],
        {"host": "model12"},
        IMPLICIT,
    ),
    ("StringLike whole value", [allow({"StringLike": {HOST: "model"}})], {"host": "model1"}, IMPLICIT),
    (
        "StringLike: regex characters are literal",
        [allow({"StringLike": {HOST: "a.c"}})],
        {"host": "abc"},
        IMPLICIT,
    ),
    ("StringLike: key absent", [allow({"StringLike": {HOST: "*"}})], {}, IMPLICIT),
    ("StringNotLike", [allow({"StringNotLike": {HOST: "secret*"}})], {"host": "public"}, ALLOWED),
    ("StringNotLike: a match", [allow({"StringNotLike": {HOST: "secret*"}})], {"host": "secret-1"}, IMPLICIT),
    ("StringNotLike: key absent -> true", [allow({"StringNotLike": {HOST: "secret*"}})], {}, ALLOWED),
    # -- ...IfExists
    ("StringEqualsIfExists: absent", [allow({"StringEqualsIfExists": {HOST: "first"}})], {}, ALLOWED),
    (
        "StringEqualsIfExists: present",
        [allow({"StringEqualsIfExists": {HOST: "first"}})],
        {"host": "x"},
        IMPLICIT,
    ),
    (
        "StringLikeIfExists: present match",
        [allow({"StringLikeIfExists": {HOST: "f*"}})],
        {"host": "first"},
        ALLOWED,
    ),
    # IfExists is true when the key is absent: a Deny with it denies the requests without the key
    (
        "Deny StringNotLikeIfExists: absent denies",
        [allow(), deny({"StringNotLikeIfExists": {HOST: "o*"}})],
        {},
        EXPLICIT,
    ),
    (
        "Deny StringLikeIfExists: absent denies",
        [allow(), deny({"StringLikeIfExists": {HOST: "x*"}})],
        {},
        EXPLICIT,
    ),
    ("Deny StringLike: absent does not", [allow(), deny({"StringLike": {HOST: "x*"}})], {}, ALLOWED),
    (
        "Deny StringNotLikeIfExists: other",
        [allow(), deny({"StringNotLikeIfExists": {HOST: "ok*"}})],
        {"host": "no"},
        EXPLICIT,
    ),
    # -- Null
    ("Null true: absent", [allow({"Null": {HOST: "true"}})], {}, ALLOWED),
    ("Null true: present", [allow({"Null": {HOST: "true"}})], {"host": "a"}, IMPLICIT),
    ("Null false: present", [allow({"Null": {HOST: "false"}})], {"host": "a"}, ALLOWED),
    ("Deny Null true (a hostname required)", [allow(), deny({"Null": {HOST: True}})], {}, EXPLICIT),
    # -- ForAnyValue / ForAllValues (over the one value of a single-valued key; absent: any false, all true)
    (
        "ForAnyValue:StringLike",
        [allow({"ForAnyValue:StringLike": {HOST: ["a*", "b*"]}})],
        {"host": "b1"},
        ALLOWED,
    ),
    (
        "ForAnyValue:StringLike: none",
        [allow({"ForAnyValue:StringLike": {HOST: "a*"}})],
        {"host": "b1"},
        IMPLICIT,
    ),
    ("ForAnyValue:StringEquals: absent", [allow({"ForAnyValue:StringEquals": {HOST: "a"}})], {}, IMPLICIT),
    (
        "ForAllValues:StringEquals: absent -> true",
        [allow({"ForAllValues:StringEquals": {HOST: "a"}})],
        {},
        ALLOWED,
    ),
    (
        "ForAllValues:StringEquals: match",
        [allow({"ForAllValues:StringEquals": {HOST: ["a", "b"]}})],
        {"host": "b"},
        ALLOWED,
    ),
    (
        "ForAllValues:StringEquals: other",
        [allow({"ForAllValues:StringEquals": {HOST: "a"}})],
        {"host": "c"},
        IMPLICIT,
    ),
    (
        "ForAnyValue:StringNotLike",
        [allow({"ForAnyValue:StringNotLike": {HOST: "a*"}})],
        {"host": "b"},
        ALLOWED,
    ),
    (
        "ForAllValues:StringNotEquals",
        [allow({"ForAllValues:StringNotEquals": {HOST: "a"}})],
        {"host": "a"},
        IMPLICIT,
    ),
    # -- several keys and operators: all must hold
    (
        "two operators, both hold",
        [allow({"StringLike": {HOST: "a*"}, "StringNotEquals": {HOST: "a-secret"}})],
        {"host": "a-1"},
        ALLOWED,
    ),
    (
        "two operators, one fails",
        [allow({"StringLike": {HOST: "a*"}, "StringNotEquals": {HOST: "a-secret"}})],
        {"host": "a-secret"},
        IMPLICIT,
    ),
    (
        "two keys, one absent",
        [allow({"StringEquals": {HOST: "a", "aws:RequestedRegion": "us-east-1"}})],
        {"host": "a"},
        IMPLICIT,
    ),
    # -- global keys smlocal supplies (Bool, Arn*)
    (
        "aws:PrincipalArn ArnLike",
        [allow({"ArnLike": {"aws:PrincipalArn": "arn:aws:iam::*:user/team-*"}})],
        {"context": {"aws:principalarn": ("arn:aws:iam::111122223333:user/team-a",)}},
        ALLOWED,
    ),
    (
        "Bool aws:SecureTransport false",
        [allow(), deny({"Bool": {"aws:SecureTransport": "false"}})],
        {"context": {"aws:securetransport": ("false",)}},
        EXPLICIT,
    ),
]


@pytest.mark.parametrize(("case", "statements", "request_", "expected"), TABLE, ids=[t[0] for t in TABLE])
def test_decision_table(
    case: str, statements: list[dict[str, Any]], request_: dict[str, Any], expected: Decision
) -> None:
    assert decide(statements, **request_) is expected, case


def test_several_policies_of_one_identity_combine() -> None:
    policies = [parse_policy(doc(allow())), parse_policy(doc(deny({"StringEquals": {HOST: "x"}})))]
    request = Request(INVOKE, ENDPOINT, {HOST.lower(): ("x",)})
    assert evaluate(policies, request) is EXPLICIT
    assert evaluate(policies, Request(INVOKE, ENDPOINT, {HOST.lower(): ("y",)})) is ALLOWED
    assert evaluate([], request) is IMPLICIT


@pytest.mark.parametrize(
    ("pattern", "arn", "matches"),
    [
        ("arn:aws:sagemaker:*:*:endpoint/*", ENDPOINT, True),
        ("arn:aws:sagemaker:*", ENDPOINT, False),  # six parts or nothing
        ("arn:aws:sagemaker:us-*:111122223333:*", ENDPOINT, True),
        ("arn:aws:sagemaker:eu-*:111122223333:*", ENDPOINT, False),
        ("arn:aws:*:us-east-1:111122223333:endpoint/endpoint_name", ENDPOINT, True),
        (
            "arn:aws:sagemaker:us-east-1:111122223333:endpoint/a:b",
            "arn:aws:sagemaker:us-east-1:111122223333:endpoint/a:b",
            True,
        ),
    ],
)
def test_arn_matching_part_by_part(pattern: str, arn: str, matches: bool) -> None:
    assert arn_matches(pattern, arn) is matches


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"Statement": []}, "Statement must be a statement or a non-empty list of them"),
        ({"Version": "2020-01-01", "Statement": [allow()]}, "Version must be one of 2012-10-17, 2008-10-17"),
        (doc({**allow(), "Effect": "allow"}), "Effect must be Allow or Deny, not 'allow'"),
        (doc({"Effect": "Allow", "Resource": "*"}), "give exactly one of Action and NotAction"),
        (doc({"Effect": "Allow", "Action": INVOKE}), "give exactly one of Resource and NotResource"),
        (doc(allow(Action="InvokeEndpoint")), "action 'InvokeEndpoint' must be prefaced by a service"),
        (doc(allow(Resource="endpoint/x")), 'Resource endpoint/x must be in ARN format or "*"'),
        (doc({**allow(), "Principal": "*"}), "Has prohibited field Principal"),
        (doc({**allow(), "Conditions": {}}), "unknown field(s) Conditions"),
        (doc(allow({"NumericLessThan": {"aws:MultiFactorAuthAge": "3600"}})), "is not supported by smlocal"),
        (
            doc(allow({"ForOneValue:StringLike": {HOST: "a"}})),
            "unknown condition operator qualifier 'ForOneValue'",
        ),
        (
            doc(allow({"StringLike": {HOST: "${aws:username}-*"}})),
            "policy variables (${...}) are not supported",
        ),
        (doc(allow({"StringLike": {HOST: []}})), "no values"),
        (doc(allow({"StringLike": {HOST: {"a": 1}}})), "values must be strings"),
        (doc(allow({"ForAnyValue:Null": {HOST: "true"}})), "Null takes no qualifier and no IfExists"),
    ],
)
def test_documents_iam_would_refuse_are_refused_with_the_statement_named(
    document: dict[str, Any], message: str
) -> None:
    with pytest.raises(PolicyFileInvalid) as exc:
        parse_policy(document, "identity AK, policy 1")
    assert message in exc.value.message
    assert exc.value.message.startswith("identity AK, policy 1")


ALICE = "arn:aws:iam::123456789012:user/alice"
FILE = {
    "identities": {
        "AKIAALICE": {"arn": ALICE, "policies": [doc(allow(Resource="*"))]},
        "AKIABOB": {
            "arn": "arn:aws:sts::123456789012:assumed-role/reader/bob",
            "policies": [
                json.dumps(doc(allow(Resource="*"), deny({"StringLike": {HOST: "secret*"}}, Resource="*")))
            ],
        },
    },
    "default": {"arn": "arn:aws:iam::123456789012:user/anyone", "policies": []},
}


def test_the_file_maps_access_keys_to_identities_and_a_default() -> None:
    policies = AccessPolicies.parse(json.dumps(FILE), "us-east-1")
    policies.authorize("AKIAALICE", INVOKE, ENDPOINT, {HOST: "secret-1"})
    policies.authorize("AKIABOB", INVOKE, ENDPOINT, {HOST: "public"})
    with pytest.raises(AccessDenied) as exc:
        policies.authorize("AKIABOB", INVOKE, ENDPOINT, {HOST: "secret-1"})
    assert exc.value.message == (
        "User: arn:aws:sts::123456789012:assumed-role/reader/bob is not authorized to perform: "
        f"sagemaker:InvokeEndpoint on resource: {ENDPOINT} with an explicit deny in an identity-based policy"
    )
    with pytest.raises(AccessDenied) as exc:
        policies.authorize("AKIAOTHER", INVOKE, ENDPOINT, {})
    assert exc.value.message == (
        "User: arn:aws:iam::123456789012:user/anyone is not authorized to perform: sagemaker:InvokeEndpoint "
        f"on resource: {ENDPOINT} because no identity-based policy allows the sagemaker:InvokeEndpoint action"
    )
    with pytest.raises(MissingAuthentication, match="Missing Authentication Token"):
        policies.authorize(None, INVOKE, ENDPOINT, {})


def test_without_a_default_an_unknown_access_key_is_unrecognized() -> None:
    policies = AccessPolicies.parse(json.dumps({"identities": FILE["identities"]}), "us-east-1")
    with pytest.raises(UnrecognizedClient) as exc:
        policies.authorize("AKIAOTHER", INVOKE, ENDPOINT, {})
    assert exc.value.message == "The security token included in the request is invalid."


def test_global_keys_of_the_caller() -> None:
    policy = doc(
        allow(
            {
                "StringEquals": {"aws:username": "alice", "aws:PrincipalAccount": "123456789012"},
                "StringEqualsIfExists": {"aws:RequestedRegion": "us-east-1"},
            },
            Resource="*",
        )
    )
    file = {"identities": {"AK": {"arn": ALICE, "policies": [policy]}}}
    AccessPolicies.parse(json.dumps(file), "us-east-1").authorize("AK", INVOKE, ENDPOINT, {})
    with pytest.raises(AccessDenied):
        AccessPolicies.parse(json.dumps(file), "eu-west-1").authorize("AK", INVOKE, ENDPOINT, {})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "policies file: not JSON"),
        ("[]", "must be an object with identities and/or default"),
        ('{"users": {}}', "unknown field(s) users"),
        ('{"identities": {"AK": {"policies": []}}}', "identity AK: arn must be an IAM ARN"),
        (
            '{"identities": {"AK": {"arn": "arn:aws:iam::1:user/a", "policies": {}}}}',
            "policies must be a list",
        ),
        (
            '{"identities": {"AK": {"arn": "arn:aws:iam::1:user/a", "policies": ["{"]}}}',
            "identity AK, policy 1: not JSON",
        ),
        (
            '{"default": {"arn": "arn:aws:iam::1:user/a", "policies": [{"Statement": {}}]}}',
            "default, policy 1, statement 1",
        ),
    ],
)
def test_a_bad_file_is_refused_with_where(text: str, message: str) -> None:
    with pytest.raises(PolicyFileInvalid) as exc:
        AccessPolicies.parse(text, "us-east-1")
    assert message in exc.value.message


@pytest.mark.parametrize(
    ("headers", "query", "key"),
    [
        (
            {
                "Authorization": "AWS4-HMAC-SHA256 Credential=AKIAALICE/20261201/us-east-1/sagemaker/aws4_request, "
                "SignedHeaders=host;x-amz-date, Signature=abc"
            },
            {},
            "AKIAALICE",
        ),
        ({"Authorization": "AWS4-HMAC-SHA256 SignedHeaders=host, Signature=abc"}, {}, None),
        ({"Authorization": "AWS4-HMAC-SHA256 Credential=/20261201/x"}, {}, None),
        ({}, {"X-Amz-Credential": "AKIAQ/20261201/us-east-1/sagemaker/aws4_request"}, "AKIAQ"),
        ({}, {}, None),
    ],
)
def test_the_caller_is_the_sigv4_credential(
    headers: dict[str, str], query: dict[str, str], key: str | None
) -> None:
    assert access_key_id(headers, query) == key


def test_texts_are_aws() -> None:
    assert not_authorized("arn:aws:iam::1:user/a", INVOKE, ENDPOINT, IMPLICIT).endswith(
        "because no identity-based policy allows the sagemaker:InvokeEndpoint action"
    )
    assert not_authorized("arn:aws:iam::1:user/a", INVOKE, ENDPOINT, EXPLICIT).endswith(
        "with an explicit deny in an identity-based policy"
    )
