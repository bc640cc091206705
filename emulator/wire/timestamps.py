"""Timestamp members as clients send them, parsed once, the same way for validation and handlers.

json-1.1 and awsJson1_0 clients (botocore) send epoch seconds as a JSON number; people writing raw
requests send ISO 8601 text; CBOR carries a datetime (tag 1). Anything else, or an instant outside
what a datetime can hold (years 1 to 9999), is not a timestamp: validation reports it as a type
error (json-1.1: SerializationException) before any handler runs. A time without a zone is UTC.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

#: 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z in epoch seconds: datetime's own range.
EPOCH_MIN = -62_135_596_800
EPOCH_MAX = 253_402_300_799


def parse_timestamp(value: Any) -> datetime:
    """The aware datetime of a timestamp member; ValueError when it is not one."""
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if isinstance(value, bool):
        raise ValueError("a boolean is not a timestamp")
    if isinstance(value, int | float):
        return _from_epoch(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return _from_epoch(float(text))
        except ValueError:
            pass
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
        return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
    raise ValueError(f"a {type(value).__name__} is not a timestamp")


def _from_epoch(seconds: float) -> datetime:
    if not math.isfinite(seconds) or not EPOCH_MIN <= seconds <= EPOCH_MAX:
        raise ValueError(f"{seconds} is outside the range of timestamps")
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError) as exc:  # platform limits near the ends of the range
        raise ValueError(str(exc)) from exc


def is_timestamp(value: Any) -> bool:
    try:
        parse_timestamp(value)
    except ValueError:
        return False
    return True
