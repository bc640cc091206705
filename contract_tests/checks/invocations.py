"""invocations checks: POST /invocations and the server behind it (hosting contract §3.3, §3.4, §3.6).

Every request carries the configured payload and content type (CheckConfig.payload / content_type /
accept) and `Accept-Encoding: identity` (SageMaker's own headers are undocumented; a compressed answer
would hide its size). The container may answer that payload with any status: only the rule in question
is judged, and a check that saw only error answers says so (invocations.serves judges those).
All checks use the shared healthy container; none leaves a request in flight on a container that meets
the rules.

The requests themselves, and what a run shares between checks (the first calls after /ping's first
200, the baseline answer, the slow-model rule), are in contract_tests/checks/calls.py; the checks on the
headers and sizes of requests and answers in contract_tests/checks/envelope.py.
"""

from __future__ import annotations

import statistics

from contract_tests.check_config import Payload
from contract_tests.checks.calls import (
    NOTE_EXCERPT,
    STEADY_CALLS,
    WARM_FACTOR,
    WARM_MIN_S,
    Answer,
    container_note,
    describe_payload,
    first_calls,
    log_lines,
    noted,
    run_of,
    served_answers,
    steady,
)
from contract_tests.registry import check
from contract_tests.result import CheckFailed, CheckSkipped
from contract_tests.target import CheckContext

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
