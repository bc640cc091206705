"""Calls a container's POST /invocations. aiohttp client errors are translated here, once.

Every failure of the container becomes a ModelFault (clients see 424 ModelError), never a 5xx that
boto3 would retry. The client session is shared by all instances; connections are kept alive
(see docs/performance.md for the measurement behind that choice).
"""

from __future__ import annotations

import asyncio
import contextvars
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
from multidict import CIMultiDict
from yarl import URL

from emulator.errors import (
    ContainerCall,
    ModelErrorResponse,
    ModelFault,
    ModelResponseTooLarge,
    ModelTimeout,
    ModelUnreachable,
)
from emulator.model import messages
from emulator.model.arns import Account

#: Response headers of the container that SageMaker passes back to the client.
PASSED_BACK = (
    "X-Amzn-SageMaker-Custom-Attributes",
    "X-Amzn-SageMaker-New-Session-Id",
    "X-Amzn-SageMaker-Closed-Session-Id",
)

_NO_AUTO_HEADERS = ("Content-Type", "Accept", "Accept-Encoding", "User-Agent")

#: How long an idle pooled connection is kept. Below the shortest common server timeout (gunicorn's
#: 2 s), so the close-crosses-request race is rare; the retry rule (Invoker) covers any shorter one.
POOL_KEEPALIVE_S = 1.5


@dataclass(frozen=True)
class ContainerReply:
    status: int
    body: bytes
    content_type: str | None
    passed_back: Mapping[str, str]
    #: Seconds the container call took (SageMaker's ModelLatency).
    elapsed_s: float = 0.0
    #: On a multi-container instance, each container call (pipeline.py): their metrics per container.
    calls: tuple[ContainerCall, ...] = ()


@dataclass(frozen=True)
class FaultContext:
    """What a ModelError message needs to name."""

    account: Account
    endpoint_name: str

    def fault(
        self, cls: type[ModelFault], status: int, original: str, container: str = "primary"
    ) -> ModelFault:
        message = messages.model_error(
            status,
            original,
            self.account.console_logs_url(self.endpoint_name),
            self.account.account_id,
            container,
        )
        return cls(message, status, original, self.account.log_group_arn(self.endpoint_name))


@dataclass(frozen=True)
class ResponseCap:
    """A smaller cap than the invocation's for one call, with its own fault: a pipeline's hop
    before the last may hand at most 5 MB to the next (fleet/pipeline.py), with SageMaker's text
    for that. `fault(status, size, exact)`: `size` is the Content-Length (`exact`), else the bytes
    read when the cap was passed."""

    max_bytes: int
    fault: Callable[[int, int, bool], ModelFault]


#: Whether the connection the current task's request got was a reused pooled one (set by
#: _PoolConnector.connect, which runs in the invoking task, read by Invoker.invoke after a failure).
_reused: contextvars.ContextVar[bool] = contextvars.ContextVar("smlocal_invoker_reused", default=False)


