"""The `sagemaker_clients` fixture's boto3 clients, pointed at one smlocal server.

Credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) when the environment
sets them (a server run with --iam-policies tells callers apart by access key id), else the dummy
pair `smlocal`/`smlocal`. Profiles, SSO and instance metadata are never consulted, so no client
ever looks for AWS. The region is the server's.

No retries: boto3's default retries a 5xx and a throttle quietly, which in a test hides exactly what
the test is for (a 503 from a model that is not ready, a 429 from a busy serverless endpoint). A test
that wants retries makes its own client with `botocore.config.Config(retries=...)`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

#: The dummy credentials used when the environment has none.
DUMMY_KEY = "smlocal"
#: Seconds a client waits for a response: above the emulator's default invocation timeout (60 s).
READ_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class SageMakerClients:
    """boto3 clients of one smlocal server: `sagemaker` (control plane), `runtime`
    (sagemaker-runtime), `autoscaling` (application-autoscaling), `cloudwatch`."""

    sagemaker: Any
    runtime: Any
    autoscaling: Any
    cloudwatch: Any
    url: str
    region: str


def credentials() -> dict[str, str]:
    """boto3 credential arguments: the environment's keys, else the dummy pair."""
    key = os.environ.get("AWS_ACCESS_KEY_ID")
    secret = os.environ.get("AWS_SECRET_ACCESS_KEY")
    if key and secret:
        out = {"aws_access_key_id": key, "aws_secret_access_key": secret}
        token = os.environ.get("AWS_SESSION_TOKEN")
        if token:
            out["aws_session_token"] = token
        return out
    return {"aws_access_key_id": DUMMY_KEY, "aws_secret_access_key": DUMMY_KEY}


def make_client(service: str, url: str, region: str) -> Any:
    """One boto3 client of `service` for the server at url (no retries; see the module)."""
    import boto3
    from botocore.config import Config

    config = Config(
        retries={"mode": "standard", "total_max_attempts": 1},
        connect_timeout=5,
        read_timeout=READ_TIMEOUT_S,
    )
    session = boto3.session.Session(region_name=region, **credentials())
    return session.client(service, endpoint_url=url, config=config)


def make_clients(url: str, region: str) -> SageMakerClients:
    return SageMakerClients(
        sagemaker=make_client("sagemaker", url, region),
        runtime=make_client("sagemaker-runtime", url, region),
        autoscaling=make_client("application-autoscaling", url, region),
        cloudwatch=make_client("cloudwatch", url, region),
        url=url,
        region=region,
    )
