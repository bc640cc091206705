"""streaming.*: an answer streamed as InvokeEndpointWithResponseStream needs it (hosting contract §2.3).

SageMaker forwards a container's POST /invocations answer to the client part by part as it arrives when
the container writes it with HTTP/1.1 chunked transfer encoding. These checks run only for an image
said to stream (`smlocal check IMAGE --streaming [--stream-body JSON]`, CheckConfig.stream); otherwise
they are SKIPPED with a note, starting nothing. They send the stream body (DEFAULT_STREAM_BODY unless
given) over a raw socket (checks/stream_calls.py) to the shared healthy container:

  - streaming.incremental: the answer is 2xx, HTTP/1.1, `Transfer-Encoding: chunked`, and arrives in
    parts over time (the timing rule below);
  - streaming.framing: the same answer's chunked encoding is valid to its terminating chunk;
  - streaming.disconnect: a client leaving mid-stream (RST after the first bytes) leaves the container
    serving: a second stream is answered to its end, /ping answers 200, the container still runs.
    It runs last of the three (and the module after every other check on the shared container).

The timing rule [U] (SageMaker states none; what "as the model writes" can be told from outside): body
bytes arrive at MIN_ARRIVALS or more distinct moments (ARRIVAL_GAP_S or more apart), and the
first body byte arrives within FIRST_BYTE_SHARE of the time from the request to the last body byte.
"""

from __future__ import annotations

from contract_tests.check_config import DEFAULT_STREAM_BODY, DEFAULT_STREAM_SOURCE, Payload
from contract_tests.checks.calls import container_note, describe_payload, log_lines
from contract_tests.checks.stream_calls import Arrival, StreamAnswer, shared, stream
from contract_tests.http_client import container_client
from contract_tests.registry import check
from contract_tests.result import CheckFailed, CheckSkipped
from contract_tests.running import RunningContainer
from contract_tests.target import CheckContext

#: Body bytes must arrive at this many distinct moments at least ...
MIN_ARRIVALS = 3
#: ... moments this far apart or more: a read this long after the last moment begins a new one (so a
#: burst of reads is one moment, and a continuous stream one moment per ARRIVAL_GAP_S) ...
ARRIVAL_GAP_S = 0.010
#: ... and the first body byte within this share of the time from the request to the last body byte.
FIRST_BYTE_SHARE = 0.5
#: After a stream that ended with the connection's close, how long to wait for the container's exit
#: (docker's wait, not a sleep) to tell a crash mid-answer from a server that closed early.
EXIT_WAIT_S = 1.0

STREAM_FIX = (
    "Write the answer with HTTP/1.1 chunked transfer encoding as the model produces it, each part "
    "flushed when it is ready: FastAPI/Starlette `StreamingResponse(generator())`, Flask "
    "`Response(stream_with_context(generator()))`, aiohttp `web.StreamResponse` with `await "
    "response.write(part)`; the generator yields each token or step as it is made, not a list "
    "computed first."
)
FRAMING_FIX = (
    "Let the serving framework write the chunked encoding (StreamingResponse, stream_with_context, "
    "aiohttp StreamResponse); code that writes it by hand must send each chunk as `SIZE-IN-HEX\\r\\n` "
    "+ exactly SIZE bytes + `\\r\\n`, and end the body with `0\\r\\n\\r\\n`."
)
DISCONNECT_FIX = (
    "Treat a client that goes away mid-stream as normal (a user stopping a generation): catch the "
    "write error or cancellation (BrokenPipeError, ConnectionResetError, asyncio.CancelledError, "
    "GeneratorExit in the generator), stop generating and free what the request held; never exit the "
    "process or leave the server unable to serve."
)


def _stream_payload(ctx: CheckContext) -> Payload:
    payload = ctx.config.stream
    if payload is None:
        raise CheckSkipped(
            "the image was not said to stream its answers: give --streaming (and --stream-body with an "
            "input it streams an answer to) to check response streaming "
            "(InvokeEndpointWithResponseStream)"
        )
    return payload


def _first_stream(ctx: CheckContext) -> tuple[RunningContainer, StreamAnswer]:
    payload = _stream_payload(ctx)
    container = ctx.target.healthy()
    answer = shared(ctx, container)
    ctx.evidence["request"] = describe_payload(payload)
    ctx.evidence["answer"] = _evidence(answer)
    return container, answer


