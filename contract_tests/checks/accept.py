"""accept.concurrent: a new connection is answered while an invocation is in flight (hosting contract §3.3).

A generic checker cannot make the model slow, so it holds a request in flight itself: the request line,
headers and all but the last byte of the body, on a connection the server has just answered. A server
that handles one connection at a time cannot answer a second connection's GET /ping until then.
"""

from __future__ import annotations

import http.client
import socket
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from contract_tests.checks.calls import container_note, slow, timed_out
from contract_tests.registry import check
from contract_tests.result import CheckFailed, CheckSkipped
from contract_tests.running import RunningContainer
from contract_tests.sockets import readable
from contract_tests.target import CheckContext

#: How many times accept.concurrent measures before it fails (a loaded machine can stall one).
ACCEPT_ATTEMPTS = 2


ACCEPT_FIX = (
    "Serve requests concurrently: use a threaded, multi-worker or async server (ThreadingHTTPServer, "
    "gunicorn with several workers or threads, uvicorn, TorchServe...) so that a request in progress never "
    "keeps the server from accepting and answering another connection."
)


@dataclass
class Measurement:
    """One accept.concurrent attempt."""

    #: seconds from connect to the /ping status line while the invocation was in flight (None: none)
    answered_s: float | None = None
    ping_status: int | None = None
    ping_error: str | None = None
    #: how the invocation was held: on the keep-alive connection of an answered /ping, or a new one
    held_on: str = ""
    #: the container answered (or closed) the unfinished invocation: nothing was in flight
    answered_early: bool = False
    invocation: str = ""
    #: seconds after the held invocation was answered that the /ping was answered (a blocked server)
    late_answer_s: float | None = None

    def describe(self, wait_s: float) -> str:
        if self.answered_s is not None:
            return f"HTTP {self.ping_status} in {self.answered_s * 1000:.0f} ms"
        text = self.ping_error or f"no answer within {wait_s:g} s"
        if self.late_answer_s is not None:
            text += f" (answered {self.late_answer_s * 1000:.0f} ms after the held invocation completed)"
        return text

    def to_json(self) -> dict[str, object]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in vars(self).items()}


def _read_response(sock: socket.socket, method: str) -> http.client.HTTPResponse:
    response = http.client.HTTPResponse(sock, method=method)
    response.begin()
    response.read()
    return response


def _ping_request(host: str, port: int) -> bytes:
    return f"GET /ping HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()


def _held_connection(host: str, port: int, timeout: float) -> tuple[socket.socket, str]:
    """A connection the server is known to be serving: it has just answered a /ping on it (keep-alive).

    Holding the invocation on such a connection makes the test deterministic: with a proxy between
    client and container, two fresh connections may reach the server in either order. A server that
    closes the connection after each answer gets a fresh connection instead.
    """
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
        try:
            sock.sendall(_ping_request(host, port))
            keep_alive = not _read_response(sock, "GET").will_close
        except BaseException:
            sock.close()
            raise
        if keep_alive:
            return sock, "the keep-alive connection of an answered GET /ping"
        sock.close()
        return socket.create_connection((host, port), timeout=timeout), "a new connection"
    except (OSError, http.client.HTTPException) as exc:
        raise CheckSkipped(f"GET /ping on a new connection failed ({type(exc).__name__}: {exc})") from exc


