"""invocations checks on the HTTP envelope of an invocation: the headers and sizes of requests and answers
(hosting contract §3.3, §3.6): the answer's Content-Type, headers SageMaker adds, a body at the payload
cap, an answer within it.

Like contract_tests/checks/invocations.py, every check uses the shared healthy container and the
configured request (CheckConfig.payload / content_type / accept), after `baseline()`; the requests
themselves are in contract_tests/checks/calls.py.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import NoReturn

from contract_tests.checks.calls import (
    Answer,
    baseline,
    container_note,
    errors_note,
    invoke,
    log_lines,
    needs_variants,
    noted,
    variants_skip,
)
from contract_tests.registry import check
from contract_tests.result import CheckFailed, CheckSkipped
from contract_tests.running import RunningContainer
from contract_tests.target import CheckContext

CONTENT_TYPE_FIX = (
    "Set a Content-Type header on every answer to /invocations that says what the body is (SageMaker "
    "returns it to the client as ContentType), and answer a request that carries an Accept without a "
    "server error (`*/*` accepts anything; an Accept you cannot produce deserves 406)."
)

#: The Accept a client sends when its caller chose none: the SageMaker Python SDK's Predictor sends its
#: deserializer's ACCEPT, `*/*` for the default BytesDeserializer (python-requests and curl send `*/*`
#: too). boto3 and the AWS CLI send no Accept unless given one: the configured request without --accept
#: is that client. [U] what SageMaker forwards when the client sent none (hosting contract §3.6).
CLIENT_ACCEPT = "*/*"

#: The fix for a JSON body labelled as something else (Flask labels a str return text/html).
MISLABELLED_FIX = (
    "Label a JSON answer `Content-Type: application/json`: in Flask return `flask.jsonify(result)` or "
    "`flask.Response(body, mimetype='application/json')` (a str returned from a view is labelled "
    "`text/html; charset=utf-8`), in FastAPI a dict or JSONResponse, with http.server send the header."
)


def _media(answer: Answer) -> str:
    label: str = answer.headers.get("content-type", "")
    return label.split(";", 1)[0].strip().lower()


def _json_body(answer: Answer) -> bool:
    """The answer's body is a JSON object or array (a bare number or string could be any text)."""
    body = answer.body.strip()
    if answer.truncated or not body or body[:1] not in (b"{", b"["):
        return False
    try:
        json.loads(body)
    except ValueError:
        return False
    return True


def _mislabelled(answers: dict[str, Answer]) -> str | None:
    """The warning for 2xx answers whose body is JSON but whose Content-Type says otherwise, or None."""
    wrong = {
        name: a
        for name, a in answers.items()
        if a.ok
        and _json_body(a)
        and _media(a)
        and not (_media(a).endswith("/json") or _media(a).endswith("+json"))
    }
    if not wrong:
        return None
    label = next(iter(wrong.values())).headers.get("content-type", "")
    media = _media(next(iter(wrong.values())))
    return (
        f"the body is JSON but labelled {media}: POST /invocations with {' and with '.join(wrong)} was "
        f"answered with a JSON body and Content-Type: {label}. SageMaker returns that label to the client "
        f"as ContentType: clients that pick a parser by it (or show text/html as a page) do not read JSON. "
        f"Fix: {MISLABELLED_FIX}"
    )


def _accepts(accept: str, media: str) -> bool:
    """`media` is one of the types (or type/* or */*) the Accept header lists."""
    for item in accept.split(","):
        wanted = item.split(";", 1)[0].strip().lower()
        if wanted in ("*/*", media) or (wanted.endswith("/*") and media.startswith(wanted[:-1])):
            return True
    return False