def _evidence(answer: StreamAnswer) -> dict[str, object]:
    return {
        "status": answer.status,
        "version": answer.version,
        "transfer_encoding": answer.header("transfer-encoding"),
        "content_length": answer.header("content-length"),
        "bytes": answer.size,
        "chunks": answer.chunks,
        "arrivals_ms": [round(a.at_s * 1000, 1) for a in answer.arrivals[:200]],
        "complete": answer.complete,
        "error": answer.error,
        "framing_error": answer.framing.message if answer.framing else None,
    }


def _require_answer(payload: Payload, answer: StreamAnswer, container: RunningContainer) -> None:
    """CheckFailed when the stream request got no 2xx answer (what each streaming check needs first)."""
    given = (
        " Give --stream-body with an input the model streams an answer to (the default body is a "
        "text-generation request)."
        if payload.source == DEFAULT_STREAM_SOURCE
        else ""
    )
    if answer.status is None:
        raise CheckFailed(
            f"POST /invocations with {describe_payload(payload)} got no answer: {answer.error}."
            f"{container_note(container)}{given}"
            f"{log_lines(container)}"
        )
    if not answer.ok:
        body = f" ({answer.excerpt()!r})" if answer.size else ""
        raise CheckFailed(
            f"POST /invocations with {describe_payload(payload)} answered HTTP {answer.status}{body}: a "
            f"stream must begin with a 2xx (SageMaker answers a non-2xx with ModelError before the first "
            f"part).{given}"
        )


def moments(arrivals: list[Arrival]) -> int:
    """How many distinct moments body bytes arrived at: a read ARRIVAL_GAP_S or more after the start of
    the last moment begins the next (a burst is one moment; reads every millisecond for 100 ms are ten)."""
    count, moment = 0, None
    for arrival in arrivals:
        if moment is None or arrival.at_s - moment >= ARRIVAL_GAP_S:
            count, moment = count + 1, arrival.at_s
    return count


def judge_timing(answer: StreamAnswer, payload: Payload) -> str:
    """The timing rule on a complete chunked 2xx answer: a pass message, or CheckFailed."""
    first, last = answer.first_s or 0.0, answer.last_s or 0.0
    seen = moments(answer.arrivals)
    what = (
        f"{answer.size:,} bytes in {answer.chunks} chunk(s) arrived at {seen} distinct moment(s) "
        f"({ARRIVAL_GAP_S * 1000:g} ms or more apart), the first body byte {first * 1000:.0f} ms and "
        f"the last {last * 1000:.0f} ms after the request"
    )
    longer = (
        " Give --stream-body with an input the model streams a long enough answer to."
        if payload.source == DEFAULT_STREAM_SOURCE
        else " If the model is that fast, give a --stream-body that asks for a longer answer."
    )
    if seen < MIN_ARRIVALS:
        raise CheckFailed(
            f"the answer is chunked but not streamed: {what}. SageMaker forwards the parts as they "
            f"arrive, so a client sees nothing until the whole answer is computed: the server buffers "
            f"the answer, or computes every part before writing the first (the rule: body bytes at "
            f"{MIN_ARRIVALS} or more distinct moments).{longer}\nFix: {STREAM_FIX}",
            moments=seen,
        )
    if first > FIRST_BYTE_SHARE * last:
        raise CheckFailed(
            f"the first part came late: {what}, at {first / last:.0%} of the time to the last (the rule: "
            f"within {FIRST_BYTE_SHARE:.0%}). The client waits for most of the answer before it sees "
            f"anything: write the first part as soon as it is ready.\nFix: {STREAM_FIX}",
            moments=seen,
        )
    return f"streamed: {what}"


