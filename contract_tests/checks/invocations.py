"""invocations checks: POST /invocations and the server behind it (hosting contract §3.3, §3.4, §3.6).

Every request carries the configured payload and content type (CheckConfig.payload / content_type /
accept) and `Accept-Encoding: identity` (SageMaker's own headers are undocumented; a compressed answer
would hide its size). The container may answer that payload with any status: only the rule in question
is judged, and a check that saw only error answers says so (invocations.serves judges those).
All checks use the shared healthy container; none leaves a request in flight on a container that meets
the rules.

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
import uuid
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NoReturn

import httpx

from contract_tests.registry import check
from contract_tests.result import CheckFailed, CheckSkipped
from contract_tests.target import AFTER_HEALTHY, CheckContext, Payload, RunningContainer, Target
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


def _run_of(target: Target) -> _Run:
    run = _RUNS.get(target)
    if run is None:
        run = _RUNS[target] = _Run()
    return run


def _read_limit(ctx: CheckContext) -> int:
    return ctx.config.limits.max_response_bytes * RESPONSE_READ_FACTOR


def _first_calls_after_healthy(target: Target, container: RunningContainer) -> None:
    """The AFTER_HEALTHY hook: the configured request, sent at once after /ping's first 200 (see the
    module docstring). Its last call is the run's baseline."""
    ctx = CheckContext(target)
    run = _run_of(target)
    healthy_at = time.monotonic()
    calls: list[FirstCall] = []
    with container.client() as client:

        def call() -> Answer:
            sent = time.monotonic() - healthy_at
            answer = invoke(ctx, client, read_limit=_read_limit(ctx))
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
    calls = _run_of(ctx.target).first_calls
    if not calls:
        raise CheckSkipped("no invocation was sent right after /ping first answered 200")
    return calls


def steady(ctx: CheckContext, client: httpx.Client) -> Answer:
    """The configured request's steady-state answer: sent once per run (by the first calls, or here)."""
    run = _run_of(ctx.target)
    if run.baseline is None:
        run.baseline = invoke(ctx, client, read_limit=_read_limit(ctx))
    return run.baseline


def timed_out(ctx: CheckContext) -> bool:
    """True when the configured request has already been seen to get no answer in time (steady state)."""
    run = _run_of(ctx.target)
    return run.baseline is not None and run.baseline.timed_out


def call_s(target: Target) -> float | None:
    """The configured request's steady per-call time: the median of the first calls after the first one
    that were answered (the first may be a lazy load), else the baseline's; None when not seen yet."""
    run = _run_of(target)
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
        "anyway" + errors_note(a for a in [_run_of(ctx.target).baseline] if a is not None)
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


# ---------------------------------------------------------------------------------------- invocations


SERVES_FIX = (
    "Make the model answer its input with a 2xx: read the log for the error (a missing model_fn or "
    "handler, a model file not found: code or weights the image ships under /opt/ml/model are hidden by "
    "the model mount, so put them elsewhere, e.g. /opt/program), and give the checks an input the model "
    "accepts (`--payload FILE --content-type T`, several times for several inputs)."
)

#: The headline warning when no payload was given and the default one got no 2xx (issue 10's wording).
NOT_VERIFIED = "no successful invocation: the model's serving was not verified; give --payload"


