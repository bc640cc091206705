"""`smlocal serve --iam-policies FILE`: who may invoke what, pure (the file is read at the edge).

The file (JSON) attaches identity-based policies to access key ids, and optionally to a default
identity that every other access key id is:

    {
      "identities": {
        "AKIAALICE": {"arn": "arn:aws:iam::123456789012:user/alice", "policies": [{policy}, ...]}
      },
      "default": {"arn": "arn:aws:iam::123456789012:user/anyone", "policies": [...]}
    }

Each policy is a standard IAM policy document (an object, or the same as a JSON string, as IAM's API
takes it). A request's caller is the access key id of its SigV4 `Credential`; its signature is not
checked (smlocal has no secrets to check it with): the file says who a key is, not that the caller
holds it. The texts are AWS's (`User: ... is not authorized to perform: ...`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from emulator.errors import AccessDenied, MissingAuthentication, PolicyFileInvalid, UnrecognizedClient
from emulator.model.iam_policy import Decision, Policy, Request, evaluate, parse_policy

INVOKE_ENDPOINT = "sagemaker:InvokeEndpoint"
#: InvokeEndpointAsync's own action (the service authorization reference lists it apart from
#: InvokeEndpoint; InvokeEndpointWithResponseStream has none of its own and needs InvokeEndpoint).
INVOKE_ENDPOINT_ASYNC = "sagemaker:InvokeEndpointAsync"
#: The condition key IAM documents for InvokeEndpoint on a Direct multi-container endpoint.
TARGET_CONTAINER_HOSTNAME = "sagemaker:targetcontainerhostname"
#: ... and on a multi-model endpoint (the request's TargetModel).
TARGET_MODEL = "sagemaker:targetmodel"

UNRECOGNIZED_CLIENT = "The security token included in the request is invalid."
MISSING_AUTHENTICATION = "Missing Authentication Token"


def not_authorized(caller_arn: str, action: str, resource: str, decision: Decision) -> str:
    reason = (
        "with an explicit deny in an identity-based policy"
        if decision is Decision.EXPLICIT_DENY
        else f"because no identity-based policy allows the {action} action"
    )
    return f"User: {caller_arn} is not authorized to perform: {action} on resource: {resource} {reason}"


@dataclass(frozen=True)
class Identity:
    arn: str
    policies: tuple[Policy, ...]

    def base_context(self, region: str) -> dict[str, tuple[str, ...]]:
        """The global condition keys smlocal knows for this caller (lower-cased names)."""
        context: dict[str, tuple[str, ...]] = {
            "aws:principalarn": (self.arn,),
            "aws:principalaccount": (self.arn.split(":")[4],),
            "aws:requestedregion": (region,),
            "aws:securetransport": ("false",),  # smlocal serves plain HTTP on loopback
        }
        resource = self.arn.split(":", 5)[5]
        if resource.startswith("user/"):
            context["aws:username"] = (resource.rsplit("/", 1)[1],)
        return context


def _identity(where: str, raw: object) -> Identity:
    if not isinstance(raw, dict):
        raise PolicyFileInvalid(f"{where}: an identity must be an object with arn and policies")
    unknown = sorted(set(raw) - {"arn", "policies"})
    if unknown:
        raise PolicyFileInvalid(f"{where}: unknown field(s) {', '.join(unknown)}")
    arn = raw.get("arn")
    if not isinstance(arn, str) or not arn.startswith("arn:") or len(arn.split(":", 5)) != 6:
        raise PolicyFileInvalid(f"{where}: arn must be an IAM ARN, e.g. arn:aws:iam::123456789012:user/alice")
    policies = raw.get("policies", [])
    if not isinstance(policies, list):
        raise PolicyFileInvalid(f"{where}: policies must be a list of policy documents")
    parsed = []
    for i, document in enumerate(policies):
        label = f"{where}, policy {i + 1}"
        if isinstance(document, str):
            try:
                document = json.loads(document)
            except ValueError as exc:
                raise PolicyFileInvalid(f"{label}: not JSON: {exc}") from None
        parsed.append(parse_policy(document, label))
    return Identity(arn, tuple(parsed))


@dataclass(frozen=True)
class AccessPolicies:
    """The identities of a policies file, and the decisions over them."""

    identities: Mapping[str, Identity]
    default: Identity | None
    region: str
    _base_contexts: dict[str, dict[str, tuple[str, ...]]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        everyone = [*self.identities.values(), *([self.default] if self.default else [])]
        contexts = {i.arn: i.base_context(self.region) for i in everyone}
        object.__setattr__(self, "_base_contexts", contexts)

    @classmethod
    def parse(cls, text: str, region: str, source: str = "policies file") -> AccessPolicies:
        try:
            document = json.loads(text)
        except ValueError as exc:
            raise PolicyFileInvalid(f"{source}: not JSON: {exc}") from None
        if not isinstance(document, dict):
            raise PolicyFileInvalid(f"{source}: must be an object with identities and/or default")
        unknown = sorted(set(document) - {"identities", "default"})
        if unknown:
            raise PolicyFileInvalid(f"{source}: unknown field(s) {', '.join(unknown)}")
        raw_identities = document.get("identities", {})
        if not isinstance(raw_identities, dict):
            raise PolicyFileInvalid(f"{source}: identities must map access key ids to identities")
        identities = {key: _identity(f"{source}: identity {key}", raw) for key, raw in raw_identities.items()}
        default = document.get("default")
        return cls(identities, None if default is None else _identity(f"{source}: default", default), region)

    def caller(self, access_key_id: str | None) -> Identity:
        if access_key_id is None:
            raise MissingAuthentication(MISSING_AUTHENTICATION)
        identity = self.identities.get(access_key_id, self.default)
        if identity is None:
            raise UnrecognizedClient(UNRECOGNIZED_CLIENT)
        return identity

    def authorize(
        self, access_key_id: str | None, action: str, resource: str, keys: Mapping[str, str]
    ) -> None:
        """Raise the error AWS answers unless the caller's policies allow `action` on `resource`;
        `keys` are the request's own condition keys (names as IAM writes them)."""
        identity = self.caller(access_key_id)
        context = dict(self._base_contexts[identity.arn])
        for name, value in keys.items():
            context[name.lower()] = (value,)
        decision = evaluate(identity.policies, Request(action, resource, context))
        if decision is not Decision.ALLOWED:
            raise AccessDenied(not_authorized(identity.arn, action, resource, decision))