class _PoolConnector(aiohttp.TCPConnector):
    """aiohttp's connector, noting whether each request got a connection used before (a set lookup
    per request: cheaper than a TraceConfig, which dispatches a dozen signals per request)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._seen: weakref.WeakSet[object] = weakref.WeakSet()

    async def connect(self, req: Any, traces: Any, timeout: aiohttp.ClientTimeout) -> Any:
        conn = await super().connect(req, traces, timeout)
        protocol = conn.protocol
        _reused.set(protocol in self._seen)
        if protocol is not None:
            self._seen.add(protocol)
        return conn


class DroppedInFlight(aiohttp.ClientError):
    """A pooled connection closed with the request on it and no byte of answer, and the one retry
    on a new connection failed too (refused, or dropped before any byte): the container did not just
    close an idle connection, it went away while the request was in flight (it exited, was killed or
    stopped). Never sent elsewhere: the model may have started on it."""

    def __init__(self, first: aiohttp.ClientError, retry: aiohttp.ClientError) -> None:
        super().__init__(f"{type(first).__name__}: {first}; then {type(retry).__name__}: {retry}")
        self.first = first
        self.retry = retry


def _closed_before_any_byte(exc: aiohttp.ClientError) -> bool:
    """The connection closed or was reset before a single byte of the response arrived.

    aiohttp raises ServerDisconnectedError("Server disconnected") when the parser saw nothing, and
    ServerDisconnectedError(<partial RawResponseMessage>) when a status line had begun; a reset is a
    ClientOSError (ClientConnectorError, its subclass, is a failed connect: handled apart)."""
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return isinstance(exc.message, str)
    return isinstance(exc, aiohttp.ClientOSError) and not isinstance(exc, aiohttp.ClientConnectorError)


class Invoker:
    """One POST per invocation; a request the container never received is retried once.

    The retry rule (docs/api-coverage.md, "Keep-alive connections"): a request written onto a pooled
    connection that the container closes or resets before any byte of a response is sent again, once,
    on a fresh connection. Servers close idle keep-alive connections on their own timers (gunicorn
    2 s, aiohttp 75 s, uvicorn 5 s, nginx 75 s); a close that crosses our request on the wire is the
    only way such a connection fails without a byte of answer, and the server had not read the
    request (an HTTP/1.1 server never closes a connection with a request in progress without
    answering unless its process dies, and a dead container refuses the fresh connection). Nothing
    else is retried: not a fresh connection, not a failure after a byte of the response, not a
    timeout.
    """

    def __init__(self, max_response_bytes: int, timeout_s: float) -> None:
        self._max_response = max_response_bytes
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None
        self._fresh: aiohttp.ClientSession | None = None
        #: Requests sent a second time after a pooled connection turned out closed (for benchmarks).
        self.stale_retries = 0

    async def start(self) -> None:
        self._session = self._new_session(
            _PoolConnector(limit=0, keepalive_timeout=POOL_KEEPALIVE_S, enable_cleanup_closed=True)
        )
        self._fresh = self._new_session(aiohttp.TCPConnector(limit=0, force_close=True))

    @staticmethod
    def _new_session(connector: aiohttp.TCPConnector) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,
            skip_auto_headers=_NO_AUTO_HEADERS,
            read_bufsize=2**16,
        )

    async def close(self) -> None:
        for session in (self._session, self._fresh):
            if session is not None:
                await session.close()
        self._session = self._fresh = None

    @property
    def max_response_bytes(self) -> int:
        return self._max_response

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "Invoker.start() not called"
        return self._session

    async def invoke(
        self,
        url: URL,
        body: bytes,
        headers: CIMultiDict[str],
        context: FaultContext,
        container: str = "primary",
        timeout_s: float | None = None,
        cap: ResponseCap | None = None,
    ) -> ContainerReply:
        """POST the body to the container's /invocations URL (a prebuilt URL: no parsing per request).
        `container`: the name a ModelError gives it; `timeout_s`: what is left of the budget (a
        pipeline's later hops), else the invocation timeout; `cap`: a smaller response cap, with
        its own fault, for a 2xx answer (a pipeline's intermediate hop).

        Redirects are never followed: a 3xx is the container's answer, a ModelError like any
        non-2xx (following one would send the body to whatever URL the container names)."""
        started = time.perf_counter()
        answered = False
        budget_s = self._timeout_s if timeout_s is None else timeout_s
        timeout = self._timeout if timeout_s is None else aiohttp.ClientTimeout(total=timeout_s)
        try:
            resp = await self.send(url, body, headers, timeout, started, budget_s)
            answered = True
            async with resp:
                if cap is not None and 200 <= resp.status < 300:
                    data = await self._read_within(resp, cap)
                elif resp.content_length is not None and resp.content_length > self._max_response:
                    raise context.fault(
                        ModelResponseTooLarge,
                        0,
                        messages.response_too_large(self._max_response, container),
                        container,
                    )
                elif resp.content_length is not None:
                    data = await resp.read()
                else:
                    data = await self.read_capped(resp, context, container)
                status = resp.status
                content_type = resp.headers.get("Content-Type")
                passed_back = {name: resp.headers[name] for name in PASSED_BACK if name in resp.headers}
        except TimeoutError as exc:
            fault = context.fault(ModelTimeout, 0, messages.invocation_timed_out(container), container)
            raise timed(fault, started) from exc
        except aiohttp.ClientError as exc:
            raise timed(unreachable(exc, answered, context, container), started) from exc
        except ModelFault as fault:
            timed(fault, started)
            raise
        elapsed = time.perf_counter() - started
        if not 200 <= status < 300:
            original = data.decode("utf-8", errors="replace")
            raise timed(context.fault(ModelErrorResponse, status, original, container), started)
        return ContainerReply(status, data, content_type, passed_back, elapsed)

    async def send(
        self,
        url: URL,
        body: bytes,
        headers: CIMultiDict[str],
        timeout: aiohttp.ClientTimeout,
        started: float,
        budget_s: float | None,
    ) -> aiohttp.ClientResponse:
        """POST and read the status line and headers, on a pooled connection; once more on a fresh
        one if the pooled one was closed before any byte came back (the class's retry rule).
        `budget_s`: the time budget the retry gets what is left of (None: no limit, the caller's)."""
        _reused.set(False)
        try:
            return await self._post(self.session, url, body, headers, timeout)
        except aiohttp.ClientError as exc:
            if not (_reused.get() and _closed_before_any_byte(exc)):
                raise
            # The container closed this idle pooled connection as the request went out: it never
            # read the request. Once more, on a new connection, within the same time budget.
            self.stale_retries += 1
            assert self._fresh is not None
            if budget_s is not None:
                timeout = aiohttp.ClientTimeout(total=max(0.001, budget_s - (time.perf_counter() - started)))
            try:
                return await self._post(self._fresh, url, body, headers, timeout)
            except aiohttp.ClientError as retry:
                if isinstance(retry, aiohttp.ClientConnectorError) or _closed_before_any_byte(retry):
                    raise DroppedInFlight(exc, retry) from retry
                raise

    @staticmethod
    async def _post(
        session: aiohttp.ClientSession,
        url: URL,
        body: bytes,
        headers: CIMultiDict[str],
        timeout: aiohttp.ClientTimeout,
    ) -> aiohttp.ClientResponse:
        """Send the request and read the status line and headers (the body is read by the caller)."""
        return await session.post(url, data=body, headers=headers, timeout=timeout, allow_redirects=False)

    @staticmethod
    async def _read_within(resp: aiohttp.ClientResponse, cap: ResponseCap) -> bytes:
        """A 2xx body read within `cap` (no more than max_bytes + one read kept in memory)."""
        if resp.content_length is not None:
            if resp.content_length > cap.max_bytes:
                raise cap.fault(resp.status, resp.content_length, True)
            return await resp.read()
        chunks: list[bytes] = []
        size = 0
        async for chunk in resp.content.iter_any():
            size += len(chunk)
            if size > cap.max_bytes:
                raise cap.fault(resp.status, size, False)
            chunks.append(chunk)
        return b"".join(chunks)

    async def read_capped(
        self, resp: aiohttp.ClientResponse, context: FaultContext, container: str = "primary"
    ) -> bytes:
        """Read a body of unknown length (chunked), failing as soon as it passes the cap."""
        chunks: list[bytes] = []
        size = 0
        async for chunk in resp.content.iter_any():
            size += len(chunk)
            if size > self._max_response:
                too_large = messages.response_too_large(self._max_response, container)
                raise context.fault(ModelResponseTooLarge, 0, too_large, container)
            chunks.append(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def unreachable(
    exc: aiohttp.ClientError, answered: bool, context: FaultContext, container: str = "primary"
) -> ModelFault:
    """The fault for a failed connection, in words that say what happened. `suspect`: the container
    looks gone (a refused connection, or a new one closed before any answer: on a port published
    by docker-proxy, a container with nothing listening accepts and then drops the connection)."""
    detail = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, DroppedInFlight):
        reason, suspect = messages.dropped_in_flight(str(exc), container), True
    elif isinstance(exc, aiohttp.ClientConnectorError):
        reason, suspect = messages.connection_refused(detail, container), True
    elif answered:
        reason, suspect = messages.closed_mid_response(detail, container), False
    elif _closed_before_any_byte(exc):
        reason, suspect = messages.closed_before_status_line(detail, container), True
    elif isinstance(exc, aiohttp.ServerDisconnectedError):
        partial = f"{type(exc).__name__}: after a partial status line"
        reason, suspect = messages.closed_before_status_line(partial, container), False
    else:
        reason, suspect = messages.container_unreachable(detail, container), False
    fault = context.fault(ModelUnreachable, 0, reason, container)
    assert isinstance(fault, ModelUnreachable)
    fault.suspect = suspect
    return fault


#: How long a request whose container went away mid-request waits for the exit watcher's exit code
#: (it usually comes within milliseconds of the drop; never an engine call on the request's path).
EXIT_CODE_WAIT_S = 1.0


class Exits(Protocol):
    """What an instance tells of its exit (fleet/variants.py's Instance)."""

    exited: asyncio.Event
    exit_code: int | None


async def with_exit_code(fault: ModelUnreachable, instance: Exits, context: FaultContext) -> ModelUnreachable:
    """A single-container instance's DroppedInFlight fault, naming the exit code its exit watcher saw
    (waited for at most EXIT_CODE_WAIT_S); `fault` itself when there is none to name."""
    cause = fault.__cause__
    if not isinstance(cause, DroppedInFlight):
        return fault
    try:
        await asyncio.wait_for(instance.exited.wait(), EXIT_CODE_WAIT_S)
    except TimeoutError:
        return fault
    code = instance.exit_code
    if code is None:
        return fault
    explained = context.fault(ModelUnreachable, 0, messages.dropped_in_flight(str(cause), "primary", code))
    assert isinstance(explained, ModelUnreachable)
    explained.suspect = True
    explained.model_latency_s = fault.model_latency_s
    explained.__cause__ = cause
    return explained


def timed(fault: ModelFault, started: float) -> ModelFault:
    """Record how long the container call took on a fault (its ModelLatency)."""
    fault.model_latency_s = time.perf_counter() - started
    return fault