@check(
    "invocations.serves",
    "the model answers its input with a 2xx",
    "SageMaker returns a container's non-2xx answer to the client as ModelError (hosting contract §3.6): "
    "an image whose every invocation is an error serves nothing although /ping is healthy. At least "
    "one of the inputs given with --payload must be answered 2xx; without --payload, no 2xx to the "
    "default `{}` is a warning (the model's serving was not verified).",
    SERVES_FIX,
    before="""COPY inference.py /opt/ml/model/code/inference.py
# at run time SageMaker mounts the model over /opt/ml/model: the code is gone,
# every request answers 500: "Please provide a model_fn implementation".""",
    after="""COPY inference.py /opt/program/inference.py
ENV SAGEMAKER_PROGRAM=inference.py SAGEMAKER_SUBMIT_DIRECTORY=/opt/program
# and check it with an input the model accepts:
#   smlocal check IMAGE --payload sample.csv --content-type text/csv""",
)
def serves(ctx: CheckContext) -> str:
    container = ctx.target.healthy()
    run = _run_of(ctx.target)
    payloads = ctx.config.payloads
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
                        read_limit=_read_limit(ctx),
                    )
                )
    answers = [run.served[i] for i in range(len(payloads))]
    ctx.evidence["answers"] = [
        {"payload": p.source, "status": a.status, "error": a.error, "body": a.excerpt(NOTE_EXCERPT)}
        for p, a in zip(payloads, answers, strict=True)
    ]

    def seen(payload: Payload, answer: Answer) -> str:
        body = f" ({answer.excerpt()!r})" if answer.answered and answer.body and not answer.ok else ""
        return f"{describe_payload(payload)}: {answer.describe()}{body}"

    ok = [i for i, a in enumerate(answers) if a.ok]
    if ok:
        if ctx.config.payload_given:
            for p, a in zip(payloads, answers, strict=True):
                if a.server_error or a.timed_out:
                    ctx.warn(f"POST /invocations with {seen(p, a)}")
        first = ok[0]
        more = f"; {len(ok)} of {len(payloads)} inputs answered 2xx" if len(payloads) > 1 else ""
        return f"POST /invocations with {seen(payloads[first], answers[first])}{more}"
    every = "; ".join(seen(p, a) for p, a in zip(payloads, answers, strict=True))
    if not ctx.config.payload_given:
        ctx.warn(NOT_VERIFIED, headline=True)
        return (
            f"no 2xx answer: POST /invocations with {every}. The model's serving was not verified: give an "
            "input it accepts with --payload FILE --content-type T"
        )
    ctx.evidence["log_tail"] = container.log_tail()
    raise CheckFailed(
        f"no invocation succeeded: POST /invocations with {every}. SageMaker would answer every client "
        f"request with ModelError.{container_note(container)} Fix: {SERVES_FIX}{log_lines(container)}"
    )


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
    before="""@app.post("/invocations")
def invocations():
    return run_all_steps(request.json)  # 90 s on the real input""",
    after="""@app.post("/invocations")
def invocations():
    return model(request.json, max_steps=20)  # within 60 s; or use async inference""",
)
def timely(ctx: CheckContext) -> str:
    container = ctx.target.healthy()
    limit = ctx.config.limits.invocation_timeout_s
    with container.client() as client:
        answer = steady(ctx, client)
    ctx.evidence.update(status=answer.status, elapsed_s=round(answer.elapsed_s, 3), limit_s=limit)
    if answer.answered and answer.elapsed_s <= limit:
        return noted(f"POST /invocations answered {answer.describe()} (limit {limit:g} s)", [answer])
    seen = (
        f"was answered HTTP {answer.status} only after {answer.elapsed_s:.2f} s"
        if answer.answered
        else f"got {answer.error}"
    )
    calls = _run_of(ctx.target).first_calls or []
    if len(calls) > 1 and all(c.answer.timed_out for c in calls):
        seen += f" ({len(calls)} times: also right after /ping first answered 200)"
    ctx.evidence["log_tail"] = container.log_tail()
    raise CheckFailed(
        f"POST /invocations with the configured payload ({len(ctx.config.payload)} bytes, "
        f"{ctx.config.content_type}) {seen}; SageMaker allows {limit:g} s.{container_note(container)} "
        f"Fix: {TIMELY_FIX}{log_lines(container)}"
    )


READY_FIX = (
    "Answer /ping 200 only once an invocation would succeed: load the model before the server starts "
    "listening (or have /ping answer 503 until a loaded flag is set), and warm it up with a request of "
    "your own before reporting healthy."
)


