"""What every request passes before any route: the Host check, the admin header, AWS-shaped errors.

* DNS rebinding: a web page on evil.example whose name re-resolves to 127.0.0.1 reaches this
  server with `Host: evil.example`. Only loopback names (localhost, [::1], any 127.x address, with
  or without a port) and the configured host are served; any other Host is refused (403).
* Cross-site requests: a web page can POST to 127.0.0.1 without asking ("simple" requests: no
  custom header, a text/plain, form or multipart body). Every POST/PUT/DELETE under /_smlocal/
  needs the header `X-Smlocal-Admin: 1`, which a browser only sends after a CORS preflight, and
  smlocal answers no preflight (no Access-Control-Allow-* header ever), so the browser never does.
* aiohttp's own HTTP errors (413, 405...) and anything a handler lets escape get an AWS-shaped JSON
  body (`__type`, `message`) and an x-amzn-RequestId header, as every other answer has.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import uuid
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from emulator.wire.errors import plain_error

log = logging.getLogger(__name__)

ADMIN_PREFIX = "/_smlocal/"
ADMIN_HEADER = "X-Smlocal-Admin"
STATE_CHANGING = frozenset({"POST", "PUT", "DELETE", "PATCH"})
LOOPBACK_NAMES = frozenset({"localhost", "::1"})
REQUEST_ID = "x-amzn-RequestId"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def host_name(host: str) -> str:
    """The name part of a Host header value, lower-cased, without port or brackets."""
    host = host.strip().lower()
    if host.startswith("["):  # [::1]:8090
        return host[1 : host.find("]")] if "]" in host else host
    if host.count(":") == 1:  # name:port (a bare IPv6 address has several colons)
        host = host.partition(":")[0]
    return host.rstrip(".")


def is_allowed_host(host: str, configured: str) -> bool:
    name = host_name(host)
    if name in LOOPBACK_NAMES or name == host_name(configured):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def refuse_host(host: str, configured: str) -> str:
    return (
        f"smlocal refuses requests for Host {host!r}: it serves only the loopback names (127.0.0.1, "
        f"localhost, [::1]) and its configured host {configured!r}, so that a web page cannot reach it "
        "through a DNS name that resolves to this machine."
    )


def refuse_admin(method: str, path: str) -> str:
    return (
        f"{method} {path} needs the header {ADMIN_HEADER}: 1. smlocal's admin routes refuse requests "
        "without it so that a web page cannot send them (a browser sends a custom header only after "
        "a CORS preflight, which smlocal never grants)."
    )


def middlewares(configured_host: str) -> list[Middleware]:
    # Every request asks (the invoke path too): a client sends one or two Host values, so the verdict
    # is remembered; bounded, since the values are the client's.
    @functools.lru_cache(maxsize=64)
    def allowed(host: str) -> bool:
        return is_allowed_host(host, configured_host)

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        host = request.headers.get("Host")
        if host is not None and not allowed(host):
            return plain_error(403, "AccessDeniedException", refuse_host(host, configured_host), _rid())
        if (
            request.path.startswith(ADMIN_PREFIX)
            and request.method in STATE_CHANGING
            and request.headers.get(ADMIN_HEADER, "").strip() != "1"
        ):
            message = refuse_admin(request.method, request.path)
            return plain_error(403, "AccessDeniedException", message, _rid())
        try:
            return await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            code = "ValidationException" if exc.status < 500 else "InternalFailure"
            return plain_error(exc.status, code, exc.text or exc.reason or "", _rid())
        except Exception as exc:  # noqa: BLE001 - a bug: still an AWS-shaped answer, and logged
            log.exception("unhandled error in %s %s", request.method, request.path)
            message = f"smlocal internal error: {type(exc).__name__}: {exc}"
            return plain_error(500, "InternalFailure", message, _rid())

    return [guard]


async def add_request_id(request: web.Request, response: web.StreamResponse) -> None:
    """on_response_prepare: every answer carries an x-amzn-RequestId (smlocal's own routes too)."""
    if REQUEST_ID not in response.headers:
        response.headers[REQUEST_ID] = _rid()


def _rid() -> str:
    return str(uuid.uuid4())
