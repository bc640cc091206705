"""shutdown checks: SIGTERM stops the container within the grace period (hosting contract §3.1).

Each check starts its own container (it is stopped by the check), so that the shared one is undisturbed;
shutdown.idle and shutdown.early judge one trial on one container (checks/sigterm.py), and
shutdown.in-flight does not wait out the grace period again for a container that trial saw ignore SIGTERM,
and does not judge a request that one invocation's time keeps from ending inside the grace period.
"""

from __future__ import annotations

import http.client
import socket
import time
from urllib.parse import urlsplit

from contract_tests.checks import calls, sigterm
from contract_tests.registry import check
from contract_tests.result import CheckFailed, CheckSkipped
from contract_tests.running import RunningContainer
from contract_tests.sockets import readable
from contract_tests.target import CheckContext

SHUTDOWN_FIX = (
    "Start the server with an exec-form ENTRYPOINT so that it is PID 1 and receives SIGTERM, and on "
    "SIGTERM stop accepting work, finish the requests in flight and exit."
)
IN_FLIGHT_FIX = (
    "On SIGTERM stop accepting new connections but let the requests in flight finish (a graceful "
    "shutdown, e.g. gunicorn's graceful_timeout, uvicorn's default), then exit before the grace period ends."
)
#: How long the check keeps its request in flight after SIGTERM (at most a quarter of the grace period).
IN_FLIGHT_HOLD_S = 0.5
#: shutdown.in-flight is not judged when its request would be answered later than this share of the
#: grace period after SIGTERM (the hold plus one invocation's time): a slow answer is no dropped one.
IN_FLIGHT_SHARE = 0.9


def _known_call_s(ctx: CheckContext) -> float | None:
    """One invocation's time as the first calls saw it (calls.call_s); None when they did not run
    in this run; CheckSkipped when they got no answer in time (not waited out again)."""
    took = calls.call_s(ctx.target)
    if took is None and calls.timed_out(ctx):
        raise CheckSkipped(
            "POST /invocations with the configured payload gets no answer within "
            f"{ctx.config.limits.invocation_timeout_s:g} s (seen by the first calls, not sent again): no "
            "request can be answered in flight; see invocations.timely"
        )
    return took


def _timed_call_s(ctx: CheckContext, container: RunningContainer) -> float:
    """One configured request timed on `container`; CheckSkipped when it gets no answer in time."""
    with container.client() as client:
        answer = calls.invoke(ctx, client)
    if not answer.answered:
        raise CheckSkipped(
            f"POST /invocations with the configured payload got {answer.describe()}: no request can be "
            "answered in flight; see invocations.timely"
        )
    return answer.elapsed_s


def _judgeable(ctx: CheckContext, took: float, hold: float) -> None:
    """CheckSkipped when a request taking `took` s, held `hold` s after SIGTERM, cannot end well inside
    the grace period: its missing answer would not tell a dropped request from a slow one."""
    grace = ctx.config.limits.stop_grace_s
    if took + hold > IN_FLIGHT_SHARE * grace:
        raise CheckSkipped(
            f"one invocation takes {took:.1f} s: a request in flight at SIGTERM (held {hold:g} s after it) "
            f"would be answered about {took + hold:.1f} s after SIGTERM, too close to (or past) the "
            f"{grace:g} s grace period to tell a dropped request from a slow one; not judged"
        )


def _start_healthy(ctx: CheckContext) -> RunningContainer:
    """A fresh container of its own (the check stops it), healthy; CheckSkipped when it never gets there."""
    container = ctx.target.start()
    startup = container.wait_startup()
    if not startup.healthy:
        raise CheckSkipped(
            f"a fresh container never became healthy ({startup.last_observation}); see start.healthy"
        )
    return container


