"""Calls a container's POST /invocations. aiohttp client errors are translated here, once.

Every failure of the container becomes a ModelFault (clients see 424 ModelError), never a 5xx that
boto3 would retry. The client session is shared by all instances; connections are kept alive
(see docs/performance.md for the measurement behind that choice).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp
from multidict import CIMultiDict
from yarl import URL

from emulator.errors import (
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


@dataclass(frozen=True)
class ContainerReply:
    status: int
    body: bytes
    content_type: str | None
    passed_back: Mapping[str, str]
    #: Seconds the container call took (SageMaker's ModelLatency).
    elapsed_s: float = 0.0


@dataclass(frozen=True)
class FaultContext:
    """What a ModelError message needs to name."""

    account: Account
    endpoint_name: str

    def fault(self, cls: type[ModelFault], status: int, original: str) -> ModelFault:
        message = messages.model_error(
            status, original, self.account.console_logs_url(self.endpoint_name), self.account.account_id
        )
        return cls(message, status, original, self.account.log_group_arn(self.endpoint_name))


class Invoker:
    def __init__(self, max_response_bytes: int, timeout_s: float) -> None:
        self._max_response = max_response_bytes
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=30, enable_cleanup_closed=True)
        self._session = aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,
            skip_auto_headers=_NO_AUTO_HEADERS,
            read_bufsize=2**16,
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "Invoker.start() not called"
        return self._session

    async def invoke(
        self, url: URL, body: bytes, headers: CIMultiDict[str], context: FaultContext
    ) -> ContainerReply:
        """POST the body to the container's /invocations URL (a prebuilt URL: no parsing per request)."""
        started = time.perf_counter()
        try:
            async with self.session.post(url, data=body, headers=headers, timeout=self._timeout) as resp:
                if resp.content_length is not None and resp.content_length > self._max_response:
                    raise context.fault(
                        ModelResponseTooLarge, 0, messages.response_too_large(self._max_response)
                    )
                if resp.content_length is not None:
                    data = await resp.read()
                else:
                    data = await self._read_capped(resp, context)
                status = resp.status
                content_type = resp.headers.get("Content-Type")
                passed_back = {name: resp.headers[name] for name in PASSED_BACK if name in resp.headers}
        except TimeoutError as exc:
            raise _timed(context.fault(ModelTimeout, 0, messages.invocation_timed_out()), started) from exc
        except aiohttp.ClientError as exc:
            reason = str(exc) or type(exc).__name__
            fault = context.fault(ModelUnreachable, 0, messages.container_unreachable(reason))
            raise _timed(fault, started) from exc
        except ModelFault as fault:
            _timed(fault, started)
            raise
        elapsed = time.perf_counter() - started
        if not 200 <= status < 300:
            original = data.decode("utf-8", errors="replace")
            raise _timed(context.fault(ModelErrorResponse, status, original), started)
        return ContainerReply(status, data, content_type, passed_back, elapsed)

    async def _read_capped(self, resp: aiohttp.ClientResponse, context: FaultContext) -> bytes:
        """Read a body of unknown length (chunked), failing as soon as it passes the cap."""
        chunks: list[bytes] = []
        size = 0
        async for chunk in resp.content.iter_any():
            size += len(chunk)
            if size > self._max_response:
                raise context.fault(ModelResponseTooLarge, 0, messages.response_too_large(self._max_response))
            chunks.append(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _timed(fault: ModelFault, started: float) -> ModelFault:
    """Record how long the container call took on a fault (its ModelLatency)."""
    fault.model_latency_s = time.perf_counter() - started
    return fault
