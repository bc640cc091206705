"""invocations checks on media types and bad input (hosting contract §3.6, §1.5, §10.1).

SageMaker forwards the client's Content-Type and Accept to the container as given and copies the
container's status: 2xx is a success, any other status becomes a ModelError (HTTP 424) for the client
with the container's status as OriginalStatusCode. 4xx and 5xx are counted apart: a 5xx is the model's
server error (Invocation5XXErrors, the metric endpoint alarms watch; "Received server error (500) from
primary" in the client's message), a 4xx is the client's mistake (Invocation4XXErrors).

Each check sends the payloads the user configured (CheckConfig.payloads) with one thing changed, on the
shared healthy container, after `baseline()` (which skips at once when the model does not answer).
"""

from __future__ import annotations

import json

import httpx

from contract_tests.check_config import Payload
from contract_tests.checks.calls import Answer, baseline, container_note, invoke, needs_variants
from contract_tests.registry import check
from contract_tests.result import CheckFailed, CheckSkipped
from contract_tests.target import CheckContext

#: Content-Type parameters clients add (`; charset=utf-8`; Java's `; charset=UTF-8`, browsers'
#: `;charset=UTF-8`): each is sent after the configured type.
CHARSET_VARIANTS = ("; charset=utf-8", ";charset=UTF-8")
#: A media type no model supports, for invocations.unsupported-media.
UNSUPPORTED_TYPE = "application/x-smlocal-unsupported"
#: The malformed body sent under a non-JSON Content-Type: bytes that are no valid text, CSV, image...
GARBAGE = b"\x00\xff\xfe\xfd smlocal: not a valid payload \x00\x80\x81"
#: Characters of an answer's body quoted in a message.
QUOTE_CHARS = 80
#: At most this many distinct Content-Types of the configured payloads are tried (one request each).
MAX_TYPES = 4


def media_type(content_type: str) -> str:
    """The media type without parameters, lower case: `text/csv; charset=utf-8` -> `text/csv`."""
    return content_type.split(";", 1)[0].strip().lower()


def is_json(content_type: str) -> bool:
    media = media_type(content_type)
    return media.endswith("/json") or media.endswith("+json")


def by_type(ctx: CheckContext) -> list[Payload]:
    """The configured payloads, the first one of each media type (the primary payload first)."""
    seen: dict[str, Payload] = {}
    for payload in ctx.config.payloads:
        seen.setdefault(media_type(payload.content_type), payload)
    return list(seen.values())[:MAX_TYPES]


def send(
    ctx: CheckContext,
    client: httpx.Client,
    payload: Payload,
    content_type: str | None = None,
    accept: str | None = None,
    body: bytes | None = None,
) -> Answer:
    """POST /invocations with `payload`, its Content-Type (or `content_type`) and Accept (or `accept`)."""
    headers = {"Content-Type": content_type or payload.content_type}
    if accept or payload.accept:
        headers["Accept"] = accept or payload.accept or ""
    return invoke(ctx, client, body=payload.body if body is None else body, headers=headers)


def is_primary(ctx: CheckContext, payload: Payload) -> bool:
    """`payload` is the configured request whose answer baseline() has (the primary payload, no Accept)."""
    return payload == ctx.config.payloads[0] and not payload.accept


def primary_answer(ctx: CheckContext, client: httpx.Client, payload: Payload, first: Answer) -> Answer:
    """The answer to `payload` as configured: `first` (baseline's) for the primary payload."""
    if is_primary(ctx, payload):
        return first
    return send(ctx, client, payload)


def refused(answer: Answer) -> bool:
    return answer.status is None or not 200 <= answer.status < 300


def server_error(answer: Answer) -> bool:
    return answer.status is None or answer.status >= 500


def quote(answer: Answer) -> str:
    """The answer and the start of its body on one line (error pages are long: the rest is in the log)."""
    text = " ".join(answer.body[: QUOTE_CHARS * 2].decode("utf-8", "replace").split())
    if not text:
        return answer.describe()
    short = text[:QUOTE_CHARS] + (
        "…" if len(text) > QUOTE_CHARS or len(answer.body) > QUOTE_CHARS * 2 else ""
    )
    return f"{answer.describe()} ({short!r})"