@check(
    "streaming.incremental",
    "a streamed answer is chunked and arrives part by part",
    "For InvokeEndpointWithResponseStream SageMaker sends the same POST /invocations and forwards the "
    "answer to the client part by part as it arrives; the container writes it with HTTP/1.1 chunked "
    "transfer encoding (hosting contract §2.3). The check sends the stream body (--stream-body; by "
    "default the text-generation request that TGI and LMI containers stream, "
    f"`{DEFAULT_STREAM_BODY.decode()}`) and requires a 2xx HTTP/1.1 answer with "
    f"`Transfer-Encoding: chunked` whose body bytes arrive at {MIN_ARRIVALS} or more distinct moments "
    f"({ARRIVAL_GAP_S * 1000:g} ms or more apart), the first within "
    f"{FIRST_BYTE_SHARE:.0%} of the time from the request to the last [U: SageMaker states no such "
    "figure]. A Content-Length answer (the whole body in one write) fails. Run only with --streaming.",
    STREAM_FIX,
    before="""
        @app.post("/invocations")
        async def invocations(request: Request):
            tokens = [t async for t in model.generate(await request.json())]  # all of them first
            return Response("".join(tokens))             # one Content-Length answer
    """,
    after="""
        @app.post("/invocations")
        async def invocations(request: Request):
            body = await request.json()
            async def parts():
                async for token in model.generate(body):
                    yield token                           # one chunk per token, as it is made
            return StreamingResponse(parts(), media_type="text/event-stream")
    """,
)
def incremental(ctx: CheckContext) -> str:
    container, answer = _first_stream(ctx)
    payload = _stream_payload(ctx)
    _require_answer(payload, answer, container)
    if answer.version != "HTTP/1.1":
        raise CheckFailed(
            f"POST /invocations was answered {answer.version} (to an HTTP/1.1 request): chunked encoding, "
            f"which SageMaker forwards part by part, needs HTTP/1.1.\nFix: {STREAM_FIX}"
        )
    if not answer.chunked:
        if answer.content_length is not None:
            how = (
                f"with Content-Length: {answer.content_length} (the whole body, {answer.size:,} bytes, "
                f"arrived {(answer.first_s or 0) * 1000:.0f} ms after the request)"
            )
        else:
            how = (
                "without Transfer-Encoding: chunked or Content-Length (a body ended by closing the "
                "connection)"
            )
        raise CheckFailed(
            f"POST /invocations with {describe_payload(payload)} was answered {how}: the answer is not "
            f"streamed. SageMaker forwards a chunked answer part by part; stream with chunked encoding "
            f"(Transfer-Encoding: chunked).\nFix: {STREAM_FIX}"
        )
    if answer.framing is not None:
        raise CheckSkipped(
            f"the chunked encoding is broken at byte {answer.framing.offset}; see streaming.framing"
        )
    if not answer.complete and not answer.truncated:
        raise CheckFailed(
            f"the stream stopped before its end: {answer.error} ({answer.size:,} bytes in {answer.chunks} "
            f"chunk(s) had arrived).{container_note(container)} SageMaker ends such a stream with a "
            "ModelStreamError (ModelInvocationTimeExceeded).\nFix: write the next part, or end the stream "
            f"with its terminating chunk, within {ctx.config.limits.invocation_timeout_s:g} s."
            f"{log_lines(container)}"
        )
    return judge_timing(answer, payload)


@check(
    "streaming.framing",
    "the chunked encoding of a streamed answer is valid",
    "The container's streamed answer is HTTP/1.1 chunked encoding (hosting contract §2.3) and must be "
    "valid to its end (RFC 9112 §7.1): each chunk `SIZE-IN-HEX[;ext]\\r\\n` + exactly SIZE bytes + "
    "`\\r\\n`, CRLF (never a bare LF) after every line, and the body ends with the zero-size chunk and "
    "an empty line (`0\\r\\n\\r\\n`), nothing after it. A proxy (SageMaker's front end, smlocal) that "
    "cannot read the framing breaks the stream. Judged on the same answer as streaming.incremental; "
    "the failure names what was wrong and its byte offset in the body. Run only with --streaming.",
    FRAMING_FIX,
    before="""
        conn.sendall(b"HTTP/1.1 200 OK\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n")
        for part in parts:
            conn.sendall(b"%x\\r\\n%s" % (len(part.strip()), part))  # wrong size, no CRLF
    """,
    after="""
        conn.sendall(b"HTTP/1.1 200 OK\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n")
        for part in parts:
            conn.sendall(b"%x\\r\\n%s\\r\\n" % (len(part), part))
        conn.sendall(b"0\\r\\n\\r\\n")
    """,
)
def framing(ctx: CheckContext) -> str:
    container, answer = _first_stream(ctx)
    payload = _stream_payload(ctx)
    if not answer.ok:
        raise CheckSkipped("the stream request got no 2xx answer; see streaming.incremental")
    if not answer.chunked:
        raise CheckSkipped(
            "the answer is not chunked, so there is no framing to judge; see streaming.incremental"
        )
    error = answer.framing
    if error is not None:
        crashed = ""
        if error.message.startswith("the connection closed"):
            code = container.runtime.wait_exit(container.handle.id, EXIT_WAIT_S)
            if code is not None:
                crashed = (
                    f" The container exited with code {code}: it crashed mid-answer (its log says why), "
                    "so the stream had no end."
                )
        near = answer.raw[max(0, error.offset - 16) : error.offset + 24]  # b"" past the bytes kept
        around = f" The body around it: {near!r}." if near else ""
        ctx.evidence["offset"] = error.offset
        raise CheckFailed(
            f"the chunked encoding of the answer to {describe_payload(payload)} is broken at byte "
            f"{error.offset} of the body (after {answer.chunks} chunk(s), {answer.size:,} data bytes): "
            f"{error.message}.{around}{crashed or container_note(container)} A proxy reading it stops "
            f"there: SageMaker would end the stream with a ModelStreamError.\nFix: {FRAMING_FIX}"
        )
    if answer.truncated:
        return (
            f"valid chunked encoding in the first {answer.size:,} bytes ({answer.chunks} chunks; not "
            "read further)"
        )
    if not answer.complete:
        raise CheckSkipped(f"the stream did not reach its end ({answer.error}); see streaming.incremental")
    return (
        f"valid chunked encoding: {answer.chunks} chunk(s), {answer.size:,} data bytes, the terminating "
        "zero-size chunk"
    )


