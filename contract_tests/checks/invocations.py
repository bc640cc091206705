"""invocations checks: POST /invocations and the server behind it (hosting contract §3.3, §3.6).

Every request carries the configured payload and content type (CheckConfig.payload / content_type) and
`Accept-Encoding: identity` (SageMaker's own headers are undocumented; a compressed answer would hide
its size). The container may answer that payload with any status: only the rule in question is judged.
All checks use the shared healthy container; none leaves a request in flight on a container that meets
the rules.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from contract_tests.registry import check
from contract_tests.result import CheckFailed, CheckSkipped
from contract_tests.target import CheckContext, RunningContainer

#: Response bodies are read up to this many times the cap, then the size is reported as "at least".
RESPONSE_READ_FACTOR = 4
#: Characters of a response body quoted in a failure message.
BODY_EXCERPT = 200


# ---------------------------------------------------------------------------------------- helpers


@dataclass(frozen=True)
class Answer:
    """One POST /invocations: its HTTP answer, or why there was none."""

    status: int | None
    headers: httpx.Headers
    body: bytes
    size: int
    elapsed_s: float
    error: str | None = None
    #: the body was longer than what was read (size is then a lower bound)
    truncated: bool = False

    @property
    def answered(self) -> bool:
        return self.status is not None

    def describe(self) -> str:
        if self.status is None:
            return self.error or "no answer"
        return f"HTTP {self.status} in {self.elapsed_s * 1000:.0f} ms"

    def excerpt(self) -> str:
        text = self.body[:BODY_EXCERPT].decode("utf-8", "replace").strip()
        return text + ("…" if len(self.body) > BODY_EXCERPT else "")


def invoke(
    ctx: CheckContext,
    client: httpx.Client,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    read_limit: int | None = None,
) -> Answer:
    """POST /invocations (the configured payload unless `body`), within the invocation time limit.

    The answer is read to its end, or up to `read_limit` bytes. A timeout or a dropped connection is an
    Answer with `status=None` and `error` saying which; the elapsed time covers the whole answer.
    `client` is the check's own (RunningContainer.client): one per check, since making one costs ~50 ms.
    """
    limits = ctx.config.limits
    timeout = limits.invocation_timeout_s
    request_headers = {
        "Content-Type": ctx.config.content_type,
        "Accept-Encoding": "identity",
        **(headers or {}),
    }
    content = ctx.config.payload if body is None else body
    started = time.monotonic()
    try:
        with client.stream(
            "POST", "/invocations", content=content, headers=request_headers, timeout=timeout
        ) as r:
            chunks: list[bytes] = []
            size, truncated = 0, False
            for chunk in r.iter_raw():
                size += len(chunk)
                chunks.append(chunk)
                if time.monotonic() - started > timeout:
                    raise httpx.ReadTimeout("the answer did not end in time")
                if read_limit is not None and size > read_limit:
                    truncated = True
                    break
            return Answer(
                r.status_code,
                r.headers,
                b"".join(chunks),
                size,
                time.monotonic() - started,
                truncated=truncated,
            )
    except httpx.TimeoutException:
        error = f"no answer within {timeout:g} s"
    except httpx.HTTPError as exc:
        error = f"no answer: the connection failed ({type(exc).__name__}: {exc or 'no detail'})"
    return Answer(None, httpx.Headers(), b"", 0, time.monotonic() - started, error=error)


def container_note(container: RunningContainer) -> str:
    """' The container exited with code N.' when it did (else ''), for failure messages."""
    state = container.state()
    return "" if state.running else f" The container exited with code {state.exit_code}."


def log_lines(container: RunningContainer, lines: int = 10) -> str:
    tail = container.log_tail(lines)
    return f"\nLast log lines:\n{tail}" if tail else ""


def baseline(ctx: CheckContext, client: httpx.Client) -> Answer:
    """The configured request as is; CheckSkipped when it gets no answer (invocations.timely's failure)."""
    answer = invoke(ctx, client)
    if not answer.answered:
        raise CheckSkipped(
            f"POST /invocations with the configured payload got {answer.describe()}; see invocations.timely"
        )
    return answer


# ---------------------------------------------------------------------------------------- invocations


TIMELY_FIX = (
    "Answer every invocation within the time limit: speed up or batch the model, load it at startup "
    "rather than on the first request, and answer an error status rather than letting a request hang."
)


@check(
    "invocations.timely",
    "POST /invocations is answered in time",
    "The container must respond to POST /invocations within 60 s for real-time endpoints "
    "(hosting contract §3.3); any status counts as an answer.",
    TIMELY_FIX,
)
def timely(ctx: CheckContext) -> str:
    container = ctx.target.healthy()
    limit = ctx.config.limits.invocation_timeout_s
    with container.client() as client:
        answer = invoke(ctx, client)
    ctx.evidence.update(status=answer.status, elapsed_s=round(answer.elapsed_s, 3), limit_s=limit)
    if answer.answered and answer.elapsed_s <= limit:
        return f"POST /invocations answered {answer.describe()} (limit {limit:g} s)"
    seen = (
        f"was answered HTTP {answer.status} only after {answer.elapsed_s:.2f} s"
        if answer.answered
        else f"got {answer.error}"
    )
    ctx.evidence["log_tail"] = container.log_tail()
    raise CheckFailed(
        f"POST /invocations with the configured payload ({len(ctx.config.payload)} bytes, "
        f"{ctx.config.content_type}) {seen}; SageMaker allows {limit:g} s.{container_note(container)} "
        f"Fix: {TIMELY_FIX}{log_lines(container)}"
    )


CONTENT_TYPE_FIX = (
    "Set a Content-Type header on every answer to /invocations (SageMaker returns it to the client as "
    "ContentType), and answer a request that carries Content-Type and Accept without a server error "
    "(an unsupported type deserves 415 or 406)."
)


@check(
    "invocations.content-type",
    "answers carry a Content-Type; Content-Type and Accept are handled",
    "SageMaker forwards the client's Content-Type and Accept and copies the container's response "
    "Content-Type to the client (hosting contract §3.6). A 2xx answer with a body must carry a "
    "Content-Type, and a request with Content-Type and Accept must be answered without a 5xx.",
    CONTENT_TYPE_FIX,
)
def content_type(ctx: CheckContext) -> str:
    container = ctx.target.healthy()
    ct = ctx.config.content_type
    with container.client() as client:
        plain = baseline(ctx, client)
        with_accept = invoke(ctx, client, headers={"Accept": ct})
    answers = {f"Content-Type: {ct}": plain, f"Content-Type and Accept: {ct}": with_accept}
    ctx.evidence["answers"] = {
        name: {"status": a.status, "error": a.error, "content_type": a.headers.get("content-type")}
        for name, a in answers.items()
    }
    problems: list[str] = []
    if plain.status is not None and plain.status < 500:
        if not with_accept.answered:
            problems.append(f"POST /invocations with Accept: {ct} got {with_accept.describe()}")
        elif with_accept.status is not None and with_accept.status >= 500:
            problems.append(
                f"POST /invocations with Accept: {ct} was answered HTTP {with_accept.status} "
                f"({with_accept.excerpt()!r}) where the same request without Accept gets HTTP {plain.status}"
            )
    checked = 0
    for name, answer in answers.items():
        if answer.status is None:
            continue
        has_type = bool(answer.headers.get("content-type", "").strip())
        if 200 <= answer.status < 300 and answer.size:
            checked += 1
            if not has_type:
                problems.append(
                    f"POST /invocations with {name} was answered HTTP {answer.status} with a "
                    f"{answer.size}-byte body and no Content-Type header"
                )
        elif answer.size and not has_type:
            ctx.warn(
                f"POST /invocations with {name} was answered HTTP {answer.status} without a Content-Type"
            )
    if 200 <= (with_accept.status or 0) < 300:
        got = with_accept.headers.get("content-type", "").split(";")[0].strip().lower()
        if got and got != ct.split(";")[0].strip().lower():
            ctx.warn(f"Accept: {ct} was answered with Content-Type {got}")
    if problems:
        raise CheckFailed(
            "; ".join(problems) + f".{container_note(container)} Fix: {CONTENT_TYPE_FIX}",
            log_tail=container.log_tail(),
        )
    if not checked:
        raise CheckSkipped(
            f"no 2xx answer with a body to check (HTTP {plain.status}, HTTP {with_accept.status}): configure "
            "a payload the model accepts to check the response Content-Type"
        )
    return (
        f"answered HTTP {plain.status} with Content-Type {plain.headers.get('content-type')!r}; with "
        f"Accept: {ct}, HTTP {with_accept.status} with Content-Type "
        f"{with_accept.headers.get('content-type')!r}"
    )


def sagemaker_headers() -> dict[str, str]:
    """Headers SageMaker or the AWS front end may add to a request on its way to the container.

    Only headers that carry no meaning for the model: X-Amzn-SageMaker-Custom-Attributes (the client's
    own message to the model, parsed by some servers), -Target-Model (multi-model routing) and
    -Session-Id (stateful sessions) are left out because a container may rightly act on them.
    """
    now = int(time.time())
    return {
        "X-Amzn-SageMaker-Inference-Id": str(uuid.uuid4()),
        "X-Amzn-Trace-Id": f"Root=1-{now:08x}-{uuid.uuid4().hex[:24]}",
        "X-Forwarded-For": "203.0.113.7",
        "X-Forwarded-Proto": "https",
    }


EXTRA_HEADERS_FIX = (
    "Ignore request headers the server does not know, in particular X-Amzn-* and X-Forwarded-* headers: "
    "do not reject requests over them (e.g. remove a strict header allow-list)."
)


@check(
    "invocations.extra-headers",
    "headers added by SageMaker are ignored",
    "Extra headers added by SageMaker must be ignored safely (hosting contract §3.3, §3.6): a request "
    "carrying them must get the same status as one without them.",
    EXTRA_HEADERS_FIX,
)
def extra_headers(ctx: CheckContext) -> str:
    container = ctx.target.healthy()
    extra = sagemaker_headers()
    with container.client() as client:
        plain = baseline(ctx, client)
        with_extra = invoke(ctx, client, headers=extra)
        ctx.evidence.update(headers=extra, status_without=plain.status, status_with=with_extra.status)
        if with_extra.status == plain.status:
            return f"HTTP {plain.status} both without and with {', '.join(extra)}"
        # Name the culprits: each header alone.
        alone = {name: invoke(ctx, client, headers={name: value}) for name, value in extra.items()}
    ctx.evidence["alone"] = {name: a.status for name, a in alone.items()}
    culprits = [f"{name} alone: {a.describe()}" for name, a in alone.items() if a.status != plain.status]
    body = f" ({with_extra.excerpt()!r})" if with_extra.body else ""
    raise CheckFailed(
        f"POST /invocations was answered HTTP {plain.status} without extra headers but "
        f"{with_extra.describe()}{body} with {', '.join(extra)}"
        + (f"; {'; '.join(culprits)}" if culprits else "")
        + f".{container_note(container)} Fix: {EXTRA_HEADERS_FIX}",
        log_tail=container.log_tail(),
    )


LARGE_BODY_FIX = (
    "Accept request bodies up to SageMaker's cap: raise the body size limit of the server or any proxy "
    "in front of it (nginx client_max_body_size, Flask MAX_CONTENT_LENGTH, TorchServe max_request_size...)."
)


@check(
    "invocations.large-body",
    "a body at the payload cap is accepted",
    "InvokeEndpoint accepts bodies up to 6,291,456 bytes and SageMaker forwards them to the container "
    "(API reference; hosting contract §3.6); the container must accept them: no 413, no dropped "
    "connection, no server error the usual payload does not get.",
    LARGE_BODY_FIX,
)
def large_body(ctx: CheckContext) -> str:
    container = ctx.target.healthy()
    cap = ctx.config.limits.max_request_bytes
    payload = ctx.config.payload
    if len(payload) >= cap:
        raise CheckSkipped(f"the configured payload ({len(payload):,} bytes) is already at the cap")
    # The payload padded with spaces: still valid JSON, CSV or text, and exactly the cap in size.
    body = payload + b" " * (cap - len(payload))
    with container.client() as client:
        plain = baseline(ctx, client)
        big = invoke(ctx, client, body=body)
    ctx.evidence.update(body_bytes=cap, status=big.status, error=big.error, status_usual=plain.status)
    what = f"a {cap:,}-byte body (the configured payload padded with spaces to the cap)"
    problem = None
    if not big.answered:
        problem = f"got {big.describe()}"
    elif big.status == 413:
        problem = f"was refused HTTP 413 ({big.excerpt()!r})"
    elif big.status is not None and big.status >= 500 and (plain.status or 0) < 500:
        problem = (
            f"was answered HTTP {big.status} ({big.excerpt()!r}) where the {len(payload)}-byte payload gets "
            f"HTTP {plain.status}"
        )
    if problem:
        raise CheckFailed(
            f"POST /invocations with {what} {problem}.{container_note(container)} Fix: {LARGE_BODY_FIX}"
            f"{log_lines(container, 5)}",
            log_tail=container.log_tail(),
        )
    if big.status != plain.status:
        ctx.warn(
            f"{what} was answered HTTP {big.status}, the usual payload HTTP {plain.status}: if that is a "
            "size limit, raise it"
        )
    return f"{what} was answered {big.describe()} (the usual payload: HTTP {plain.status})"


RESPONSE_SIZE_FIX = (
    "Keep responses within SageMaker's cap: return less (fewer results, lower precision, a compact "
    "encoding), or write large results to S3 and return their location (or use asynchronous inference)."
)


@check(
    "invocations.response-size",
    "responses are within the payload cap",
    "SageMaker refuses a container response over 6,291,456 bytes (InvokeEndpoint's payload cap, "
    "hosting contract §3.6): the client gets an error instead of the answer.",
    RESPONSE_SIZE_FIX,
)
def response_size(ctx: CheckContext) -> str:
    container = ctx.target.healthy()
    cap = ctx.config.limits.max_response_bytes
    with container.client() as client:
        answer = invoke(ctx, client, read_limit=cap * RESPONSE_READ_FACTOR)
    if not answer.answered:
        raise CheckSkipped(
            f"POST /invocations with the configured payload got {answer.describe()}; see invocations.timely"
        )
    declared = answer.headers.get("content-length")
    ctx.evidence.update(status=answer.status, response_bytes=answer.size, content_length=declared)
    if answer.size <= cap:
        return f"HTTP {answer.status} with a {answer.size:,}-byte body (cap {cap:,} bytes)"
    size = f"at least {answer.size:,}" if answer.truncated else f"{answer.size:,}"
    raise CheckFailed(
        f"POST /invocations with the configured payload was answered HTTP {answer.status} with a body of "
        f"{size} bytes"
        + (f" (Content-Length {declared})" if declared else "")
        + f", over SageMaker's {cap:,}-byte cap: the client would get an error instead. "
        f"Fix: {RESPONSE_SIZE_FIX}"
    )
