"""The command line's one way to smlocal's own routes (/_smlocal/...): every call sends the admin header.

The server refuses admin POSTs without `X-Smlocal-Admin: 1` (a header a cross-site form cannot set), so
the CLI and the demo call those routes only through `admin_request` / `admin_stream`. A server that does
not answer becomes ServerUnreachable, one line for the user instead of httpx's traceback.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import httpx

from emulator.errors import SmlocalError

ADMIN_HEADER = "X-Smlocal-Admin"
ADMIN_PATH = "/_smlocal/"


class ServerUnreachable(SmlocalError):
    """No smlocal server answered at the URL (nothing listens, or the connection failed)."""


def _unreachable(url: str, exc: httpx.HTTPError) -> ServerUnreachable:
    detail = str(exc) or type(exc).__name__
    return ServerUnreachable(
        f"No smlocal server answers at {url} ({detail}); start one with `smlocal serve` "
        "or point --endpoint-url at it."
    )


def _headers(extra: Mapping[str, str] | None) -> dict[str, str]:
    return {**(extra or {}), ADMIN_HEADER: "1"}


def admin_request(
    base_url: str,
    method: str,
    path: str,
    *,
    timeout: float = 30,
    headers: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> httpx.Response:
    """One call to `base_url + /_smlocal/path`, with the admin header."""
    url = base_url.rstrip("/") + ADMIN_PATH + path.lstrip("/")
    try:
        return httpx.request(method, url, headers=_headers(headers), timeout=timeout, **kwargs)
    except httpx.HTTPError as exc:
        raise _unreachable(base_url, exc) from exc


@contextmanager
def admin_stream(
    base_url: str, path: str, *, timeout: httpx.Timeout, **kwargs: Any
) -> Iterator[httpx.Response]:
    """A streamed GET of `base_url + /_smlocal/path`, with the admin header."""
    url = base_url.rstrip("/") + ADMIN_PATH + path.lstrip("/")
    try:
        with httpx.stream("GET", url, headers=_headers(None), timeout=timeout, **kwargs) as response:
            yield response
    except httpx.ConnectError as exc:
        raise _unreachable(base_url, exc) from exc


def error_message(response: httpx.Response) -> str:
    """The `message` of smlocal's JSON error body, else the body's text (first line)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    text = response.text.strip().splitlines()
    return text[0] if text else f"HTTP {response.status_code}"