@check(
    "streaming.disconnect",
    "a client leaving mid-stream does not stop the container",
    "Clients stop streams (a user cancels a generation, a timeout, a crash): SageMaker then closes its "
    "connection to the container, which must go on serving (hosting contract §2.3, §3.4: an instance "
    "that stops answering is replaced). The check opens a stream, reads its first bytes and resets the "
    "connection (RST), then requires a second stream of the same body to be answered 2xx to its end, "
    "GET /ping to answer 200, and the container to be still running. Run only with --streaming.",
    DISCONNECT_FIX,
    before="""
        async def parts():
            try:
                async for token in model.generate(body):
                    yield token
            except BaseException:
                os._exit(1)          # "something went wrong": the whole server goes
    """,
    after="""
        async def parts():
            try:
                async for token in model.generate(body):
                    yield token
            finally:
                model.cancel(body)   # the client left: stop generating, keep serving
    """,
)
def disconnect(ctx: CheckContext) -> str:
    container, first = _first_stream(ctx)
    payload = _stream_payload(ctx)
    if not first.ok:
        raise CheckSkipped("the stream request got no 2xx answer; see streaming.incremental")
    if not (first.complete or first.truncated or first.framing is not None):
        raise CheckSkipped(f"the stream did not reach its end ({first.error}); see streaming.incremental")
    left = stream(ctx, container, payload, leave_after_first=True)
    ctx.evidence["left"] = _evidence(left)
    if not left.left:
        if left.ok and left.complete:
            raise CheckSkipped(
                f"the whole answer ({left.size:,} bytes) arrived in the first read: there was no stream to "
                "leave mid-way (see streaming.incremental; a --stream-body with a longer answer tests it)"
            )
        raise CheckSkipped(
            f"the stream to leave sent no body ({left.describe()}).{container_note(container)} See "
            "streaming.incremental and streaming.framing"
        )
    read = f"after reading its first {left.size:,} byte(s), {(left.first_s or 0) * 1000:.0f} ms into it"
    second = stream(ctx, container, payload)
    ctx.evidence["second"] = _evidence(second)
    # A framing error ends the second stream as it ended the first: streaming.framing judges it.
    second_done = second.ok and (second.complete or second.truncated or second.framing is not None)
    ping = _ping(ctx, container)
    state = container.state()
    ctx.evidence.update(ping=ping, running=state.running, exit_code=state.exit_code)
    leaving = f"A client closed its stream {read} (a connection reset)"
    if not state.running:
        raise CheckFailed(
            f"{leaving}, and the container exited with code {state.exit_code}: SageMaker would count the "
            f"instance unhealthy and replace it, failing every request in flight.{log_lines(container)}\n"
            f"Fix: {DISCONNECT_FIX}"
        )
    if not second_done:
        raise CheckFailed(
            f"{leaving}; a second stream of the same body then got {second.describe()}"
            f"{': ' + second.error if second.error and second.status is not None else ''} instead of a "
            f"complete 2xx answer (/ping: {ping}).{log_lines(container)}\nFix: {DISCONNECT_FIX}"
        )
    if ping != "HTTP 200":
        raise CheckFailed(
            f"{leaving}; a second stream was answered, but GET /ping then answered {ping}: SageMaker "
            f"would replace the instance.{log_lines(container)}\nFix: {DISCONNECT_FIX}"
        )
    return (
        f"a client closed its stream {read}; a second stream was answered to its end "
        f"({second.describe()}{'; its framing error is streaming.framing' if second.framing else ''}), "
        "/ping answered 200 and the container runs"
    )


def _ping(ctx: CheckContext, container: RunningContainer) -> str:
    import httpx

    try:
        with container_client(timeout=ctx.config.limits.ping_timeout_s) as client:
            return f"HTTP {client.get(f'{container.base_url}/ping').status_code}"
    except httpx.HTTPError as exc:
        return f"no answer ({type(exc).__name__})"