@check(
    "invocations.ready-when-healthy",
    "invocations succeed as soon as /ping answers 200",
    "SageMaker sends traffic to a container as soon as its /ping answers 200 (hosting contract §3.4): "
    "invocations that then fail with a server error (or find no server) while later ones succeed are "
    "client errors on every new instance (scale-out, replacement, update).",
    READY_FIX,
    before="""threading.Thread(target=load_model).start()  # in the background
@app.get("/ping")
def ping():
    return "", 200  # healthy before the model is loaded: invocations get 503""",
    after="""@app.get("/ping")
def ping():
    return ("", 200) if model_loaded.is_set() else ("", 503)""",
)
def ready_when_healthy(ctx: CheckContext) -> str:
    calls = first_calls(ctx)
    ctx.evidence["first_calls"] = [c.to_json() for c in calls]
    first = calls[0].answer
    if first.timed_out:
        raise CheckSkipped(
            f"the first invocation after /ping's 200 got {first.error}; see invocations.warm-first-call"
        )
    if not first.server_error:
        return noted(
            f"the first POST /invocations, {calls[0].sent_s * 1000:.0f} ms after /ping first answered 200, "
            f"was answered {first.describe()}",
            [first],
        )
    recovered = next((c for c in calls if not c.answer.server_error and not c.answer.timed_out), None)
    if recovered is None:
        return noted(
            f"the first POST /invocations after /ping's first 200 got {first.describe()}, and so did every "
            f"call for {calls[-1].sent_s:.1f} s ({len(calls)} calls): no sign of a model still loading",
            (c.answer for c in calls),
        )
    failing = calls[: calls.index(recovered)]
    body = f" ({first.excerpt()!r})" if first.body else ""
    raise CheckFailed(
        f"/ping answered 200 but POST /invocations with the configured payload got {first.describe()}{body} "
        f"right after it, and {len(failing)} call(s) failed like that for {recovered.sent_s:.2f} s; from "
        f"{recovered.sent_s:.2f} s after the 200 on it was answered {recovered.answer.describe()}. SageMaker "
        "sends requests as soon as /ping answers 200: these would be client errors on every new "
        f"instance. Fix: {READY_FIX}",
        log_tail=ctx.target.healthy().log_tail(),
    )


WARM_FIX = (
    "Load (and warm up) the model at startup, before /ping answers 200: not on the first request. A "
    "first call that compiles, downloads or loads weights can exceed SageMaker's 60 s limit on a real model."
)


@check(
    "invocations.warm-first-call",
    "the first invocation is not much slower than the next ones",
    "Each invocation must be answered within 60 s (hosting contract §3.3), the first one after /ping's "
    "200 included: a model loaded on the first request fails that request when the load takes longer "
    "(a failure); a first call much slower than the next ones is a lazy load that can (a warning).",
    WARM_FIX,
    before="""model = None
def predict(data):
    global model
    model = model or load_model()  # on the first request""",
    after="""model = load_model()  # at startup, before the server listens
predict(example_input)       # warm-up: compile kernels, fill caches""",
)
def warm_first_call(ctx: CheckContext) -> str:
    calls = first_calls(ctx)
    ctx.evidence["first_calls"] = [c.to_json() for c in calls]
    limit = ctx.config.limits.invocation_timeout_s
    first, later = calls[0].answer, [c.answer for c in calls[1:] if c.answer.answered]
    if first.timed_out:
        if not later:
            raise CheckSkipped(f"every invocation got {first.error}; see invocations.timely")
        fast = min(later, key=lambda a: a.elapsed_s)
        raise CheckFailed(
            f"the first POST /invocations after /ping's first 200 got {first.error} (SageMaker allows "
            f"{limit:g} s); the next one was answered {later[0].describe()} (fastest {fast.describe()}): the "
            f"model is loaded on the first request and that takes longer than the limit, so the first "
            f"client request of every new instance fails. Fix: {WARM_FIX}",
            log_tail=ctx.target.healthy().log_tail(),
        )
    if not first.answered:
        raise CheckSkipped(
            f"the first invocation after /ping's 200 got {first.describe()}; "
            "see invocations.ready-when-healthy"
        )
    if not later:
        raise CheckSkipped("no invocation after the first one was answered; see invocations.timely")
    steady_s = statistics.median(a.elapsed_s for a in later[-STEADY_CALLS:])
    shown = f"the first POST /invocations took {_s(first.elapsed_s)}, the next ones {_s(steady_s)} (median)"
    if first.elapsed_s > max(WARM_FACTOR * steady_s, WARM_MIN_S):
        ctx.warn(
            f"{shown}: the model is loaded or warmed on the first request; with a real model that first call "
            f"can exceed SageMaker's {limit:g} s limit. {WARM_FIX}"
        )
    return noted(shown, [first, *later])


