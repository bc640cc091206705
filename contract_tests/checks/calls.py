"""Calls to POST /invocations shared by the checks (invocations, media, keepalive, accept, shutdown).

Every request carries the configured payload and content type (CheckConfig.payload / content_type /
accept) and `Accept-Encoding: identity` (SageMaker's own headers are undocumented; a compressed answer
would hide its size).

Observations shared per run (keyed by the Target, like startup.py's):
  - the first calls: right after the shared container's first 200 from /ping (Target's AFTER_HEALTHY
    hook), the configured request is sent at once, again while it gets a server error (for up to
    READY_WINDOW_S), or once more after a timeout, then STEADY_CALLS times: what a lazily loaded model
    does to the first requests (invocations.ready-when-healthy, invocations.warm-first-call);
  - the baseline: the configured request's steady-state answer, sent once (the last first call).
    `baseline(ctx, client)` returns it and raises CheckSkipped when it got no answer: once the model has
    timed out on it, no other check waits out the limit again for the same request;
  - a slow model: when one steady call (call_s) takes slow_s or more (a twelfth of the limit, 1 to 5 s),
    the checks that send variants of the configured request are skipped with the reason unless named by
    id (needs_variants, CheckConfig.named_checks), so that a slow model costs its first calls, not one
    call per variant of every check.
"""

from __future__ import annotations

import statistics
import time
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import httpx

from contract_tests.check_config import Payload
from contract_tests.result import CheckSkipped
from contract_tests.running import RunningContainer
from contract_tests.target import AFTER_HEALTHY, CheckContext, Target
from emulator.config import ContractLimits

#: Response bodies are read up to this many times the cap, then the size is reported as "at least".
RESPONSE_READ_FACTOR = 4
#: Characters of a response body quoted in a failure message.
BODY_EXCERPT = 200
#: Characters of a body quoted in the "every answer was an error" note.
NOTE_EXCERPT = 80
#: After /ping's first 200, the configured request is sent again while it gets a server error (or no
#: connection), for up to this long: a model still loading behind a healthy /ping.
READY_WINDOW_S = 10.0
READY_RETRY_S = 0.25
#: Calls after the first ones, for the steady state the first call is compared with.
STEADY_CALLS = 2
#: invocations.warm-first-call warns when the first call is this many times slower than the next ones ...
WARM_FACTOR = 5.0
#: ... and slower than this.
WARM_MIN_S = 1.0
#: A model is slow when one steady call of the configured request takes this share of the invocation
#: limit (5 s at SageMaker's 60 s), bounded to SLOW_MIN_S..SLOW_MAX_S: then the checks that need requests
#: of their own (variants of the configured one) are skipped unless named (see needs_variants). The ~12
#: such requests of one run add at most about a minute below it; a model answering in under a second is
#: never slow (a loaded machine must not make a good image skip checks).
SLOW_SHARE = 1 / 12
SLOW_MIN_S = 1.0
SLOW_MAX_S = 5.0


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
    #: no answer within the invocation time limit (a kind of `error`)
    timed_out: bool = False

    @property
    def answered(self) -> bool:
        return self.status is not None

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    @property
    def server_error(self) -> bool:
        """A 5xx, or a connection that failed (not a timeout): what a model not loaded yet gives."""
        return (self.status is not None and self.status >= 500) or (
            self.status is None and not self.timed_out
        )

    def describe(self) -> str:
        if self.status is None:
            return self.error or "no answer"
        return f"HTTP {self.status} in {self.elapsed_s * 1000:.0f} ms"

    def excerpt(self, limit: int = BODY_EXCERPT) -> str:
        """The body's start as text, or `<N bytes of TYPE>` for a binary body (an image, a tensor)."""
        start = self.body[:limit]
        text = start.decode("utf-8", "replace")
        if "\x00" in text or text[:-3].count("\ufffd") or any(c < " " and c not in "\t\r\n" for c in text):
            kind = self.headers.get("content-type") or "binary data"
            return f"<{self.size:,} bytes of {kind}>"
        return text.strip() + ("…" if len(self.body) > limit else "")


