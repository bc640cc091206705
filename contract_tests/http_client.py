"""The HTTP client every check and SageMakerContainer talks to a container with.

A container sees what SageMaker forwards: the caller's own headers and no others. boto3 sends no
Accept (nor Accept-Encoding) unless the caller gives one (shared/spec/hosting-contract.md §1.3), and
smlocal's invoker adds none, so neither may the checks: httpx's defaults (`Accept: */*`,
`Accept-Encoding: gzip, deflate, ...`, `User-Agent: python-httpx/...`) are dropped. An image whose
server refuses a request without an Accept header (Flask's `request.accept_mimetypes.accept_json` is
false then) fails the invocation checks here as every endpoint call would fail it.
"""

from __future__ import annotations

from typing import Any

import httpx

#: httpx's default request headers that SageMaker's callers do not send (Connection and Host stay).
_DROPPED_DEFAULTS = ("Accept", "Accept-Encoding", "User-Agent")


def container_client(**options: Any) -> httpx.Client:
    """An httpx.Client (`options` as httpx takes them) that sends only the headers a request names."""
    client = httpx.Client(**options)
    for name in _DROPPED_DEFAULTS:
        client.headers.pop(name, None)
    return client