# ------------------------------------------------------------------------ invocations.media-params


MEDIA_PARAMS_FIX = (
    "Compare the media type, not the whole header: parse Content-Type and ignore its parameters "
    "(Flask `request.mimetype`, `content_type.split(';')[0].strip().lower()`, starlette "
    "`request.headers['content-type'].partition(';')[0]`) and honour charset when decoding text "
    "(UTF-8 when none is given)."
)

#: Who sends a media type with a charset added (the probe in one direction) ...
ADDERS = "Clients that add it (Java's HTTP clients, browsers, libraries that encode text)"
#: ... and who sends it bare (the other direction).
BARE_SENDERS = (
    "Clients that send the bare type (the SageMaker Python SDK's serializers: CSVSerializer sends "
    "`text/csv`, JSONSerializer `application/json`; boto3 and the AWS CLI send the ContentType their "
    "caller wrote)"
)


def charset_removed(content_type: str) -> str:
    """`content_type` without its charset parameter (other parameters kept, in their order)."""
    media, *params = (part.strip() for part in content_type.split(";"))
    kept = [p for p in params if p and p.split("=", 1)[0].strip().lower() != "charset"]
    return "; ".join([media, *kept])


def variants(content_type: str) -> list[tuple[str, bool]]:
    """The Content-Types to try for a configured one, each with True when it adds a charset. A bare type
    gets each of CHARSET_VARIANTS; one with a charset gets itself without it (what most clients send), and
    the CHARSET_VARIANTS spellings it does not already use."""
    if "charset" not in content_type.lower():
        return [(content_type + suffix, True) for suffix in CHARSET_VARIANTS]
    bare = charset_removed(content_type)
    spellings = [bare + suffix for suffix in CHARSET_VARIANTS]
    return [(bare, False)] + [(v, True) for v in spellings if v.strip() != content_type.strip()]


@check(
    "invocations.media-params",
    "a Content-Type with parameters (charset) is accepted like the bare type, and the other way round",
    "SageMaker forwards the client's Content-Type to the container as given (hosting contract §3.6), "
    "and clients differ: some add parameters (`application/json; charset=UTF-8` from Java's "
    "ContentType.APPLICATION_JSON, `text/plain;charset=UTF-8` from browsers' fetch with a string body, a "
    "charset from HTTP libraries that encode text for the caller), others send the bare type (the "
    "SageMaker Python SDK's CSVSerializer sends `text/csv`). A model that accepts a type (2xx) must "
    "accept it with a charset parameter too, and a model configured with a charset (`--content-type "
    "'text/csv; charset=utf-8'`) must accept the bare type. A failure: such clients get ModelError for "
    "every request, so the endpoint does not serve them.",
    MEDIA_PARAMS_FIX,
    before='if flask.request.content_type == "text/csv":   # "text/csv; charset=utf-8" -> 415\n'
    "    data = flask.request.data.decode()",
    after='if flask.request.mimetype == "text/csv":        # parameters ignored\n'
    "    data = flask.request.get_data(as_text=True)  # charset honoured",
)
def media_params(ctx: CheckContext) -> str:
    container = ctx.target.healthy()
    tried: dict[str, dict[str, object]] = {}
    added: list[str] = []
    removed: list[str] = []
    skipped: list[str] = []
    passed: list[str] = []
    with container.client() as client:
        first = baseline(ctx, client)
        payloads = by_type(ctx)
        requests = sum(len(variants(p.content_type)) + (not is_primary(ctx, p)) for p in payloads)
        needs_variants(ctx, "invocations.media-params", requests)
        for payload in payloads:
            given = payload.content_type
            bare = primary_answer(ctx, client, payload, first)
            record: dict[str, object] = {given: bare.status}
            tried[given] = record
            if refused(bare):
                skipped.append(f"Content-Type: {given} itself is answered {bare.describe()}")
                continue
            bad: list[tuple[str, bool]] = []
            for variant, adds in variants(given):
                answer = send(ctx, client, payload, content_type=variant)
                record[variant] = answer.status
                if refused(answer):
                    bad.append((f"Content-Type: {variant} was answered {quote(answer)}", adds))
            where = f", where Content-Type: {given} gets {bare.describe()}"
            if any(not adds for _, adds in bad):
                removed.append("; ".join(text for text, _ in bad) + where)
            elif bad:
                added.append("; ".join(text for text, _ in bad) + where)
            else:
                tried_as = (
                    f"with {' and '.join(repr(s) for s in CHARSET_VARIANTS)}"
                    if "charset" not in given.lower()
                    else f"also as {' and '.join(repr(v) for v, _ in variants(given))}"
                )
                passed.append(f"{given} {tried_as}")
    ctx.evidence["answers"] = tried
    if added or removed:
        raise CheckFailed(
            _media_params_failure(added, removed, container_note(container)), log_tail=container.log_tail()
        )
    if not passed:
        raise CheckSkipped(
            "no Content-Type to vary: "
            + "; ".join(skipped)
            + " (configure a payload the model accepts, with --payload and --content-type)"
        )
    return f"answered 2xx with and without a charset: {'; '.join(passed)}"