def _s(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


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
    before="""def do_POST(self):
    self.send_response(200)  # no Content-Type: the client gets application/octet-stream
    self.end_headers(); self.wfile.write(result)""",
    after="""def do_POST(self):
    self.send_response(200)
    self.send_header("Content-Type", "application/json")
    self.end_headers(); self.wfile.write(result)""",
)
def content_type(ctx: CheckContext) -> str:
    container = ctx.target.healthy()
    ct = ctx.config.content_type
    with container.client() as client:
        plain = baseline(ctx, client)
        skip = variants_skip(ctx, "invocations.content-type", 1)
        if skip is not None:
            _content_type_of_baseline(ctx, container, plain, skip)
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
            + errors_note([plain, with_accept])
        )
    return (
        f"answered HTTP {plain.status} with Content-Type {plain.headers.get('content-type')!r}; with "
        f"Accept: {ct}, HTTP {with_accept.status} with Content-Type "
        f"{with_accept.headers.get('content-type')!r}"
    )


def _content_type_of_baseline(
    ctx: CheckContext, container: RunningContainer, plain: Answer, skipped: CheckSkipped
) -> NoReturn:
    """invocations.content-type on a slow model: the configured request's answer alone is judged (a 2xx
    body without a Content-Type fails); the Accept variant is not sent, so the check is skipped."""
    ctx.evidence["answers"] = {
        f"Content-Type: {ctx.config.content_type}": {
            "status": plain.status,
            "error": plain.error,
            "content_type": plain.headers.get("content-type"),
        }
    }
    has_type = bool(plain.headers.get("content-type", "").strip())
    if plain.status is not None and 200 <= plain.status < 300 and plain.size and not has_type:
        raise CheckFailed(
            f"POST /invocations with Content-Type: {ctx.config.content_type} was answered HTTP "
            f"{plain.status} with a {plain.size}-byte body and no Content-Type header."
            f"{container_note(container)} Fix: {CONTENT_TYPE_FIX}",
            log_tail=container.log_tail(),
        )
    got = plain.headers.get("content-type")
    seen = f"HTTP {plain.status} " + (f"with Content-Type {got!r}" if got else "without a Content-Type")
    raise CheckSkipped(
        f"{skipped.message.removesuffix(errors_note([plain]))} (judged on the configured request's answer "
        f"alone, {seen}; the Accept variant was not sent){errors_note([plain])}"
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
    before="""ALLOWED = {"content-type", "content-length", "accept", "host"}
if set(h.lower() for h in request.headers) - ALLOWED:
    abort(400)  # X-Amzn-Trace-Id, X-Forwarded-For... arrive from SageMaker""",
    after="""# read the headers you need; ignore the others
content_type = request.headers.get("Content-Type", "application/json")""",
)
def extra_headers(ctx: CheckContext) -> str:
    container = ctx.target.healthy()
    extra = sagemaker_headers()
    with container.client() as client:
        plain = baseline(ctx, client)
        needs_variants(ctx, "invocations.extra-headers", 1)
        with_extra = invoke(ctx, client, headers=extra)
        ctx.evidence.update(headers=extra, status_without=plain.status, status_with=with_extra.status)
        if with_extra.status == plain.status:
            return noted(f"HTTP {plain.status} both without and with {', '.join(extra)}", [plain, with_extra])
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
    before="""# nginx.conf in front of the model server
client_max_body_size 1m;   # nginx's default: 413 above 1 MB""",
    after="""client_max_body_size 6m;   # SageMaker forwards up to 6,291,456 bytes""",
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
        needs_variants(ctx, "invocations.large-body", 1)
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
    return noted(
        f"{what} was answered {big.describe()} (the usual payload: HTTP {plain.status})", [plain, big]
    )


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
    before="""return json.dumps({"embeddings": all_token_vectors})  # 20 MB of floats""",
    after="""return json.dumps({"embedding": pooled_vector})  # or: write to S3, return its URI""",
)
def response_size(ctx: CheckContext) -> str:
    container = ctx.target.healthy()
    cap = ctx.config.limits.max_response_bytes
    with container.client() as client:
        answer = baseline(ctx, client)
    declared = answer.headers.get("content-length")
    ctx.evidence.update(status=answer.status, response_bytes=answer.size, content_length=declared)
    if answer.size <= cap:
        return noted(f"HTTP {answer.status} with a {answer.size:,}-byte body (cap {cap:,} bytes)", [answer])
    size = f"at least {answer.size:,}" if answer.truncated else f"{answer.size:,}"
    raise CheckFailed(
        f"POST /invocations with the configured payload was answered HTTP {answer.status} with a body of "
        f"{size} bytes"
        + (f" (Content-Length {declared})" if declared else "")
        + f", over SageMaker's {cap:,}-byte cap: the client would get an error instead. "
        f"Fix: {RESPONSE_SIZE_FIX}"
    )