@check(
    "shutdown.idle",
    "an idle container exits on SIGTERM within the grace period",
    "To stop a container SageMaker sends SIGTERM, then SIGKILL 30 seconds later; the server must "
    "exit on SIGTERM before that (hosting contract §3.1).",
    SHUTDOWN_FIX,
    before=(
        "#!/bin/sh\n# serve, the ENTRYPOINT script: PID 1 stays this shell, the server never sees SIGTERM\n"
        'python3 /opt/program/server.py "$@" &\ntail -f /dev/null'
    ),
    after=(
        "#!/bin/sh\n# the server replaces the shell: it is PID 1 and gets SIGTERM\n"
        'exec python3 /opt/program/server.py "$@"'
    ),
)
def idle(ctx: CheckContext) -> str:
    grace = ctx.config.limits.stop_grace_s
    seen = sigterm.trial(ctx)
    ctx.evidence.update(
        exit_code=seen.first_exit if seen.exited_on_first else seen.second_exit,
        seconds_to_exit=round(seen.first_took_s if seen.exited_on_first else seen.second_took_s or 0, 3),
        signalled_after_ready_s=round(seen.first_after_ready_s, 3),
        processes_before=sigterm.tree(seen.before),
    )
    if seen.exited_on_first:
        ctx.evidence["sigterm_outcome"] = sigterm.EXITED
        return (
            f"exited {seen.first_took_s:.2f} s after SIGTERM with code {seen.first_exit} (sent "
            f"{seen.first_after_ready_s * 1000:.0f} ms after the first /ping 200; grace {grace:g} s)"
        )
    if not seen.ignores_always:
        ctx.evidence.update(
            sigterm_outcome=sigterm.NO_HANDLER_YET,
            second_signalled_after_ready_s=round(seen.second_after_ready_s or 0, 3),
        )
        return (
            f"exited {seen.second_took_s or 0:.2f} s after SIGTERM with code {seen.second_exit}, sent "
            f"{seen.second_after_ready_s or 0:.1f} s after the first /ping 200 (grace {grace:g} s); an "
            "earlier SIGTERM, right after the first /ping 200, was ignored: see shutdown.early"
        )
    after = seen.after_second if seen.second_sent else seen.after_first
    diagnosis = sigterm.diagnose(seen.before, after)
    ctx.evidence.update(sigterm_outcome=diagnosis.outcome, processes_after=sigterm.tree(after))
    if seen.second_sent:
        took = seen.second_took_s or 0.0
        ctx.evidence["second_signalled_after_ready_s"] = round(seen.second_after_ready_s or 0, 3)
        signals = "a first SIGTERM, right after the first /ping 200, was ignored too"
    else:
        took = seen.first_took_s
        ctx.evidence["seconds_to_exit"] = round(took, 3)
        signals = (
            f"SIGTERM sent {seen.first_after_ready_s * 1000:.0f} ms after the first /ping 200; not sent "
            "again, the process tree shows why"
        )
    raise CheckFailed(
        f"the idle container was still running {took:.1f} s after SIGTERM: SageMaker would SIGKILL it "
        f"after {grace:g} s ({signals}). "
        f"{diagnosis.seen} Last log lines:\n{seen.log_tail}\nFix: {diagnosis.fix}",
        log_tail=seen.log_tail,
    )


@check(
    "shutdown.early",
    "a SIGTERM right after the container turns healthy stops it",
    "SageMaker may stop a container as soon as it is healthy (a failed deployment, an update, a "
    "scale-in), with SIGTERM, then SIGKILL 30 seconds later; the server must handle SIGTERM from its "
    "first /ping 200 on (hosting contract §3.1).",
    sigterm.EARLY_FIX,
    before=(
        "start_http_server()          # /ping answers 200 from here\n"
        "model = load_model()         # a SIGTERM meanwhile is dropped: PID 1 has no handler yet\n"
        "signal.signal(signal.SIGTERM, stop)"
    ),
    after=("signal.signal(signal.SIGTERM, stop)  # first thing\nmodel = load_model()\nstart_http_server()"),
)
def early(ctx: CheckContext) -> str:
    grace = ctx.config.limits.stop_grace_s
    seen = sigterm.trial(ctx)
    after_ready = seen.first_after_ready_s
    if seen.exited_on_first:
        return (
            f"exited {seen.first_took_s:.2f} s after a SIGTERM sent {after_ready * 1000:.0f} ms after the "
            f"first /ping 200, with code {seen.first_exit}"
        )
    if seen.ignores_always:
        raise CheckSkipped(
            "not judged on its own: the container ignores SIGTERM whenever it comes (see shutdown.idle)"
        )
    second = seen.second_after_ready_s or 0.0
    ctx.evidence.update(
        sigterm_outcome=sigterm.NO_HANDLER_YET,
        signalled_after_ready_s=round(after_ready, 3),
        second_signalled_after_ready_s=round(second, 3),
        exit_code=seen.second_exit,
        seconds_to_exit_after_second=round(seen.second_took_s or 0, 3),
        processes_before=sigterm.tree(seen.before),
        processes_after=sigterm.tree(seen.after_first),
    )
    raise CheckFailed(
        f"a SIGTERM sent {after_ready * 1000:.0f} ms after the first /ping 200 was ignored: the container "
        f"still ran {seen.first_took_s:.1f} s later (SageMaker would SIGKILL it after {grace:g} s); a "
        f"second SIGTERM, {second:.1f} s after the first /ping 200, stopped it in "
        f"{seen.second_took_s or 0:.2f} s (code {seen.second_exit}). PID 1 has no SIGTERM handler yet "
        "when it reports healthy (the kernel drops a signal that PID 1 does not handle). Last log "
        f"lines:\n{seen.log_tail}\nFix: {sigterm.EARLY_FIX}",
        log_tail=seen.log_tail,
    )