def _media_params_failure(added: list[str], removed: list[str], note: str) -> str:
    """invocations.media-params' verdict: which direction was refused, who sends it, the fix."""
    if added and removed:
        what, who = (
            "a charset parameter added to or removed from",
            f"{ADDERS}, and {BARE_SENDERS[0].lower()}{BARE_SENDERS[1:]},",
        )
    elif removed:
        what, who = "the charset parameter removed from", BARE_SENDERS
    else:
        what, who = "a charset parameter added to", ADDERS
    return (
        f"POST /invocations with {what} the Content-Type was refused: "
        + "; ".join(removed + added)
        + f". {who} would get ModelError for every request.{note} Fix: {MEDIA_PARAMS_FIX}"
    )


# ------------------------------------------------------------------- invocations.unsupported-media


UNSUPPORTED_FIX = (
    "Answer a Content-Type the model cannot read with 415 Unsupported Media Type and an Accept it cannot "
    "produce with 406 Not Acceptable (or answer in a type it can), never with an exception turned into "
    "500: raise your framework's client error (Flask `abort(415)`, FastAPI "
    "`HTTPException(status_code=415)`, sagemaker-inference's UnsupportedFormatError)."
)


@check(
    "invocations.unsupported-media",
    "an unsupported Content-Type or Accept gets a 4xx, not a 5xx (warning)",
    "SageMaker passes any Content-Type and Accept to the container (hosting contract §3.6) and counts a "
    "5xx answer as the model's server error: Invocation5XXErrors, which endpoint alarms watch, and "
    '"Received server error (500) from primary" in the ModelError the client gets (§1.8, §10.1). A '
    "request the model cannot handle is the client's error and deserves a 4xx (415, 406). A warning, "
    "not a failure: SageMaker deploys and serves such an image; only bad requests are miscounted.",
    UNSUPPORTED_FIX,
    before="def input_fn(body, content_type):\n"
    '    if content_type == "application/json":\n'
    "        return json.loads(body)\n"
    '    raise ValueError(f"unsupported {content_type}")   # -> HTTP 500',
    after="def input_fn(body, content_type):\n"
    '    if content_type == "application/json":\n'
    "        return json.loads(body)\n"
    '    flask.abort(415, f"unsupported {content_type}")   # -> HTTP 415',
)
def unsupported_media(ctx: CheckContext) -> str:
    container = ctx.target.healthy()
    payload = ctx.config.payloads[0]
    with container.client() as client:
        first = baseline(ctx, client)
        if server_error(first):
            raise CheckSkipped(
                f"the configured payload itself is answered {first.describe()}: a 5xx to an unsupported "
                "type would tell nothing (see invocations.serves)"
            )
        needs_variants(ctx, "invocations.unsupported-media", 2)
        answers = {
            f"Content-Type: {UNSUPPORTED_TYPE}": (
                send(ctx, client, payload, content_type=UNSUPPORTED_TYPE),
                "415 Unsupported Media Type",
            ),
            f"Accept: {UNSUPPORTED_TYPE}": (
                send(ctx, client, payload, accept=UNSUPPORTED_TYPE),
                "406 Not Acceptable",
            ),
        }
    ctx.evidence.update(
        status_configured=first.status, answers={name: a.status for name, (a, _) in answers.items()}
    )
    errors = [
        f"POST /invocations with {name} was answered {quote(answer)} (deserves {deserved})"
        for name, (answer, deserved) in answers.items()
        if server_error(answer)
    ]
    if errors:
        ctx.warn(
            "; ".join(errors) + ": SageMaker counts that as the model's server error "
            f"(Invocation5XXErrors, alarms). Fix: {UNSUPPORTED_FIX}"
        )
    return "; ".join(f"{name}: {answer.describe()}" for name, (answer, _) in answers.items()) + (
        f" (the configured payload: HTTP {first.status})"
    )


