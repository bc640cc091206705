"""What the request and response halves share: JSON, timestamps, tags, local model data URIs."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from emulator.wire.unsupported import REFUSED_MEMBERS, unsupported

__all__ = [
    "JSON",
    "LOCAL_URI_PREFIXES",
    "epoch_seconds",
    "is_local_uri",
    "refuse_members",
    "tags_input",
    "unsupported",
]

JSON = dict[str, Any]

LOCAL_URI_PREFIXES = ("file://", "/", "./", "../")


def is_local_uri(uri: str) -> bool:
    """smlocal's extension: model data may be a local path or file:// URL as well as s3://."""
    return uri.startswith(LOCAL_URI_PREFIXES) or "://" not in uri


def epoch_seconds(value: datetime) -> float:
    return value.timestamp()


def tags_input(params: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple((t["Key"], t.get("Value", "")) for t in params.get("Tags") or ())


def refuse_members(shape: str, params: Mapping[str, Any]) -> None:
    """Refuse the first member of `params` (a structure of botocore's shape `shape`) that REFUSED_MEMBERS
    names: the wire refuses them before any handler runs; this refuses them again for callers that
    parse without the wire's check (tests, the service's own callers)."""
    for member, feature in REFUSED_MEMBERS.get(shape, {}).items():
        if member in params:
            raise unsupported(feature)
