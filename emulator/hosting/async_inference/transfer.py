"""One asynchronous request's container call, streamed: the input flows from S3 into the POST to
/invocations (with its Content-Length when S3 gave one), and a 2xx answer flows from the container
into its S3 output as it arrives (s3_stream.py). Nothing of either is held whole.

Faults are the invoker's (emulator/hosting/fleet/invoker.py: the same ModelFault words as a real-time
call); an S3 failure on either side is an S3Failure, told apart from the container's: a broken input
stream shows to aiohttp only as a failed send, and a timeout while the input's next read still
waits on S3 is S3's. Each call gets a new connection [U]: an async request
lasts seconds to an hour, a connection costs a millisecond, and a fresh connection is never one the
container just closed, so the input (which cannot be read twice) is sent once.

InvocationTimeoutSeconds covers the call until the last byte of the answer arrived, the answer's
parts written to S3 on the way included [U]. A non-2xx answer's body is the failure's message: the
first ERROR_BODY_BYTES of it [U].
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
from multidict import CIMultiDict
from yarl import URL

from emulator.errors import ModelErrorResponse, ModelResponseTooLarge, ModelTimeout
from emulator.hosting.async_inference.s3_stream import InputSource, S3Output
from emulator.hosting.fleet.invoker import FaultContext, timed, unreachable
from emulator.model import messages

#: The part of a non-2xx answer's body kept as the failure's message.
ERROR_BODY_BYTES = 64 * 1024
#: Bytes the connection reads at a time (the largest piece of an answer in memory before a write).
READ_BUFFER_BYTES = 2**16


@dataclass(frozen=True)
class StreamedReply:
    status: int
    content_type: str | None
    #: bytes written to the output
    size: int
    #: the whole answer when it was written with one PutObject (small answers), else None
    body: bytes | None
    #: seconds from the POST to the answer's last byte (ModelLatency)
    elapsed_s: float


class ContainerCaller:
    """POSTs async requests to containers on connections of its own (one per call)."""

    def __init__(self, max_response_bytes: int) -> None:
        self._max_response = max_response_bytes
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, force_close=True),
            auto_decompress=False,
            skip_auto_headers=("Content-Type", "Accept", "Accept-Encoding", "User-Agent"),
            read_bufsize=READ_BUFFER_BYTES,
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
        self._session = None

    async def call(
        self,
        url: URL,
        source: InputSource,
        headers: CIMultiDict[str],
        context: FaultContext,
        timeout_s: float,
        output: Callable[[str | None], S3Output],
    ) -> StreamedReply:
        """Send the input, write a 2xx answer to `output(content type)`; raise a ModelFault for the
        container's failures and an S3Failure for S3's (a partly written output is aborted)."""
        assert self._session is not None, "ContainerCaller.start() not called"
        if source.length is not None:
            headers["Content-Length"] = str(source.length)
        started = time.perf_counter()
        answered = False
        sink: S3Output | None = None
        try:
            async with self._session.post(
                url,
                data=source.chunks(),
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=timeout_s),
                allow_redirects=False,
            ) as resp:
                answered = True
                content_type = resp.headers.get("Content-Type")
                if not 200 <= resp.status < 300:
                    original = (await resp.content.read(ERROR_BODY_BYTES)).decode("utf-8", errors="replace")
                    raise timed(context.fault(ModelErrorResponse, resp.status, original), started)
                if resp.content_length is not None and resp.content_length > self._max_response:
                    raise self._too_large(context, started)
                sink = output(content_type)
                async for chunk in resp.content.iter_any():
                    if sink.size + len(chunk) > self._max_response:
                        raise self._too_large(context, started)
                    await sink.write(chunk)
                elapsed = time.perf_counter() - started
            body = await sink.finish()
            return StreamedReply(resp.status, content_type, sink.size, body, elapsed)
        except BaseException as exc:
            if sink is not None:
                await sink.abort()
            if isinstance(exc, aiohttp.ClientError) and source.error is not None:
                raise source.error from exc  # the input broke on its way: S3's failure, not the container's
            if isinstance(exc, TimeoutError):
                stalled = source.stalled(timeout_s)
                if stalled is not None:  # the input was still coming from S3: not the container's fault
                    raise stalled from exc
                fault = context.fault(ModelTimeout, 0, messages.invocation_timed_out())
                raise timed(fault, started) from exc
            if isinstance(exc, aiohttp.ClientError):
                raise timed(unreachable(exc, answered, context), started) from exc
            raise

    def _too_large(self, context: FaultContext, started: float) -> Exception:
        return timed(
            context.fault(ModelResponseTooLarge, 0, messages.response_too_large(self._max_response)), started
        )
