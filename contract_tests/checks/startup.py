"""Start checks: `docker run IMAGE serve` comes up and answers its health checks (hosting contract
§3.1 Launch, §3.3 HTTP server, §3.4 Health checks, §3.5 SAGEMAKER_BIND_TO_PORT).

All five judge ONE shared container start, `ctx.target.startup()`: its Startup record says whether the
container exited, when /ping first answered at all and first answered 200, the slowest /ping and the
body of the first 200. Once the container is healthy, a few more pings (FOLLOW_UP_PINGS, sent once per
run and shared by these checks) show the steady state: still 200, still fast, still an ignorable body.

The shared start and pings, and the wording of what was seen, are in start_run.py; reading the log
in start_logs.py.

Which check reports what, so that one broken rule fails one check:
  exited (or Docker could not start it)     start.no-exit; listens/healthy/ping-body skip
  no HTTP answer at all on the port          start.listens; ping-fast/ping-body skip
  HTTP answers, but no 200 in time           start.healthy
  /ping slower than the ping timeout         start.ping-fast; listens/healthy skip when no ping
                                             got any HTTP answer in time
  a 200 with a big or binary body            start.ping-body
"""

from __future__ import annotations

import time

from contract_tests.checks.start_logs import exited_verdict, log_block
from contract_tests.checks.start_run import (
    describe_ping,
    dur,
    follow_ups,
    last_seen,
    ping_evidence,
    plural,
    port_of,
    run_of,
    startup_evidence,
    startup_of,
)
from contract_tests.registry import check
from contract_tests.result import CheckFailed, CheckSkipped
from contract_tests.target import CheckContext

#: A 200 /ping body up to this size, of text, is ignorable. SageMaker documents "HTTP 200 with an
#: empty body"; common servers answer `OK`, `\n` or `{"status": "Healthy"}`, which SageMaker accepts.
#: A larger body (an HTML page, a dump of the model's metadata) or a binary one is not ignorable.
PING_BODY_IGNORABLE_BYTES = 1024

_SHOWN_BODY = 80


@check(
    "start.no-exit",
    "`docker run IMAGE serve` keeps running",
    "SageMaker starts the container with `docker run IMAGE serve` (the `serve` argument replaces the "
    "image's CMD); the image's ENTRYPOINT must accept `serve` and keep the server running in the "
    "foreground, or the variant fails with CannotStartContainerError (hosting contract §3.1, Launch).",
    fix="Make the ENTRYPOINT accept the argument `serve` and run the model server in the foreground "
    "(exec it, do not daemonise it); with no ENTRYPOINT, install an executable named `serve` on the PATH. "
    "When the container's log names a cause (a Python error, a model folder not found in /opt/ml/model), "
    "the failure leads with that line: fix that first, the ENTRYPOINT may be right.",
    before="""
        # `docker run IMAGE serve` replaces CMD with `serve`, which is no program in this image
        CMD ["python3", "/opt/program/server.py"]
    """,
    after="""
        # `serve` arrives as an argument of the ENTRYPOINT, which ignores it and runs in the foreground
        ENTRYPOINT ["python3", "/opt/program/server.py"]
    """,
)
def no_exit(ctx: CheckContext) -> str:
    image = ctx.config.image
    try:
        startup = startup_of(ctx)
    except CheckSkipped:
        error = run_of(ctx).start_error
        ctx.evidence["docker_error"] = error
        raise CheckFailed(
            f"`docker run {image} serve` could not start the container; Docker said: {error}. "
            f"SageMaker reports this as CannotStartContainerError. Give the image an exec-form ENTRYPOINT "
            f"that accepts `serve`, or, with no ENTRYPOINT, an executable named `serve` on the PATH.",
            docker_error=error,
        ) from None
    ctx.evidence.update(startup_evidence(startup))
    if startup.exited:
        raise exited_verdict(ctx, startup)
    if startup.healthy:
        container = ctx.target.healthy()
        state = container.state()
        if not state.running:
            logs = container.log_tail()
            raise CheckFailed(
                f"`docker run {image} serve` answered GET /ping 200 after "
                f"{dur(startup.first_healthy_s or 0)}, then exited with code {state.exit_code}. "
                f"{log_block(logs)}\n"
                f"Keep the server process running in the foreground as the container's main process.",
                exit_code=state.exit_code,
                logs=logs,
            )
        return f"the container is running ({dur(time.monotonic() - container.started_at)} after start)"
    return f"the container kept running for the whole startup wait ({dur(startup.elapsed_s)})"


