"""invocations checks: POST /invocations and the server behind it (hosting contract §3.3, §3.4, §3.6).

Every request carries the configured payload and content type (CheckConfig.payload / content_type /
accept) and `Accept-Encoding: identity` (SageMaker's own headers are undocumented; a compressed answer
would hide its size). The container may answer that payload with any status: only the rule in question
is judged, and a check that saw only error answers says so (invocations.serves judges those).
All checks use the shared healthy container; none leaves a request in flight on a container that meets
the rules.

The requests themselves, and what a run shares between checks (the first calls after /ping's first
200, the baseline answer, the slow-model rule), are in contract_tests/checks/calls.py.
"""

from __future__ import annotations

import statistics
import time
import uuid
from typing import NoReturn

from contract_tests.checks.calls import (
    NOTE_EXCERPT,
    STEADY_CALLS,
    WARM_FACTOR,
    WARM_MIN_S,
    Answer,
    baseline,
    container_note,
    describe_payload,
    errors_note,
    first_calls,
    invoke,
    log_lines,
    needs_variants,
    noted,
    run_of,
    served_answers,
    steady,
    variants_skip,
)
from contract_tests.registry import check
from contract_tests.result import CheckFailed, CheckSkipped
from contract_tests.target import CheckContext, Payload, RunningContainer

# ---------------------------------------------------------------------------------------- invocations


SERVES_FIX = (
    "Make the model answer its input with a 2xx: read the log for the error (a missing model_fn or "
    "handler, a model file not found: code or weights the image ships under /opt/ml/model are hidden by "
    "the model mount, so put them elsewhere, e.g. /opt/program), and give the checks an input the model "
    "accepts (`--payload FILE --content-type T`, several times for several inputs)."
)

#: Added to the fix when an input sent without Accept was answered 406.
NO_ACCEPT_FIX = (
    " The 406 came to a request without an Accept header: boto3 sends none unless the caller gives one "
    "(invoke_endpoint(..., Accept=...)), and SageMaker forwards what it got, so treat a missing Accept "
    "as */* (in Flask, `request.accept_mimetypes` is empty then); if every client of yours sends one, "
    "give it to the checks with --accept T."
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
    payloads = ctx.config.payloads
    answers = served_answers(ctx, payloads)
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
    no_accept = any(a.status == 406 and not p.accept for p, a in zip(payloads, answers, strict=True))
    raise CheckFailed(
        f"no invocation succeeded: POST /invocations with {every}. SageMaker would answer every client "
        f"request with ModelError.{container_note(container)} Fix: {SERVES_FIX}"
        f"{NO_ACCEPT_FIX if no_accept else ''}{log_lines(container)}"
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
    calls = run_of(ctx.target).first_calls or []
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
