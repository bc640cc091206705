"""How a client command reaches a running smlocal server: its URL, and boto3 clients for it.

The URL comes from --endpoint-url, else $SMLOCAL_ENDPOINT_URL, else $AWS_ENDPOINT_URL_SAGEMAKER, else
the default server's address; the clients answer one attempt each (no retries hiding an error).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from emulator.config import DEFAULT_HOST, DEFAULT_PORT, DEFAULT_REGION

ENDPOINT_URL_ENV = "SMLOCAL_ENDPOINT_URL"


def endpoint_url(args: argparse.Namespace) -> str:
    return str(
        args.endpoint_url
        or os.environ.get(ENDPOINT_URL_ENV)
        or os.environ.get("AWS_ENDPOINT_URL_SAGEMAKER")
        or f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"
    )


def sagemaker_clients(args: argparse.Namespace) -> tuple[Any, Any]:
    import boto3
    from botocore.config import Config

    url = endpoint_url(args)
    session = boto3.session.Session(
        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "smlocal"),
        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "smlocal"),
        region_name=os.environ.get("AWS_DEFAULT_REGION", os.environ.get("AWS_REGION", DEFAULT_REGION)),
    )
    config = Config(retries={"max_attempts": 1, "mode": "standard"}, read_timeout=120)
    return (
        session.client("sagemaker", endpoint_url=url, config=config),
        session.client("sagemaker-runtime", endpoint_url=url, config=config),
    )