@check(
    "start.listens",
    "Something answers HTTP on port 8080 (or SAGEMAKER_BIND_TO_PORT)",
    "The server listens on port 8080 for GET /ping and POST /invocations, or on the port in "
    "SAGEMAKER_BIND_TO_PORT when the platform sets it (inference pipelines, multi-container endpoints) "
    "(hosting contract §3.3 HTTP server, §3.5).",
    fix="Listen on 0.0.0.0 (not 127.0.0.1) on port 8080, or on $SAGEMAKER_BIND_TO_PORT when it is set.",
    before="""
        app.run(host="127.0.0.1", port=5000)  # Flask's defaults: unreachable from outside the container
    """,
    after="""
        app.run(host="0.0.0.0", port=int(os.environ.get("SAGEMAKER_BIND_TO_PORT", "8080")))
    """,
)
def listens(ctx: CheckContext) -> str:
    startup = startup_of(ctx)
    ctx.evidence.update(startup_evidence(startup))
    ctx.evidence["container_port"] = ctx.config.container_port
    where = port_of(ctx)
    if startup.first_response_s is not None:
        return f"HTTP answered on container {where} {dur(startup.first_response_s)} after start"
    if startup.exited:
        raise CheckSkipped(
            f"the container exited with code {startup.exit_code} before anything answered; see start.no-exit"
        )
    timeout = ctx.config.limits.ping_timeout_s
    if startup.slowest_ping_s >= timeout:
        # Docker's port proxy closes a connection at once when nothing listens inside: a connection
        # held open for the whole ping timeout means a server accepted it and is too slow to answer.
        raise CheckSkipped(
            f"connections to container {where} were accepted but not answered within the {timeout:g} s ping "
            f"timeout ({last_seen(startup)}); the server is listening but slow: see start.ping-fast"
        )
    bind = ctx.config.environment.get("SAGEMAKER_BIND_TO_PORT")
    port = ctx.config.container_port
    why = (
        f"SageMaker set SAGEMAKER_BIND_TO_PORT={bind}, so the server must listen on {port}"
        if bind
        else "with no SAGEMAKER_BIND_TO_PORT the server must listen on 8080"
        if port == 8080
        else f"the container port is {port}"
    )
    raise CheckFailed(
        f"nothing answered HTTP on container {where} in {dur(startup.elapsed_s)}: "
        f"{plural(startup.attempts, 'GET /ping attempt')} through the published port, none got an HTTP "
        f"response; last: {last_seen(startup)}. (Docker's port proxy accepts TCP connections even when "
        f"nothing listens inside; only an HTTP response counts.) {log_block(startup.logs)}\n"
        f"{why[0].upper()}{why[1:]}, on 0.0.0.0 (a server bound to 127.0.0.1 inside the container cannot "
        f"be reached).",
        container_port=port,
        last_observation=startup.last_observation,
        logs=startup.logs,
    )


