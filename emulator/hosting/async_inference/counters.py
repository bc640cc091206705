"""What an asynchronous endpoint's workers count (the async metrics of spec §8) and where their
metric samples go."""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass, field

#: How many of the latest requests' times in the backlog the counters keep.
BACKLOG_SAMPLES = 1000


@dataclass
class Counters:
    """What the endpoint's metrics read (the async metrics of spec §8)."""

    processed: int = 0
    failures: int = 0
    expired: int = 0
    download_failures: int = 0
    upload_failures: int = 0
    notification_failures: int = 0
    errors_4xx: int = 0
    errors_5xx: int = 0
    #: seconds each of the latest BACKLOG_SAMPLES requests waited in the queue
    time_in_backlog_s: collections.deque[float] = field(
        default_factory=lambda: collections.deque(maxlen=BACKLOG_SAMPLES)
    )
    #: requests put back in the queue because smlocal retired their instance mid-run
    requeued: int = 0


def _no_record(endpoint: str, variant: str | None, name: str, value: float) -> None:
    return None


def _no_invocation(endpoint: str, variant: str, status: int, model_s: float, total_s: float) -> None:
    return None


@dataclass
class AsyncMetrics:
    """Where the workers' metrics go (app.py points them at the metric store; nowhere by default).
    `record(endpoint, variant or None for the endpoint's own, metric name, value)`;
    `invocation(endpoint, variant, the container's HTTP status (0: no answer), model s, total s)`."""

    record: Callable[[str, str | None, str, float], None] = _no_record
    invocation: Callable[[str, str, int, float, float], None] = _no_invocation