@check(
    "shutdown.in-flight",
    "a request in flight at SIGTERM is answered, then the container exits",
    "After SIGTERM SageMaker allows 30 seconds before SIGKILL; a request in flight that can finish in "
    "that time must get its answer, and the container must exit within it (hosting contract §3.1).",
    IN_FLIGHT_FIX,
    before="signal.signal(signal.SIGTERM, lambda *_: os._exit(0))  # drops the requests in flight",
    after=(
        "# stop accepting, finish the requests in flight, then exit\n"
        "signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())\n"
        "# gunicorn: --graceful-timeout 25; uvicorn: graceful by default"
    ),
)
def in_flight(ctx: CheckContext) -> str:
    config = ctx.config
    grace = config.limits.stop_grace_s
    body = config.payload
    if not body:
        raise CheckSkipped("the payload is empty: a request needs a body to be held in flight")
    hold = min(IN_FLIGHT_HOLD_S, grace / 4)
    took = _known_call_s(ctx)
    if took is not None:
        _judgeable(ctx, took, hold)  # before a container is started for nothing
    container = _start_healthy(ctx)
    if took is None:  # run without the shared container: time one request on this one
        _judgeable(ctx, _timed_call_s(ctx, container), hold)
    url = urlsplit(container.base_url)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    head = (
        f"POST /invocations HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: {config.content_type}\r\n"
        f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n"
    ).encode("latin-1")
    first, rest = body[: len(body) // 2], body[len(body) // 2 :]
    with socket.create_connection((host, port), timeout=config.limits.ping_timeout_s) as sock:
        sock.sendall(head)
        # The server has read the headers once it answers `100 Continue`. One that does not send
        # interim responses gets the accept window to read them before the body follows.
        continued, interim = _await_continue(sock, config.limits.accept_timeout_s)
        ctx.evidence["continue"] = continued
        if interim is not None:
            raise CheckSkipped(
                f"the server answered the request before its body was sent ({interim!r}), so no request "
                "could be held in flight; see the invocations.* checks"
            )
        sock.sendall(first)

        runtime, container_id = container.runtime, container.handle.id
        signalled = time.monotonic()
        runtime.signal(container_id, "SIGTERM")
        # The request stays in flight for `hold` seconds after SIGTERM (a request with that much work
        # left, far inside the grace period) before the rest of its body is sent; a server that drops
        # it closes the connection meanwhile, which ends the wait early.
        if readable(sock, hold):
            ctx.evidence["server_sent_or_closed_after_s"] = round(time.monotonic() - signalled, 3)
        answer, seen = _finish_request(sock, rest, signalled + grace, grace)
        answered_s = time.monotonic() - signalled
    known = sigterm.known_trial(ctx.target)
    ignores = known is not None and known.ignores_always
    # A container the SIGTERM trial saw ignore SIGTERM is not waited for again (its grace is known).
    left = 0.0 if ignores else max(0.0, signalled + grace - time.monotonic())
    code = runtime.wait_exit(container_id, left)
    took = time.monotonic() - signalled
    ctx.evidence.update(
        response=seen,
        exit_code=code,
        seconds_to_answer=round(answered_s, 3) if answer else None,
        seconds_to_exit=round(took, 3) if code is not None else None,
    )
    if code is not None:
        exit_text = f"the container exited {took:.2f} s after SIGTERM with code {code}"
    elif ignores:
        ctx.evidence["exit_not_awaited"] = "shutdown.idle"
        exit_text = (
            f"the container does not exit on SIGTERM (shutdown.idle saw it still running {grace:g} s after "
            "SIGTERM; not waited for again)"
        )
    else:
        exit_text = f"the container was still running {took:.1f} s after SIGTERM (SageMaker would SIGKILL it)"
        if known is not None and not known.exited_on_first:  # it stops on a later SIGTERM only
            exit_text += "; a SIGTERM this soon after the first /ping 200 is ignored: see shutdown.early"
    if answer is None:
        tail = container.log_tail()
        raise CheckFailed(
            f"a request in flight when SIGTERM arrived (headers and half its body sent, the rest "
            f"{hold:g} s after SIGTERM) got no answer: {seen}; {exit_text}. Last log lines:\n{tail}\n"
            f"Fix: {IN_FLIGHT_FIX}",
            log_tail=tail,
        )
    if code is None:
        tail = container.log_tail()
        raise CheckFailed(
            f"the request in flight was answered ({answer} {answered_s * 1000:.0f} ms after SIGTERM), but "
            f"{exit_text}: it must exit within the {grace:g} s grace period. Last log lines:\n{tail}\n"
            f"Fix: {SHUTDOWN_FIX}",
            log_tail=tail,
        )
    return f"the request in flight got {answer} {answered_s * 1000:.0f} ms after SIGTERM; {exit_text}"


def _await_continue(sock: socket.socket, timeout_s: float) -> tuple[bool, bytes | None]:
    """Wait (bounded) for an interim `100 Continue` and consume it; a final response is left unread.

    Returns (whether 100 Continue came, the status line of a final response the server sent early).
    """
    started = time.monotonic()
    while (left := started + timeout_s - time.monotonic()) > 0:
        if not readable(sock, left):
            break
        peeked = sock.recv(4096, socket.MSG_PEEK)
        if not peeked:
            break  # closed: reading the response will tell
        if b"\r\n" not in peeked:
            time.sleep(0.005)  # the status line is still arriving (bounded by the deadline)
            continue
        if not peeked.startswith((b"HTTP/1.1 100", b"HTTP/1.0 100")):
            return False, peeked.split(b"\r\n", 1)[0]
        end = peeked.find(b"\r\n\r\n")
        if end >= 0:
            sock.recv(end + 4)  # consume exactly the interim response
            return True, None
        time.sleep(0.005)
    return False, None


def _finish_request(
    sock: socket.socket, rest: bytes, deadline: float, grace_s: float
) -> tuple[str | None, str]:
    """Send the rest of the body and read the whole response: (`HTTP <status>` or None, what was seen)."""
    try:
        sock.sendall(rest)
    except OSError as exc:
        return None, f"sending the rest of the body failed: {type(exc).__name__}: {exc}"
    sock.settimeout(max(0.1, deadline - time.monotonic()))
    response = http.client.HTTPResponse(sock, method="POST")
    try:
        response.begin()  # skips interim 1xx responses
        content = response.read()
    except http.client.RemoteDisconnected:
        return None, "the connection was closed without a response"
    except http.client.IncompleteRead as exc:
        return None, (
            f"HTTP {response.status} with an incomplete body ({len(exc.partial)} bytes, then the "
            "connection closed)"
        )
    except TimeoutError:
        return None, f"no complete response within the {grace_s:g} s grace period"
    except OSError as exc:
        return None, f"{type(exc).__name__}: {exc}"
    except http.client.HTTPException as exc:
        return None, f"a malformed response: {type(exc).__name__}: {exc}"
    finally:
        response.close()
    return f"HTTP {response.status}", f"HTTP {response.status} with a {len(content)}-byte body"