@check(
    "start.healthy",
    "GET /ping answers 200 within the startup timeout",
    "After the container starts, SageMaker polls GET /ping; the container must begin consistently "
    "answering HTTP 200 within the startup health-check timeout (8 minutes; per-variant "
    "ContainerStartupHealthCheckTimeoutInSeconds), else the endpoint fails with 'did not pass the ping "
    "health check' (hosting contract §3.4 Health checks).",
    fix="Answer GET /ping with HTTP 200 as soon as the model is loaded, and keep answering 200; load "
    "the model fast enough (or raise ContainerStartupHealthCheckTimeoutInSeconds) to be healthy in time.",
    before="""
        model = None  # loaded by the first POST /invocations, which never comes: /ping says 503 forever

        @app.get("/ping")
        def ping():
            return ("", 200) if model is not None else ("", 503)
    """,
    after="""
        model = load_model("/opt/ml/model")  # at startup, before the server listens

        @app.get("/ping")
        def ping():
            return "", 200
    """,
)
def healthy(ctx: CheckContext) -> str:
    startup = startup_of(ctx)
    ctx.evidence.update(startup_evidence(startup))
    limit = ctx.config.limits.startup_timeout_s
    if not startup.healthy:
        # No 200 because of a cause another check reports: skip, so that one broken rule fails one check.
        if startup.exited:
            raise CheckSkipped(
                f"the container exited with code {startup.exit_code} before /ping answered 200; "
                f"see start.no-exit"
            )
        if startup.first_response_s is None:
            timeout = ctx.config.limits.ping_timeout_s
            why = "see start.ping-fast" if startup.slowest_ping_s >= timeout else "see start.listens"
            raise CheckSkipped(f"GET /ping never got an HTTP answer ({last_seen(startup)}); {why}")
        answered = f"the first HTTP answer came {dur(startup.first_response_s)} after start"
        slow = ""
        if startup.slowest_ping_s >= ctx.config.limits.ping_timeout_s:
            slow = (
                f" Some pings took longer than the {ctx.config.limits.ping_timeout_s:g} s ping timeout "
                f"(see start.ping-fast)."
            )
        raise CheckFailed(
            f"GET /ping did not answer 200 within the startup timeout of {limit:g} s: "
            f"{plural(startup.attempts, 'attempt')} "
            f"over {dur(startup.elapsed_s)}, {answered}; last: {last_seen(startup)}.{slow} "
            f"{log_block(startup.logs)}\n"
            f"Answer GET /ping with HTTP 200 once the model is loaded, within {limit:g} s of the start.",
            last_observation=startup.last_observation,
            logs=startup.logs,
        )
    first = startup.first_healthy_s or 0.0
    if first > limit:
        raise CheckFailed(
            f"the first GET /ping 200 came {dur(first)} after start, later than the startup timeout of "
            f"{limit:g} s (last: {last_seen(startup)}). Load the model faster, or raise "
            f"ContainerStartupHealthCheckTimeoutInSeconds.",
            first_healthy_s=first,
        )
    pings = follow_ups(ctx)
    ctx.evidence["follow_up_pings"] = ping_evidence(pings)
    # A follow-up that timed out is start.ping-fast's finding; any other non-200 is an unhealthy answer.
    bad = [p for p in pings if not p.timed_out and p.status != 200]
    if bad:
        seen = ", ".join(describe_ping(p) for p in pings)
        raise CheckFailed(
            f"GET /ping answered 200 {dur(first)} after start, but then {len(bad)} of {len(pings)} "
            f"follow-up pings were not 200 ({seen}). SageMaker needs /ping to answer 200 consistently and "
            f"replaces an instance whose /ping stops doing so. Keep answering 200 while the server can "
            f"serve invocations.",
            first_healthy_s=first,
        )
    return (
        f"first GET /ping 200 {dur(first)} after start (limit {limit:g} s), then "
        f"{len(pings)} of {len(pings)} follow-up pings 200"
    )


@check(
    "start.ping-fast",
    "Every GET /ping is answered within the ping timeout (2 s)",
    "Each SageMaker health-check ping times out after 2 seconds; a ping that times out counts as "
    "unhealthy (hosting contract §3.4 Health checks).",
    fix="Answer /ping from a cheap, non-blocking handler (no model call, no lock shared with "
    "inference), so that it returns within the ping timeout even while the server is busy.",
    before="""
        @app.get("/ping")
        def ping():
            model.predict(SAMPLE)  # a health check that runs the model: seconds under load
            return "", 200
    """,
    after="""
        @app.get("/ping")
        def ping():
            return "", 200  # the model was loaded at startup; inference has its own workers
    """,
)
def ping_fast(ctx: CheckContext) -> str:
    startup = startup_of(ctx)
    limit = ctx.config.limits.ping_timeout_s
    ctx.evidence.update(startup_evidence(startup))
    if not startup.healthy:
        # The startup pings are all there is to judge, and slow ones may be why it never became healthy.
        if startup.slowest_ping_s >= limit:
            raise CheckFailed(
                f"GET /ping was not answered within the {limit:g} s ping timeout: the slowest of "
                f"{plural(startup.attempts, 'attempt')} took {dur(startup.slowest_ping_s)}, and /ping never "
                f"answered 200 (last: {last_seen(startup)}). SageMaker counts every ping slower than "
                f"{limit:g} s as failed. {log_block(startup.logs)}\n"
                f"Answer /ping from a cheap handler that returns within {limit:g} s.",
                slowest_ping_s=startup.slowest_ping_s,
            )
        if startup.first_response_s is None:
            why = "see start.no-exit" if startup.exited else "see start.listens"
            raise CheckSkipped(f"no GET /ping was answered ({last_seen(startup)}); {why}")
        return (
            f"every GET /ping answered within {limit:g} s (slowest {dur(startup.slowest_ping_s)} over "
            f"{plural(startup.attempts, 'attempt')}; the container never became healthy: see start.healthy)"
        )
    pings = follow_ups(ctx)
    ctx.evidence["follow_up_pings"] = ping_evidence(pings)
    slow = [p for p in pings if p.timed_out or p.elapsed_s >= limit]
    if slow:
        seen = ", ".join(describe_ping(p) for p in pings)
        raise CheckFailed(
            f"after the container became healthy, {len(slow)} of {len(pings)} GET /ping took {limit:g} s or "
            f"more ({seen}); SageMaker counts each ping slower than {limit:g} s as failed and replaces the "
            f"instance. Answer /ping from a cheap handler that returns within {limit:g} s.",
            slowest_ping_s=max(p.elapsed_s for p in pings),
        )
    slowest = max(p.elapsed_s for p in pings)
    if startup.slowest_ping_s >= limit:
        # Before the first 200 a slow ping is one failed attempt; SageMaker retries until the timeout.
        ctx.warn(
            f"a GET /ping during startup took {dur(startup.slowest_ping_s)} (over the {limit:g} s ping "
            f"timeout); SageMaker counts it as a failed attempt and retries"
        )
    return (
        f"every GET /ping answered within {limit:g} s: slowest {dur(slowest)} over {len(pings)} pings to the "
        f"healthy container (startup: slowest {dur(startup.slowest_ping_s)} "
        f"over {plural(startup.attempts, 'attempt')})"
    )


