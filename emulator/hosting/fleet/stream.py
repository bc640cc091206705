"""A container's answer read as it is written: InvokeEndpointWithResponseStream's container call.

`open_stream` POSTs as the Invoker does (its pool and its retry rule) and waits for the status line
and for the first byte of the body, within the first-byte limit. Until then every failure is the
ordinary ModelFault of InvokeEndpoint (the client gets 424 ModelError; a non-2xx answer is read
whole, within the response cap, for its message). After it, the `ContainerStream` hands over each
piece as it arrives (what is buffered is coalesced: never byte by byte, never the whole answer),
and a failure is a ModelStreamFault: StreamBroken (the container closed or reset the connection
before the terminating chunk) or StreamTimeExceeded (silent past the idle limit, or past the total
limit counted from the request). A streamed answer has no size cap [U] (docs/streaming.md).

The client going away is seen within TICK_S: `parts` takes a callable that says whether the client
is still there, asked whenever the container has been silent for TICK_S. Closing a stream that did
not end drops its connection, so the container sees its client leave.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass

import aiohttp
from multidict import CIMultiDict
from yarl import URL

from emulator.config import ContractLimits
from emulator.errors import (
    ContainerCall,
    ModelErrorResponse,
    ModelFault,
    ModelResponseTooLarge,
    ModelTimeout,
    StreamBroken,
    StreamTimeExceeded,
)
from emulator.hosting.fleet.invoker import PASSED_BACK, FaultContext, Invoker, timed, unreachable
from emulator.model import messages

#: How often a silent stream asks whether its client is still connected.
TICK_S = 0.25
#: No aiohttp timeout: the stream's own limits apply (asyncio.timeout around each wait).
_NO_TIMEOUT = aiohttp.ClientTimeout(total=None, connect=None, sock_read=None, sock_connect=None)


@dataclass(frozen=True)
class StreamLimits:
    first_byte_s: float
    idle_s: float
    total_s: float

    @classmethod
    def of(cls, limits: ContractLimits) -> StreamLimits:
        return cls(limits.stream_first_byte_timeout_s, limits.stream_idle_timeout_s, limits.stream_timeout_s)


class ContainerStream:
    """A container's 2xx answer, part by part. Iterate `parts` once; then `close`."""

    def __init__(
        self,
        resp: aiohttp.ClientResponse,
        first: bytes,
        started: float,
        limits: StreamLimits,
        container: str,
    ) -> None:
        self._resp = resp
        self._first = first
        self._limits = limits
        self.container = container
        self.status = resp.status
        self.content_type: str | None = resp.headers.get("Content-Type")
        self.passed_back: Mapping[str, str] = {n: resp.headers[n] for n in PASSED_BACK if n in resp.headers}
        self.started = started
        #: seconds from the request to the first byte of the body (the whole answer if it was empty)
        self.first_byte_s = time.perf_counter() - started
        self.ended_s: float | None = None
        self.bytes = len(first)
        self.parts_read = 0
        #: the body reached its end (the terminating chunk, or Content-Length bytes)
        self.complete = first == b""
        #: the client was gone before the end
        self.abandoned = False
        #: a multi-container instance's stream (pipeline.py): its metrics per container; in a
        #: pipeline, the hops before this one and their summed latency
        self.per_container = False
        self.calls_before: tuple[ContainerCall, ...] = ()
        self.latency_before = 0.0

    @property
    def elapsed_s(self) -> float:
        """Seconds from this container's request to its last byte (so far)."""
        end = self.ended_s if self.ended_s is not None else time.perf_counter()
        return end - self.started

    @property
    def model_latency_s(self) -> float:
        """The request's ModelLatency: this call's time, plus a pipeline's earlier hops."""
        return self.latency_before + self.elapsed_s

    def calls(self, status: int) -> tuple[ContainerCall, ...]:
        """Each container call of a multi-container request, this one with `status` for its
        metrics (its 200, or 0 for a stream that failed)."""
        if not self.per_container:
            return ()
        return (*self.calls_before, ContainerCall(self.container, status, self.elapsed_s))

    async def parts(self, client_connected: Callable[[], bool] = lambda: True) -> AsyncIterator[bytes]:
        """Each piece of the body as it arrives. Raises StreamBroken / StreamTimeExceeded; stops
        early (with `abandoned` set) when `client_connected()` turns false."""
        if self.complete:
            self.ended_s = time.perf_counter()
            return
        self.parts_read = 1
        yield self._first
        content = self._resp.content
        deadline = self.started + self._limits.total_s
        last = time.perf_counter()
        while True:
            now = time.perf_counter()
            limit = min(last + self._limits.idle_s, deadline)
            if now >= limit:
                self.ended_s = now
                raise StreamTimeExceeded(messages.stream_time_exceeded(self.container))
            try:
                async with asyncio.timeout(min(limit - now, TICK_S)):
                    chunk = await content.readany()
            except TimeoutError:
                if not client_connected():
                    self.abandoned = True
                    self.ended_s = time.perf_counter()
                    return
                continue
            except (aiohttp.ClientError, OSError) as exc:
                self.ended_s = time.perf_counter()
                detail = f"{type(exc).__name__}: {exc}"
                raise StreamBroken(messages.stream_broken(detail, self.container)) from exc
            if not chunk:
                self.complete = True
                self.ended_s = time.perf_counter()
                return
            last = time.perf_counter()
            self.bytes += len(chunk)
            self.parts_read += 1
            yield chunk

    def close(self) -> None:
        """Give the connection back to the pool (a complete answer) or drop it (any other)."""
        if self.complete:
            self._resp.release()
        else:
            self._resp.close()


async def open_stream(
    invoker: Invoker,
    url: URL,
    body: bytes,
    headers: CIMultiDict[str],
    context: FaultContext,
    limits: StreamLimits,
    container: str = "primary",
) -> ContainerStream:
    """POST, then wait for the status line and the first byte of the body (first-byte limit).
    A non-2xx answer, a failure or a timeout before that byte: the ModelFault InvokeEndpoint gives."""
    started = time.perf_counter()
    answered = False
    resp: aiohttp.ClientResponse | None = None
    try:
        async with asyncio.timeout(limits.first_byte_s):
            resp = await invoker.send(url, body, headers, _NO_TIMEOUT, started, None)
            answered = True
            if not 200 <= resp.status < 300:
                await _refuse(invoker, resp, context, container)
            first = await resp.content.readany()
    except TimeoutError as exc:
        _drop(resp)
        fault = context.fault(ModelTimeout, 0, messages.invocation_timed_out(container), container)
        raise timed(fault, started) from exc
    except aiohttp.ClientError as exc:
        _drop(resp)
        raise timed(unreachable(exc, answered, context, container), started) from exc
    except ModelFault as fault:
        _drop(resp)
        raise timed(fault, started) from None
    except BaseException:
        _drop(resp)
        raise
    return ContainerStream(resp, first, started, limits, container)


async def _refuse(
    invoker: Invoker, resp: aiohttp.ClientResponse, context: FaultContext, container: str
) -> None:
    """A non-2xx answer: the ModelError of InvokeEndpoint, with the container's body (capped)."""
    if resp.content_length is not None and resp.content_length > invoker.max_response_bytes:
        too_large = messages.response_too_large(invoker.max_response_bytes, container)
        raise context.fault(ModelResponseTooLarge, 0, too_large, container)
    data = await invoker.read_capped(resp, context, container)
    original = data.decode("utf-8", errors="replace")
    raise context.fault(ModelErrorResponse, resp.status, original, container)


def _drop(resp: aiohttp.ClientResponse | None) -> None:
    if resp is not None:
        resp.close()