def invoke(
    ctx: CheckContext,
    client: httpx.Client,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    read_limit: int | None = None,
) -> Answer:
    """POST /invocations (the configured payload unless `body`), within the invocation time limit.

    The configured payload goes with the configured Content-Type and Accept (CheckConfig.accept);
    `headers` are added last (they may replace those). The answer is read to its end, or up to
    `read_limit` bytes. A timeout or a dropped connection is an Answer with `status=None` and `error`
    saying which; the elapsed time covers the whole answer. `client` is the check's own
    (RunningContainer.client): one per check, since making one costs ~50 ms.
    """
    limits = ctx.config.limits
    timeout = limits.invocation_timeout_s
    request_headers = {"Content-Type": ctx.config.content_type, "Accept-Encoding": "identity"}
    if body is None and ctx.config.accept:
        request_headers["Accept"] = ctx.config.accept
    request_headers.update(headers or {})
    content = ctx.config.payload if body is None else body
    started = time.monotonic()
    timed_out = False
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
        error, timed_out = f"no answer within {timeout:g} s", True
    except httpx.HTTPError as exc:
        error = f"no answer: the connection failed ({type(exc).__name__}: {exc or 'no detail'})"
    return Answer(None, httpx.Headers(), b"", 0, time.monotonic() - started, error=error, timed_out=timed_out)


def payload_headers(payload: Payload) -> dict[str, str]:
    """The headers `payload` is sent with (its Content-Type, and Accept when it has one)."""
    headers = {"Content-Type": payload.content_type}
    if payload.accept:
        headers["Accept"] = payload.accept
    return headers


def describe_payload(payload: Payload) -> str:
    accept = f", Accept {payload.accept}" if payload.accept else ""
    return f"{payload.source} ({len(payload.body):,} bytes, {payload.content_type}{accept})"


def container_note(container: RunningContainer) -> str:
    """' The container exited with code N.' when it did (else ''), for failure messages."""
    state = container.state()
    return "" if state.running else f" The container exited with code {state.exit_code}."


def log_lines(container: RunningContainer, lines: int = 10) -> str:
    tail = container.log_tail(lines)
    return f"\nLast log lines:\n{tail}" if tail else ""


def errors_note(answers: Iterable[Answer]) -> str:
    """' (every answer was an error: HTTP 500 'why'; see invocations.serves)' when none of `answers` got
    a status below 400, else '': a check that judged only error answers must not read as a plain pass."""
    seen = list(answers)
    if not seen or any(a.status is not None and a.status < 400 for a in seen):
        return ""
    example = next((a for a in seen if a.answered), seen[0])
    if example.answered:
        body = example.excerpt(NOTE_EXCERPT)
        what = f"HTTP {example.status}" + (f" {body!r}" if body else "")
    else:
        what = example.error or "no answer"
    return f" (every answer was an error: {what}; see invocations.serves)"


def noted(message: str, answers: Iterable[Answer]) -> str:
    """`message` led by errors_note's note when every answer was an error: the report shows a passed
    check's first words only, and a pass judged on error answers must say so there."""
    note = errors_note(answers).strip()
    return f"{note} {message}" if note else message


@dataclass(frozen=True)
class FirstCall:
    """One of the first invocations, sent right after /ping first answered 200."""

    answer: Answer
    #: seconds after /ping's first 200 it was sent
    sent_s: float

    def to_json(self) -> dict[str, object]:
        a = self.answer
        return {
            "sent_s": round(self.sent_s, 3),
            "status": a.status,
            "elapsed_s": round(a.elapsed_s, 3),
            "error": a.error,
            "body": a.excerpt(NOTE_EXCERPT) if a.answered and not a.ok else None,
        }


@dataclass
class _Run:
    #: the first calls (None: the shared container never became healthy, or the probe did not run)
    first_calls: list[FirstCall] | None = None
    #: the configured request's steady-state answer, sent once per run
    baseline: Answer | None = None
    #: answers to the configured payloads (invocations.serves), by payload index
    served: dict[int, Answer] = field(default_factory=dict)


#: Per-run observations of this group, keyed by the run's Target.
_RUNS: weakref.WeakKeyDictionary[Target, _Run] = weakref.WeakKeyDictionary()


def run_of(target: Target) -> _Run:
    run = _RUNS.get(target)
    if run is None:
        run = _RUNS[target] = _Run()
    return run


def read_limit(ctx: CheckContext) -> int:
    return ctx.config.limits.max_response_bytes * RESPONSE_READ_FACTOR


def _first_calls_after_healthy(target: Target, container: RunningContainer) -> None:
    """The AFTER_HEALTHY hook: the configured request, sent at once after /ping's first 200 (see the
    module docstring). Its last call is the run's baseline."""
    ctx = CheckContext(target)
    run = run_of(target)
    healthy_at = time.monotonic()
    calls: list[FirstCall] = []
    with container.client() as client:

        def call() -> Answer:
            sent = time.monotonic() - healthy_at
            answer = invoke(ctx, client, read_limit=read_limit(ctx))
            calls.append(FirstCall(answer, sent))
            return answer

        answer = call()
        if answer.timed_out:
            answer = call()  # did the first call end a (lazy) load, or does every call time out?
        else:
            while answer.server_error and time.monotonic() - healthy_at < READY_WINDOW_S:
                time.sleep(READY_RETRY_S)
                answer = call()
        steady = STEADY_CALLS if answer.elapsed_s < WARM_MIN_S else 1
        while len(calls) < 2 or (steady > 0 and not answer.timed_out):
            answer = call()
            steady -= 1
            if answer.timed_out:
                break
    run.first_calls = calls
    run.baseline = calls[-1].answer