@check(
    "invocations.content-type",
    "answers carry a Content-Type that says what the body is; an Accept is handled",
    "SageMaker forwards the client's Content-Type and Accept and copies the container's response "
    "Content-Type to the client as ContentType (hosting contract §3.6). A 2xx answer with a body must "
    "carry a Content-Type, and a request with the Accept a client sends by default (the SageMaker Python "
    "SDK's `*/*`; boto3 sends none, and what SageMaker forwards then is undocumented [U]) must be answered "
    "without a 5xx. A JSON body labelled as another type (Flask's `text/html` for a returned str) is a "
    "warning.",
    CONTENT_TYPE_FIX,
    before="""@app.post("/invocations")
def invocations():
    return json.dumps(predict(request.get_json()))  # Flask labels a str: text/html; charset=utf-8""",
    after="""@app.post("/invocations")
def invocations():
    return flask.jsonify(predict(request.get_json()))  # application/json""",
)
def content_type(ctx: CheckContext) -> str:
    container = ctx.target.healthy()
    ct, accept = ctx.config.content_type, ctx.config.accept
    plain_name = f"Content-Type: {ct}" + (f", Accept: {accept}" if accept else "")
    with container.client() as client:
        plain = baseline(ctx, client)
        skip = variants_skip(ctx, "invocations.content-type", 1)
        if skip is not None:
            _content_type_of_baseline(ctx, container, plain, plain_name, skip)
        if accept == CLIENT_ACCEPT:  # the configured request is the SDK's: try boto3's, without Accept
            probe_name, probe_what = f"Content-Type: {ct} and no Accept", "no Accept (boto3's default)"
            probe = invoke(ctx, client, body=ctx.config.payload)
        else:
            probe_name = f"Content-Type: {ct}, Accept: {CLIENT_ACCEPT}"
            probe_what = (
                f"Accept: {CLIENT_ACCEPT} (what the SageMaker Python SDK's Predictor sends by default)"
            )
            probe = invoke(ctx, client, headers={"Accept": CLIENT_ACCEPT})
    answers = {plain_name: plain, probe_name: probe}
    ctx.evidence["answers"] = {
        name: {"status": a.status, "error": a.error, "content_type": a.headers.get("content-type")}
        for name, a in answers.items()
    }
    problems: list[str] = []
    if plain.status is not None and plain.status < 500:
        if not probe.answered:
            problems.append(f"POST /invocations with {probe_what} got {probe.describe()}")
        elif probe.server_error:
            problems.append(
                f"POST /invocations with {probe_what} was answered HTTP {probe.status} "
                f"({probe.excerpt()!r}) where the same request with {plain_name} gets HTTP {plain.status}"
            )
    checked = 0
    for name, answer in answers.items():
        if answer.status is None:
            continue
        has_type = bool(answer.headers.get("content-type", "").strip())
        if answer.ok and answer.size:
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
    mislabelled = _mislabelled(answers)
    if mislabelled:
        ctx.warn(mislabelled)
    elif accept and plain.ok and _media(plain) and not _accepts(accept, _media(plain)):
        ctx.warn(f"Accept: {accept} was answered with Content-Type {_media(plain)}")
    if problems:
        raise CheckFailed(
            "; ".join(problems) + f".{container_note(container)} Fix: {CONTENT_TYPE_FIX}",
            log_tail=container.log_tail(),
        )
    if not checked:
        raise CheckSkipped(
            f"no 2xx answer with a body to check (HTTP {plain.status}, HTTP {probe.status}): configure "
            "a payload the model accepts to check the response Content-Type" + errors_note([plain, probe])
        )
    return (
        f"answered HTTP {plain.status} with Content-Type {plain.headers.get('content-type')!r}; with "
        f"{probe_what.split(' (', 1)[0]}, HTTP {probe.status} with Content-Type "
        f"{probe.headers.get('content-type')!r}"
    )


def _content_type_of_baseline(
    ctx: CheckContext, container: RunningContainer, plain: Answer, name: str, skipped: CheckSkipped
) -> NoReturn:
    """invocations.content-type on a slow model: the configured request's answer alone is judged (a 2xx
    body without a Content-Type fails, a mislabelled JSON body warns); the Accept variant is not sent,
    so the check is skipped."""
    ctx.evidence["answers"] = {
        name: {
            "status": plain.status,
            "error": plain.error,
            "content_type": plain.headers.get("content-type"),
        }
    }
    has_type = bool(plain.headers.get("content-type", "").strip())
    if plain.ok and plain.size and not has_type:
        raise CheckFailed(
            f"POST /invocations with {name} was answered HTTP {plain.status} with a {plain.size}-byte body "
            f"and no Content-Type header.{container_note(container)} Fix: {CONTENT_TYPE_FIX}",
            log_tail=container.log_tail(),
        )
    mislabelled = _mislabelled({name: plain})
    if mislabelled:
        ctx.warn(mislabelled)
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