def _not_ignorable(body: bytes) -> str | None:
    """Why a 200 /ping body is not ignorable, or None when it is (see PING_BODY_IGNORABLE_BYTES)."""
    if len(body) > PING_BODY_IGNORABLE_BYTES:
        return f"{len(body):,} bytes, over the {PING_BODY_IGNORABLE_BYTES:,} bytes tolerated"
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return f"{len(body):,} bytes of binary data (not UTF-8 text)"
    if any(ord(c) < 32 and c not in "\t\r\n" for c in text):
        return f"{len(body):,} bytes with control characters (not text)"
    return None


@check(
    "start.ping-body",
    "A 200 GET /ping has an empty or ignorable body",
    "SageMaker's health check is 'HTTP 200 with an empty body' (hosting contract §3.4 Health checks). "
    f"smlocal tolerates up to {PING_BODY_IGNORABLE_BYTES} bytes of text (e.g. `OK` or "
    '`{"status": "Healthy"}`), with a warning; a larger or binary body fails.',
    fix="Answer a healthy GET /ping with HTTP 200 and an empty body (Content-Length: 0), or at most a "
    "short text such as `OK`.",
    before="""
        @app.get("/ping")
        def ping():
            return jsonify(model_card)  # kilobytes of model metadata on every health check
    """,
    after="""
        @app.get("/ping")
        def ping():
            return "", 200
    """,
)
def ping_body(ctx: CheckContext) -> str:
    startup = startup_of(ctx)
    if not startup.healthy:
        why = "see start.no-exit" if startup.exited else "see start.healthy"
        raise CheckSkipped(f"GET /ping never answered 200 ({last_seen(startup)}); {why}")
    pings = follow_ups(ctx)
    bodies = [startup.ping_body] + [p.body for p in pings if p.status == 200]
    body = max(bodies, key=len)
    ctx.evidence["body_bytes"] = [len(b) for b in bodies]
    ctx.evidence["body_start"] = body[:_SHOWN_BODY].decode("utf-8", errors="replace")
    found = next(((b, reason) for b in bodies if (reason := _not_ignorable(b))), None)
    if found is not None:
        bad, problem = found
        shown = bad[:_SHOWN_BODY].decode("utf-8", errors="replace")
        raise CheckFailed(
            f"a 200 GET /ping answered with a body of {problem}; it starts {shown!r}. SageMaker's health "
            f"check is HTTP 200 with an empty body, and every ping (one every few seconds, for the life of "
            f"the instance) pays for it. Answer /ping with an empty body (Content-Length: 0), or at most a "
            f"short text such as `OK`.",
            body_bytes=len(bad),
        )
    if body:
        ctx.warn(
            f"GET /ping 200 has a {len(body)}-byte body ({body[:_SHOWN_BODY].decode()!r}); SageMaker "
            f"documents an empty body"
        )
        return f"200 /ping bodies are short text (at most {len(body)} bytes: {body.decode()!r})"
    return f"200 /ping bodies are empty ({len(bodies)} answers)"