# ------------------------------------------------------------------ invocations.malformed-payload


MALFORMED_FIX = (
    "Validate the input and answer a payload that cannot be parsed with 400 Bad Request (catch the "
    "parser's error: json.JSONDecodeError, ValueError from CSV or image decoding; Flask "
    "`request.get_json()` and FastAPI's models do it for JSON), never with an unhandled exception (500)."
)


def malformed(payload: Payload) -> tuple[bytes, str]:
    """A body the model cannot parse under the payload's Content-Type, and what it is."""
    if is_json(payload.content_type):
        cut = payload.body[: max(1, len(payload.body) // 2)]
        try:
            json.loads(cut)
        except ValueError:
            return cut, f"the configured payload truncated to {len(cut)} byte{'' if len(cut) == 1 else 's'}"
        return b'{"smlocal": ', "a truncated JSON object"
    return GARBAGE, f"{len(GARBAGE)} bytes of binary garbage"


@check(
    "invocations.malformed-payload",
    "a malformed payload gets a 4xx, not a 5xx (warning)",
    "A payload the model cannot parse (truncated JSON, garbage bytes under the configured Content-Type) "
    "is the client's error: it deserves a 4xx (400). SageMaker counts a 5xx as the model's server error "
    '(Invocation5XXErrors, which endpoint alarms watch; "Received server error (500)" in the client\'s '
    "ModelError, hosting contract §1.8, §10.1), so one client sending bad input pages the model's owner. "
    "A warning, not a failure: SageMaker deploys and serves such an image.",
    MALFORMED_FIX,
    before="def predict():\n    rows = json.loads(flask.request.data)   # bad JSON -> HTTP 500",
    after="def predict():\n    rows = flask.request.get_json()   # bad JSON -> HTTP 400, wrong type -> 415",
)
def malformed_payload(ctx: CheckContext) -> str:
    container = ctx.target.healthy()
    seen: list[str] = []
    errors: list[str] = []
    statuses: dict[str, int | None] = {}
    with container.client() as client:
        first = baseline(ctx, client)
        if server_error(first):
            raise CheckSkipped(
                f"the configured payload itself is answered {first.describe()}: a 5xx to a malformed one "
                "would tell nothing (see invocations.serves)"
            )
        needs_variants(ctx, "invocations.malformed-payload", len(by_type(ctx)))
        for payload in by_type(ctx):
            body, what = malformed(payload)
            answer = send(ctx, client, payload, body=body)
            statuses[payload.content_type] = answer.status
            seen.append(f"{what} under Content-Type {payload.content_type}: {answer.describe()}")
            if server_error(answer):
                errors.append(
                    f"POST /invocations with {what} under Content-Type {payload.content_type} was "
                    f"answered {quote(answer)}"
                )
    ctx.evidence.update(status_configured=first.status, answers=statuses)
    if errors:
        ctx.warn(
            "; ".join(errors) + ": SageMaker counts that as the model's server error "
            f"(Invocation5XXErrors, alarms); a payload that cannot be parsed deserves 400. "
            f"Fix: {MALFORMED_FIX}"
        )
    return "; ".join(seen)
