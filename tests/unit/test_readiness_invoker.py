"""emulator.hosting.fleet.readiness and emulator.hosting.fleet.invoker against small servers on 127.0.0.1.

Slow containers are simulated by handlers that wait on a `release` event, set when the test ends,
so no server is left holding a request open. Timing assertions use generous bounds.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import aiohttp
import pytest
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from emulator.errors import (
    ModelErrorResponse,
    ModelResponseTooLarge,
    ModelTimeout,
    ModelUnreachable,
)
from emulator.hosting.fleet.invoker import FaultContext, Invoker
from emulator.hosting.fleet.readiness import Outcome, PingPolicy, wait_until_healthy
from emulator.model import messages
from emulator.model.arns import Account

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ACCOUNT = Account("us-east-1", "123456789012")
CONTEXT = FaultContext(ACCOUNT, "ep")
CAP = 1024


@pytest.fixture
def release() -> asyncio.Event:
    """Set at the end of each test (by `serve`) so that slow handlers return."""
    return asyncio.Event()


@asynccontextmanager
async def serve(release: asyncio.Event, **routes: Handler) -> AsyncIterator[str]:
    """An aiohttp server on 127.0.0.1:<free port>; keys are 'ping' / 'invocations'."""
    app = web.Application()
    for name, handler in routes.items():
        app.router.add_route("*", f"/{name}", handler)
    runner = web.AppRunner(app, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        release.set()
        await runner.cleanup()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


@pytest.fixture
async def invoker() -> AsyncIterator[Invoker]:
    inv = Invoker(max_response_bytes=CAP, timeout_s=5.0)
    await inv.start()
    try:
        yield inv
    finally:
        await inv.close()


# ------------------------------------------------------------------------------------ readiness

FAST = PingPolicy(deadline_s=5.0, attempt_timeout_s=1.0, interval_s=0.02)


async def test_healthy_on_first_200(release: asyncio.Event, session: aiohttp.ClientSession) -> None:
    calls: list[str] = []

    async def ping(request: web.Request) -> web.Response:
        calls.append(request.method)
        return web.Response(text="")

    async with serve(release, ping=ping) as url:
        result = await wait_until_healthy(session, url, FAST, asyncio.Event())
    assert result.outcome is Outcome.HEALTHY
    assert result.attempts == 1
    assert calls == ["GET"]
    assert "200" in result.last_observation
    assert result.elapsed_s < 1.0


async def test_healthy_after_some_failures(release: asyncio.Event, session: aiohttp.ClientSession) -> None:
    statuses = iter([503, 500, 404, 200])

    async def ping(request: web.Request) -> web.Response:
        return web.Response(status=next(statuses))

    async with serve(release, ping=ping) as url:
        result = await wait_until_healthy(session, url, FAST, asyncio.Event())
    assert result.outcome is Outcome.HEALTHY
    assert result.attempts == 4


async def test_timed_out_names_the_last_status(
    release: asyncio.Event, session: aiohttp.ClientSession
) -> None:
    async def ping(request: web.Request) -> web.Response:
        return web.Response(status=503)

    policy = PingPolicy(deadline_s=0.4, attempt_timeout_s=0.2, interval_s=0.05)
    async with serve(release, ping=ping) as url:
        result = await wait_until_healthy(session, url, policy, asyncio.Event())
    assert result.outcome is Outcome.TIMED_OUT
    assert "503" in result.last_observation
    assert result.last_observation == "/ping answered HTTP 503"
    assert result.attempts >= 2
    assert 0.4 <= result.elapsed_s < 1.5


async def test_an_attempt_the_deadline_cut_short_keeps_the_last_real_observation(
    release: asyncio.Event, session: aiohttp.ClientSession
) -> None:
    """A container answering 503 whose last ping the deadline cut to a few ms: the evidence is the 503,
    not 'did not answer within 0.00186 s' (seen in a startup-timeout test)."""
    answered = 0

    async def ping(request: web.Request) -> web.Response:
        nonlocal answered
        answered += 1
        if answered > 1:
            await release.wait()  # every later attempt runs into the deadline
        return web.Response(status=503)

    policy = PingPolicy(deadline_s=0.5, attempt_timeout_s=2.0, interval_s=0.01)
    async with serve(release, ping=ping) as url:
        result = await wait_until_healthy(session, url, policy, asyncio.Event())
    assert result.outcome is Outcome.TIMED_OUT
    assert result.attempts == 2
    assert result.last_observation == "/ping answered HTTP 503"


async def test_slow_ping_counts_as_a_timeout_per_attempt(
    release: asyncio.Event, session: aiohttp.ClientSession
) -> None:
    arrivals = 0

    async def ping(request: web.Request) -> web.Response:
        nonlocal arrivals
        arrivals += 1
        await release.wait()
        return web.Response()

    policy = PingPolicy(deadline_s=0.6, attempt_timeout_s=0.15, interval_s=0.01)
    async with serve(release, ping=ping) as url:
        result = await wait_until_healthy(session, url, policy, asyncio.Event())
    assert result.outcome is Outcome.TIMED_OUT
    assert result.last_observation.startswith("/ping did not answer within ")
    assert result.attempts >= 3  # each attempt gave up after ~0.15 s, not after the whole deadline
    assert arrivals == result.attempts
    assert result.elapsed_s < 1.5


async def test_exited_mid_ping_returns_promptly(
    release: asyncio.Event, session: aiohttp.ClientSession
) -> None:
    ping_arrived = asyncio.Event()
    exited = asyncio.Event()

    async def ping(request: web.Request) -> web.Response:
        ping_arrived.set()
        await release.wait()
        return web.Response()

    async def container_exits() -> None:
        await ping_arrived.wait()
        exited.set()

    policy = PingPolicy(deadline_s=30.0, attempt_timeout_s=20.0, interval_s=5.0)
    async with serve(release, ping=ping) as url:
        started = time.monotonic()
        waiter = asyncio.create_task(container_exits())
        result = await wait_until_healthy(session, url, policy, exited)
        took = time.monotonic() - started
        await waiter
    assert result.outcome is Outcome.EXITED
    assert result.attempts == 1
    assert took < 2.0  # against a 30 s deadline and a 20 s attempt timeout
    assert result.elapsed_s < 2.0


async def test_exited_during_the_poll_interval_returns_promptly(
    release: asyncio.Event, session: aiohttp.ClientSession
) -> None:
    exited = asyncio.Event()
    answered = asyncio.Event()

    async def ping(request: web.Request) -> web.Response:
        answered.set()
        return web.Response(status=503)

    async def container_exits() -> None:
        await answered.wait()
        exited.set()

    policy = PingPolicy(deadline_s=30.0, attempt_timeout_s=5.0, interval_s=20.0)
    async with serve(release, ping=ping) as url:
        started = time.monotonic()
        waiter = asyncio.create_task(container_exits())
        result = await wait_until_healthy(session, url, policy, exited)
        took = time.monotonic() - started
        await waiter
    assert result.outcome is Outcome.EXITED
    assert took < 2.0


async def test_already_exited_makes_no_attempt(session: aiohttp.ClientSession) -> None:
    exited = asyncio.Event()
    exited.set()
    result = await wait_until_healthy(session, f"http://127.0.0.1:{free_port()}", FAST, exited)
    assert result.outcome is Outcome.EXITED
    assert result.attempts == 0


async def test_connection_refused_is_reported(session: aiohttp.ClientSession) -> None:
    policy = PingPolicy(deadline_s=0.3, attempt_timeout_s=0.2, interval_s=0.05)
    result = await wait_until_healthy(session, f"http://127.0.0.1:{free_port()}", policy, asyncio.Event())
    assert result.outcome is Outcome.TIMED_OUT
    assert result.last_observation.startswith("/ping failed: ")
    assert "Connect" in result.last_observation  # ClientConnectorError / connection refused
    assert result.attempts >= 2


async def test_poll_interval_does_not_run_past_the_deadline(
    release: asyncio.Event, session: aiohttp.ClientSession
) -> None:
    async def ping(request: web.Request) -> web.Response:
        await release.wait()
        return web.Response()

    policy = PingPolicy(deadline_s=0.6, attempt_timeout_s=0.5, interval_s=10.0)
    async with serve(release, ping=ping) as url:
        result = await wait_until_healthy(session, url, policy, asyncio.Event())
    assert result.outcome is Outcome.TIMED_OUT
    assert result.elapsed_s < 0.6 + 0.25  # observed: ~1.1 s (0.5 s attempt + 0.6 s "interval")


# -------------------------------------------------------------------------------------- invoker


async def test_invoke_200_returns_body_content_type_and_passed_back_headers(
    release: asyncio.Event, invoker: Invoker
) -> None:
    async def invocations(request: web.Request) -> web.Response:
        assert request.method == "POST"
        data = await request.read()
        return web.Response(
            body=data.upper(),
            headers={
                "Content-Type": "text/csv; charset=utf-8",
                "X-Amzn-SageMaker-Custom-Attributes": "trace=1,model=v2",
                "X-Amzn-SageMaker-New-Session-Id": "sess-1; Expires=2030-01-01T00:00:00Z",
                "X-Not-Passed": "no",
            },
        )

    async with serve(release, invocations=invocations) as url:
        reply = await invoker.invoke(
            URL(f"{url}/invocations"), b"hello", CIMultiDict({"Content-Type": "text/plain"}), CONTEXT
        )
    assert reply.status == 200
    assert reply.body == b"HELLO"
    assert reply.content_type == "text/csv; charset=utf-8"
    assert dict(reply.passed_back) == {
        "X-Amzn-SageMaker-Custom-Attributes": "trace=1,model=v2",
        "X-Amzn-SageMaker-New-Session-Id": "sess-1; Expires=2030-01-01T00:00:00Z",
    }


async def test_invoke_reuses_the_session_for_many_calls(release: asyncio.Event, invoker: Invoker) -> None:
    async def invocations(request: web.Request) -> web.Response:
        return web.Response(body=await request.read())

    async with serve(release, invocations=invocations) as url:
        replies = await asyncio.gather(
            *(
                invoker.invoke(URL(f"{url}/invocations"), str(n).encode(), CIMultiDict(), CONTEXT)
                for n in range(20)
            )
        )
    assert [r.body for r in replies] == [str(n).encode() for n in range(20)]


async def test_invoke_404_is_model_error_response(release: asyncio.Event, invoker: Invoker) -> None:
    async def invocations(request: web.Request) -> web.Response:
        return web.Response(status=404, text="model not loaded")

    async with serve(release, invocations=invocations) as url:
        with pytest.raises(ModelErrorResponse) as info:
            await invoker.invoke(URL(f"{url}/invocations"), b"x", CIMultiDict(), CONTEXT)
    exc = info.value
    assert exc.original_status == 404
    assert exc.original_message == "model not loaded"
    assert exc.log_group_arn == ACCOUNT.log_group_arn("ep")
    assert exc.message == messages.model_error(
        404, "model not loaded", ACCOUNT.console_logs_url("ep"), ACCOUNT.account_id
    )
    assert exc.message.startswith('Received client error (404) from primary with message "model not loaded".')


async def test_invoke_500_is_a_server_error(release: asyncio.Event, invoker: Invoker) -> None:
    async def invocations(request: web.Request) -> web.Response:
        return web.Response(status=500, body=b"\xffboom")

    async with serve(release, invocations=invocations) as url:
        with pytest.raises(ModelErrorResponse) as info:
            await invoker.invoke(URL(f"{url}/invocations"), b"x", CIMultiDict(), CONTEXT)
    assert info.value.original_status == 500
    assert info.value.original_message == "\ufffdboom"
    assert info.value.message.startswith("Received server error (500) from primary")


async def test_invoke_timeout_is_model_timeout(release: asyncio.Event, invoker: Invoker) -> None:
    async def invocations(request: web.Request) -> web.Response:
        await release.wait()
        return web.Response()

    quick = Invoker(max_response_bytes=CAP, timeout_s=0.2)
    await quick.start()
    async with serve(release, invocations=invocations) as url:
        started = time.monotonic()
        with pytest.raises(ModelTimeout) as info:
            await quick.invoke(URL(f"{url}/invocations"), b"x", CIMultiDict(), CONTEXT)
        took = time.monotonic() - started
    await quick.close()
    exc = info.value
    assert exc.original_status == 0
    assert exc.original_message == messages.invocation_timed_out()
    assert exc.original_message.startswith(
        "Your invocation timed out while waiting for a response from container primary."
    )
    assert exc.message.startswith("Received server error (0) from primary with message")
    assert 0.15 <= took < 2.0


async def test_invoke_closed_connection_is_model_unreachable(invoker: Invoker) -> None:
    async def slam(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.close()

    server = await asyncio.start_server(slam, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(ModelUnreachable) as info:
            await invoker.invoke(URL(f"http://127.0.0.1:{port}/invocations"), b"x", CIMultiDict(), CONTEXT)
    finally:
        server.close()
        await server.wait_closed()
    exc = info.value
    assert exc.original_status == 0
    assert exc.original_message == (
        "Container primary closed the connection before sending an HTTP status line: its server may have "
        "died or nothing listens on port 8080 (ServerDisconnectedError: Server disconnected)."
    )
    assert exc.message.startswith(
        f'Received server error (0) from primary with message "{exc.original_message}"'
    )
    assert exc.suspect  # a new connection dropped unanswered: the container looks gone
    assert invoker.stale_retries == 0  # a new connection is never retried


async def test_invoke_connection_refused_is_model_unreachable(invoker: Invoker) -> None:
    with pytest.raises(ModelUnreachable) as info:
        await invoker.invoke(URL(f"http://127.0.0.1:{free_port()}/invocations"), b"x", CIMultiDict(), CONTEXT)
    assert info.value.original_status == 0
    assert info.value.original_message.startswith(
        "Could not connect to container primary: the connection was refused (ClientConnectorError"
    )
    assert info.value.suspect


async def test_invoke_response_over_cap_with_content_length(release: asyncio.Event, invoker: Invoker) -> None:
    async def invocations(request: web.Request) -> web.Response:
        return web.Response(body=b"x" * (CAP + 1))

    async with serve(release, invocations=invocations) as url:
        with pytest.raises(ModelResponseTooLarge) as info:
            await invoker.invoke(URL(f"{url}/invocations"), b"x", CIMultiDict(), CONTEXT)
    assert info.value.original_message == messages.response_too_large(CAP)


async def test_invoke_response_exactly_at_cap_is_fine(release: asyncio.Event, invoker: Invoker) -> None:
    async def invocations(request: web.Request) -> web.Response:
        return web.Response(body=b"y" * CAP)

    async with serve(release, invocations=invocations) as url:
        reply = await invoker.invoke(URL(f"{url}/invocations"), b"x", CIMultiDict(), CONTEXT)
    assert reply.body == b"y" * CAP


def chunked(parts: list[bytes]) -> Handler:
    async def invocations(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for part in parts:
            await resp.write(part)
        await resp.write_eof()
        return resp

    return invocations


async def test_invoke_chunked_response_over_cap(release: asyncio.Event, invoker: Invoker) -> None:
    async with serve(release, invocations=chunked([b"a" * 600, b"b" * 600])) as url:
        with pytest.raises(ModelResponseTooLarge) as info:
            await invoker.invoke(URL(f"{url}/invocations"), b"x", CIMultiDict(), CONTEXT)
    assert info.value.original_status == 0
    assert info.value.original_message == messages.response_too_large(CAP)


async def test_invoke_chunked_response_under_cap(release: asyncio.Event, invoker: Invoker) -> None:
    async with serve(release, invocations=chunked([b"a" * 300, b"b" * 300, b"c" * 300])) as url:
        reply = await invoker.invoke(URL(f"{url}/invocations"), b"x", CIMultiDict(), CONTEXT)
    assert reply.body == b"a" * 300 + b"b" * 300 + b"c" * 300
    assert reply.content_type == "application/octet-stream"


TRANSPORT_HEADERS = {"host", "content-length"}


async def received_headers(
    release: asyncio.Event, invoker: Invoker, given: CIMultiDict[str]
) -> dict[str, str]:
    seen: dict[str, str] = {}

    async def invocations(request: web.Request) -> web.Response:
        seen.update({k.lower(): v for k, v in request.headers.items()})
        return web.Response()

    async with serve(release, invocations=invocations) as url:
        await invoker.invoke(URL(f"{url}/invocations"), b'{"a": 1}', given, CONTEXT)
    return {k: v for k, v in seen.items() if k not in TRANSPORT_HEADERS}


async def test_request_carries_exactly_the_given_headers(release: asyncio.Event, invoker: Invoker) -> None:
    given: CIMultiDict[str] = CIMultiDict(
        {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "X-Amzn-SageMaker-Custom-Attributes": "c=1",
        }
    )
    got = await received_headers(release, invoker, given)
    assert got == {k.lower(): v for k, v in given.items()}


async def test_no_auto_content_type_user_agent_or_accept_encoding(
    release: asyncio.Event, invoker: Invoker
) -> None:
    got = await received_headers(release, invoker, CIMultiDict({"Accept": "text/csv"}))
    assert "content-type" not in got
    assert "user-agent" not in got
    assert "accept-encoding" not in got
    assert got == {"accept": "text/csv"}


async def test_no_headers_given_means_none_sent(release: asyncio.Event, invoker: Invoker) -> None:
    """Not even aiohttp's default `Accept: */*` (SageMaker's default when the client sent none is [U])."""
    assert await received_headers(release, invoker, CIMultiDict()) == {}


# ------------------------------------------------ keep-alive races, partial answers and redirects

OK_KEEP_ALIVE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"


@asynccontextmanager
async def raw_server(
    answer: Callable[[int, int], bytes | None],
) -> AsyncIterator[tuple[str, list[tuple[int, int]]]]:
    """A raw HTTP/1.1 server: `answer(connection_no, request_no_on_it)` gives the bytes to send (the
    connection stays open after OK_KEEP_ALIVE, closes after anything else), or None to close it at
    once without answering. Yields (url, requests seen)."""
    seen: list[tuple[int, int]] = []
    connections = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        conn, n = connections, 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                await reader.readexactly(length)
                n += 1
                seen.append((conn, n))
                data = answer(conn, n)
                if data is None:
                    break
                writer.write(data)
                await writer.drain()
                if data != OK_KEEP_ALIVE:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/invocations", seen
    finally:
        server.close()
        await server.wait_closed()


async def test_a_pooled_connection_closed_unanswered_is_retried_once_on_a_new_one(invoker: Invoker) -> None:
    """The keep-alive race, made deterministic: the server closes the pooled connection as the second
    request arrives on it (as gunicorn/aiohttp do when their idle timer fires), without a byte."""
    async with raw_server(lambda conn, n: OK_KEEP_ALIVE if (conn, n) != (1, 2) else None) as (url, seen):
        first = await invoker.invoke(URL(url), b"a", CIMultiDict(), CONTEXT)
        second = await invoker.invoke(URL(url), b"b", CIMultiDict(), CONTEXT)
    assert (first.body, second.body) == (b"ok", b"ok")
    assert seen == [(1, 1), (1, 2), (2, 1)]  # the retry went out on a new connection
    assert invoker.stale_retries == 1


async def test_a_retry_that_fails_too_is_not_retried_again(invoker: Invoker) -> None:
    async with raw_server(lambda conn, n: OK_KEEP_ALIVE if conn == 1 and n == 1 else None) as (url, seen):
        await invoker.invoke(URL(url), b"a", CIMultiDict(), CONTEXT)
        with pytest.raises(ModelUnreachable) as info:
            await invoker.invoke(URL(url), b"b", CIMultiDict(), CONTEXT)
    assert seen == [(1, 1), (1, 2), (2, 1)]
    assert info.value.suspect  # the new connection was dropped too: the container looks gone
    assert invoker.stale_retries == 1


async def test_a_partial_status_line_on_a_pooled_connection_is_not_retried(invoker: Invoker) -> None:
    """A byte of answer means the container read the request: never sent twice."""
    answers = {(1, 1): OK_KEEP_ALIVE, (1, 2): b"HTTP/1.1 20"}
    async with raw_server(lambda conn, n: answers.get((conn, n), OK_KEEP_ALIVE)) as (url, seen):
        await invoker.invoke(URL(url), b"a", CIMultiDict(), CONTEXT)
        with pytest.raises(ModelUnreachable) as info:
            await invoker.invoke(URL(url), b"b", CIMultiDict(), CONTEXT)
    assert seen == [(1, 1), (1, 2)]
    assert invoker.stale_retries == 0
    assert not info.value.suspect
    assert info.value.original_message == (
        "Container primary closed the connection before sending an HTTP status line: its server may have "
        "died or nothing listens on port 8080 (ServerDisconnectedError: after a partial status line)."
    )


async def test_a_drop_mid_body_is_not_retried_and_says_so(invoker: Invoker) -> None:
    partial = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"
    async with raw_server(lambda conn, n: partial if n == 1 and conn == 1 else OK_KEEP_ALIVE) as (url, seen):
        with pytest.raises(ModelUnreachable) as info:
            await invoker.invoke(URL(url), b"a", CIMultiDict(), CONTEXT)
    assert seen == [(1, 1)]
    assert not info.value.suspect
    assert info.value.original_status == 0
    assert info.value.original_message.startswith(
        "Container primary closed the connection before the whole response was sent (ClientPayloadError: "
    )


def redirecting(hits: list[str]) -> dict[str, Handler]:
    """/ping and /invocations answer 307 to /target, which records every hit."""

    async def target(request: web.Request) -> web.Response:
        hits.append(request.method)
        return web.Response(text="you followed me")

    async def redirect(request: web.Request) -> web.Response:
        await request.read()
        raise web.HTTPTemporaryRedirect("/target", text="moved")

    return {"ping": redirect, "invocations": redirect, "target": target}


async def test_invoke_3xx_is_a_model_error_and_never_followed(
    release: asyncio.Event, invoker: Invoker
) -> None:
    hits: list[str] = []
    async with serve(release, **redirecting(hits)) as url:
        with pytest.raises(ModelErrorResponse) as info:
            await invoker.invoke(URL(f"{url}/invocations"), b"secret", CIMultiDict(), CONTEXT)
    assert hits == []
    exc = info.value
    assert exc.original_status == 307
    assert exc.original_message == "moved"
    assert exc.message == messages.model_error(
        307, "moved", ACCOUNT.console_logs_url("ep"), ACCOUNT.account_id
    )
    assert exc.message.startswith('Received server error (307) from primary with message "moved".')


async def test_ping_3xx_is_not_healthy_and_never_followed(
    release: asyncio.Event, session: aiohttp.ClientSession
) -> None:
    from emulator.hosting.endpoints import health

    hits: list[str] = []
    policy = PingPolicy(deadline_s=0.3, attempt_timeout_s=0.2, interval_s=0.05)
    async with serve(release, **redirecting(hits)) as url:
        result = await wait_until_healthy(session, url, policy, asyncio.Event())
        steady = await health.ping(session, url, 1.0)
    assert result.outcome is Outcome.TIMED_OUT
    assert result.last_observation == "/ping answered HTTP 307"
    assert steady is False
    assert hits == []
