"""The runtime's authorization step (`smlocal serve --iam-policies`): who calls, and may they.

IAM decides before the service validates a request, so InvokeEndpoint runs this right after the
request's members are read and checked against botocore's model, before any of SageMaker's own
checks (an unknown endpoint, a TargetContainerHostname the endpoint does not take). Without the
option the handler is given no AccessCheck and the invoke path does nothing more than before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from emulator.model.arns import Account
from emulator.model.iam_access import INVOKE_ENDPOINT, TARGET_CONTAINER_HOSTNAME, TARGET_MODEL, AccessPolicies

_CREDENTIAL = "Credential="


def access_key_id(headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
    """The access key id of a SigV4 request: `Authorization: AWS4-HMAC-SHA256 Credential=AKID/date/
    region/service/aws4_request, ...`, or a presigned URL's `X-Amz-Credential`."""
    authorization = headers.get("Authorization")
    if authorization is not None:
        start = authorization.find(_CREDENTIAL)
        if start < 0:
            return None
        key = authorization[start + len(_CREDENTIAL) :].split("/", 1)[0].strip()
        return key or None
    credential = query.get("X-Amz-Credential")
    return credential.split("/", 1)[0] or None if credential else None


class AccessCheck:
    """An invoke operation's authorization against the loaded policies: raises AccessDenied (403).
    `action` is the IAM action the operation needs: sagemaker:InvokeEndpoint (InvokeEndpoint and
    InvokeEndpointWithResponseStream) or sagemaker:InvokeEndpointAsync."""

    def __init__(self, policies: AccessPolicies, account: Account) -> None:
        self.policies = policies
        self.account = account

    def invoke_endpoint(
        self,
        headers: Mapping[str, str],
        query: Mapping[str, str],
        members: dict[str, Any],
        action: str = INVOKE_ENDPOINT,
    ) -> None:
        keys: dict[str, str] = {}
        hostname = members.get("TargetContainerHostname")
        if hostname is not None:
            keys[TARGET_CONTAINER_HOSTNAME] = hostname
        target_model = members.get("TargetModel")
        if target_model is not None:
            keys[TARGET_MODEL] = target_model
        self.policies.authorize(
            access_key_id(headers, query),
            action,
            self.account.endpoint_arn(members["EndpointName"]),
            keys,
        )