def _measure(ctx: CheckContext, container: RunningContainer, wait_s: float) -> Measurement:
    """Hold a POST /invocations in flight (body one byte short), time GET /ping on a second connection,
    then finish the invocation and collect both answers, so that the container is left as it was."""
    limits = ctx.config.limits
    url = urlsplit(container.base_url)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    payload = ctx.config.payload
    head = (
        f"POST /invocations HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: {ctx.config.content_type}\r\n"
        f"Content-Length: {len(payload)}\r\nAccept-Encoding: identity\r\n\r\n"
    ).encode()
    # The server is now reading the request: its body (or, for an empty payload, its headers) is unfinished.
    first, rest = (head + payload[:-1], payload[-1:]) if payload else (head[:-2], head[-2:])
    m = Measurement()
    held, m.held_on = _held_connection(host, port, limits.invocation_timeout_s)
    second: socket.socket | None = None
    try:
        held.sendall(first)
        started = time.monotonic()
        try:
            second = socket.create_connection((host, port), timeout=wait_s)
            second.sendall(_ping_request(host, port))
            second.settimeout(max(0.001, wait_s - (time.monotonic() - started)))
            ping = http.client.HTTPResponse(second, method="GET")
            ping.begin()
            m.answered_s, m.ping_status = time.monotonic() - started, ping.status
            ping.read()
        except TimeoutError:
            pass
        except (OSError, http.client.HTTPException) as exc:
            m.ping_error = f"the connection failed ({type(exc).__name__}: {exc or 'no detail'})"
        # Was the invocation really in flight? Anything readable on it now is an early answer or a close.
        m.answered_early = readable(held, 0)
        try:
            held.sendall(rest)
            took = slow(ctx)
            if timed_out(ctx) and m.answered_s is not None:  # not waited out again (invocations.timely)
                m.invocation = "not awaited: the configured payload gets no answer in time"
            elif took is not None and m.answered_s is not None:  # nor a slow answer: nothing left to see
                m.invocation = f"not awaited: one invocation takes {took:.1f} s"
            else:
                response = _read_response(held, "POST")
                m.invocation = f"HTTP {response.status}"
        except (OSError, http.client.HTTPException) as exc:
            m.invocation = f"failed ({type(exc).__name__}: {exc or 'no detail'})"
        finished = time.monotonic()
        held.close()  # a one-connection-at-a-time server keeps reading a keep-alive connection until it ends
        if m.answered_s is None and m.ping_error is None and second is not None:
            try:
                second.settimeout(limits.ping_timeout_s)
                late = http.client.HTTPResponse(second, method="GET")
                late.begin()
                m.late_answer_s = time.monotonic() - finished
                late.read()
            except (OSError, http.client.HTTPException):
                pass
    finally:
        held.close()
        if second is not None:
            second.close()
    return m


@check(
    "accept.concurrent",
    "a new connection is answered while an invocation is in flight",
    "SageMaker sends requests as they arrive and requires the container to accept socket connections "
    "within 250 ms (hosting contract §3.3), including while it is busy with an invocation.",
    ACCEPT_FIX,
    before="""
        from http.server import HTTPServer

        HTTPServer(("0.0.0.0", 8080), Handler).serve_forever()  # one connection at a time
    """,
    after="""
        from http.server import ThreadingHTTPServer

        ThreadingHTTPServer(("0.0.0.0", 8080), Handler).serve_forever()  # a thread per connection
    """,
)
def accept_concurrent(ctx: CheckContext) -> str:
    limits = ctx.config.limits
    container = ctx.target.healthy()
    limit = limits.accept_timeout_s
    wait = max(limits.ping_timeout_s, limit)
    measurements: list[Measurement] = []
    for _ in range(ACCEPT_ATTEMPTS):
        m = _measure(ctx, container, wait)
        measurements.append(m)
        if m.answered_early:
            continue
        if m.answered_s is not None and m.answered_s <= limit:
            break
        if m.late_answer_s is not None and slow(ctx) is not None:
            break  # blocked until the held invocation ended: another attempt would wait that out again
    ctx.evidence["measurements"] = [m.to_json() for m in measurements]
    valid = [m for m in measurements if not m.answered_early]
    if not valid:
        raise CheckSkipped(
            "could not hold an invocation in flight: the container answered (or closed) POST /invocations "
            f"before its body was complete ({measurements[-1].invocation})"
        )
    seen = "; ".join(m.describe(wait) for m in valid)
    good = [m for m in valid if m.answered_s is not None and m.answered_s <= limit]
    if good:
        m = good[0]
        if m.ping_status != 200:
            ctx.warn(
                f"GET /ping was answered HTTP {m.ping_status} while an invocation was in flight: SageMaker "
                "counts an instance whose /ping is not 200 unhealthy"
            )
        return (
            f"GET /ping on a second connection was answered HTTP {m.ping_status} in "
            f"{(m.answered_s or 0) * 1000:.0f} ms while a POST /invocations was in flight "
            f"(limit {limit * 1000:.0f} ms; measured: {seen})"
        )
    blocked = any(m.late_answer_s is not None for m in valid)
    reason = (
        " It was answered only once the held invocation completed: the server handles one connection "
        "at a time."
        if blocked
        else ""
    )
    raise CheckFailed(
        f"while a POST /invocations was in flight (its body not yet complete), GET /ping on a second "
        f"connection was not answered within {limit * 1000:.0f} ms in {len(valid)} attempt(s): {seen}."
        f"{reason} SageMaker requires connections to be accepted within {limit * 1000:.0f} ms while the "
        f"container is busy.{container_note(container)} Fix: {ACCEPT_FIX}",
        accept_timeout_s=limit,
        log_tail=container.log_tail(),
    )