if _first_calls_after_healthy not in AFTER_HEALTHY:
    AFTER_HEALTHY.append(_first_calls_after_healthy)


def first_calls(ctx: CheckContext) -> list[FirstCall]:
    """The first calls to the shared healthy container; CheckSkipped when it never became healthy."""
    ctx.target.healthy()
    calls = run_of(ctx.target).first_calls
    if not calls:
        raise CheckSkipped("no invocation was sent right after /ping first answered 200")
    return calls


def steady(ctx: CheckContext, client: httpx.Client) -> Answer:
    """The configured request's steady-state answer: sent once per run (by the first calls, or here)."""
    run = run_of(ctx.target)
    if run.baseline is None:
        run.baseline = invoke(ctx, client, read_limit=read_limit(ctx))
    return run.baseline


def timed_out(ctx: CheckContext) -> bool:
    """True when the configured request has already been seen to get no answer in time (steady state)."""
    run = run_of(ctx.target)
    return run.baseline is not None and run.baseline.timed_out


def call_s(target: Target) -> float | None:
    """The configured request's steady per-call time: the median of the first calls after the first one
    that were answered (the first may be a lazy load), else the baseline's; None when not seen yet."""
    run = run_of(target)
    later = [c.answer for c in (run.first_calls or [])[1:] if c.answer.answered]
    if later:
        return statistics.median(a.elapsed_s for a in later[-STEADY_CALLS:])
    if run.baseline is not None and run.baseline.answered:
        return run.baseline.elapsed_s
    return None


def slow_s(limits: ContractLimits) -> float:
    """The per-call time from which the model counts as slow (SLOW_SHARE of the invocation limit)."""
    return min(SLOW_MAX_S, max(SLOW_MIN_S, limits.invocation_timeout_s * SLOW_SHARE))


def slow(ctx: CheckContext) -> float | None:
    """The steady per-call time when the model is slow (see slow_s), else None."""
    took = call_s(ctx.target)
    return took if took is not None and took >= slow_s(ctx.config.limits) else None


def variants_skip(ctx: CheckContext, check_id: str, requests: int) -> CheckSkipped | None:
    """Why a check that sends `requests` requests of its own (variants of the configured one) is not run:
    the model is slow and the user did not name the check (`--check ID`); None: run it."""
    took = slow(ctx)
    if took is None or check_id in ctx.config.named_checks:
        return None
    n = f"the {requests} requests" if requests > 1 else "the request"
    return CheckSkipped(
        f"one invocation takes {took:.1f} s (slow: {slow_s(ctx.config.limits):g} s or more): {n} of this "
        f"check would add about {requests * took:.0f} s; run it alone with --check {check_id} to run it "
        "anyway" + errors_note(a for a in [run_of(ctx.target).baseline] if a is not None)
    )


def needs_variants(ctx: CheckContext, check_id: str, requests: int) -> None:
    """Raise variants_skip's CheckSkipped, if any: a slow model does not cost a full call per variant of
    every check."""
    skip = variants_skip(ctx, check_id, requests)
    if skip is not None:
        raise skip


def baseline(ctx: CheckContext, client: httpx.Client) -> Answer:
    """The configured request's answer (sent once per run, see steady()); CheckSkipped when it got no
    answer (invocations.timely's failure: no check waits out the limit again)."""
    answer = steady(ctx, client)
    if not answer.answered:
        raise CheckSkipped(
            f"POST /invocations with the configured payload got {answer.describe()} (seen once, not sent "
            "again); see invocations.timely"
        )
    return answer


def served_answers(ctx: CheckContext, payloads: tuple[Payload, ...]) -> list[Answer]:
    """The shared container's answer to each configured payload, each sent once per run (the first
    is the steady-state baseline): what invocations.serves and serverless.payload-size judge."""
    container = ctx.target.healthy()
    run = run_of(ctx.target)
    with container.client() as client:
        for i, payload in enumerate(payloads):
            if i not in run.served:
                run.served[i] = (
                    steady(ctx, client)
                    if i == 0
                    else invoke(
                        ctx,
                        client,
                        body=payload.body,
                        headers=payload_headers(payload),
                        read_limit=read_limit(ctx),
                    )
                )
    return [run.served[i] for i in range(len(payloads))]
