"""start.bind-to-port: the image can join a multi-container model or an inference pipeline (hosting
contract §3.5, §4): it carries the label `com.amazonaws.sagemaker.capabilities.accept-bind-to-port=true`
and its server listens on $SAGEMAKER_BIND_TO_PORT, and not on 8080, when the platform sets it.

It runs only when the image carries the label: without it SageMaker refuses the image in a
multi-container model whatever its server does, and a single-container endpoint never sets the
variable, so the check is SKIPPED with a note (no container started: `smlocal check` stays as fast on
an ordinary image). No warning for an unlabelled image that would honour the variable: the note says
what to add, and finding out would cost every ordinary image a container start for nothing. A label
with another value than `true` is SKIPPED too, with a warning: its author meant something.

With the label: ONE container of its own, started with SAGEMAKER_BIND_TO_PORT=BIND_PORT and
SAGEMAKER_SAFE_PORT_RANGE=SAFE_PORT_RANGE (the ports are smlocal's choice: SageMaker documents the
variables, not the values), both BIND_PORT and 8080 published on 127.0.0.1. Each round pings BIND_PORT
and, until that answers 200, 8080; once BIND_PORT is healthy 8080 is watched for DEFAULT_PORT_WATCH_S
more (two servers of one image need not open together). Any HTTP answer on 8080 FAILS: the server
ignores the variable, or (BIND_PORT answering too, within BOTH_PORTS_GRACE_S) listens on both. A
container that exits or never gets healthy with the variables set FAILS if the shared start without
them (start.healthy) got healthy, else the check SKIPS to start.healthy (or to start.no-exit when
Docker cannot start the image at all): one broken rule fails one check.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx

from contract_tests.http_client import container_client
from contract_tests.registry import check
from contract_tests.result import CheckFailed, CheckSkipped
from contract_tests.running import RunningContainer
from contract_tests.target import CheckContext
from emulator.errors import EngineError
from emulator.model import platform_env
from emulator.model.containers import ACCEPT_BIND_TO_PORT_LABEL
from emulator.model.messages import missing_bind_to_port_label

#: The ports the emulator tells the first container of a multi-container instance (platform_env):
#: other than 8080 and clear of ports servers commonly open besides (TorchServe's 8081/8082,
#: uvicorn's 8000, TF Serving's 8500/8501, Flask's 5000).
_FIRST = platform_env.multi_container_ports(0)
#: The port the check asks for (SAGEMAKER_BIND_TO_PORT).
BIND_PORT = _FIRST.bind_port
#: SAGEMAKER_SAFE_PORT_RANGE as the platform sets it with SAGEMAKER_BIND_TO_PORT: "XXXX-YYYY" inclusive.
SAFE_PORT_RANGE = _FIRST.safe_port_range
#: Once 8080 answered, how long the bind port may take to answer too (then: "listens on both"; a
#: server's start can take seconds on a loaded machine).
BOTH_PORTS_GRACE_S = 5.0
#: Once the bind port is healthy, how long 8080 is watched for a second server (then: "listens on both").
DEFAULT_PORT_WATCH_S = 3.0


@dataclass
class _Port:
    """What one container port answered: the last observation, and the first HTTP status (if any)."""

    port: int
    probes: int = 0
    status: int | None = None
    #: seconds from start to the first HTTP answer of any status (None: never)
    answered_s: float | None = None
    last: str = "not probed"

    def probe(self, client: httpx.Client, url: str, started_at: float) -> int | None:
        self.probes += 1
        sent = time.monotonic()
        try:
            response = client.get(f"{url}/ping")
        except httpx.TimeoutException:
            self.last = "no HTTP answer within the ping timeout"
            return None
        except httpx.HTTPError as exc:
            self.last = f"no HTTP answer ({type(exc).__name__})"
            return None
        took = time.monotonic() - sent
        self.last = f"HTTP {response.status_code} in {took * 1000:.0f} ms"
        if self.answered_s is None:
            self.answered_s, self.status = sent + took - started_at, response.status_code
        return response.status_code

    def evidence(self) -> dict[str, object]:
        answered = None if self.answered_s is None else round(self.answered_s, 3)
        return {"probes": self.probes, "first_status": self.status, "answered_s": answered, "last": self.last}


@dataclass
class _Seen:
    bind: _Port
    default: _Port
    healthy_s: float | None = None
    exit_code: int | None = None
    exited: bool = False
    elapsed_s: float = 0.0


def _watch(ctx: CheckContext, container: RunningContainer, default_port: int) -> _Seen:
    """Poll both published ports until BIND_PORT answers 200 (then 8080 once more), 8080 answers at all,
    the container exits, or the startup timeout passes."""
    limits = ctx.config.limits
    seen = _Seen(_Port(BIND_PORT), _Port(default_port))
    published = container.handle.published_ports
    if BIND_PORT not in published or default_port not in published:
        state = container.state()  # a container that exited at once has no published ports
        if state.running:
            raise RuntimeError(f"the engine published {dict(published)}, not {BIND_PORT} and {default_port}")
        seen.exited, seen.exit_code = True, state.exit_code
        seen.elapsed_s = time.monotonic() - container.started_at
        return seen
    bind_url, default_url = container.url_of(BIND_PORT), container.url_of(default_port)
    deadline = container.started_at + limits.startup_timeout_s
    fresh = httpx.Limits(max_keepalive_connections=0)  # a new connection per probe: nothing is reused
    with container_client(timeout=limits.ping_timeout_s, limits=fresh) as client:
        while True:
            state = container.state()
            if not state.running:
                seen.exited, seen.exit_code = True, state.exit_code
                break
            if time.monotonic() >= deadline:
                break
            if seen.bind.probe(client, bind_url, container.started_at) == 200:
                seen.healthy_s = time.monotonic() - container.started_at
                watch = time.monotonic() + DEFAULT_PORT_WATCH_S
                while seen.default.probe(client, default_url, container.started_at) is None:
                    if time.monotonic() >= watch or not container.state().running:
                        break
                    time.sleep(ctx.config.poll_interval_s)
                break
            if seen.default.probe(client, default_url, container.started_at) is not None:
                # A failure either way; whether the server ignores the variable or listens on both, the
                # bind port tells within a short grace (two servers of one image need not open together).
                grace = time.monotonic() + BOTH_PORTS_GRACE_S
                while seen.bind.probe(client, bind_url, container.started_at) is None:
                    if time.monotonic() >= grace or not container.state().running:
                        break
                    time.sleep(ctx.config.poll_interval_s)
                break
            time.sleep(ctx.config.poll_interval_s)
    seen.elapsed_s = time.monotonic() - container.started_at
    return seen


def _s(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _logs(container: RunningContainer) -> str:
    tail = container.log_tail(10)
    return (
        "Last log lines:\n" + "\n".join(f"    {ln}" for ln in tail.splitlines()) if tail else "No log lines."
    )


FIX = (
    "Listen on the port in SAGEMAKER_BIND_TO_PORT when it is set (8080 otherwise), and only there; put any "
    "second port the server opens (metrics, management) in SAGEMAKER_SAFE_PORT_RANGE. An image that cannot "
    f"do that must not carry the label {ACCEPT_BIND_TO_PORT_LABEL}=true: it then serves single-container "
    "endpoints only."
)


@check(
    "start.bind-to-port",
    "Listens on SAGEMAKER_BIND_TO_PORT, not 8080 (images labelled for multi-container use)",
    "In inference pipelines and multi-container endpoints SageMaker gives every container its own "
    "SAGEMAKER_BIND_TO_PORT (and SAGEMAKER_SAFE_PORT_RANGE for any second port) and accepts only images "
    f"labelled {ACCEPT_BIND_TO_PORT_LABEL}=true (hosting contract §3.5, §4). With the label, the server "
    "must answer on that port and not on 8080 (smlocal starts it with SAGEMAKER_BIND_TO_PORT="
    f"{BIND_PORT} and SAGEMAKER_SAFE_PORT_RANGE={SAFE_PORT_RANGE}, values of its choosing, and watches both "
    f"{BIND_PORT} and 8080); without the label the check is skipped: the image cannot join a multi-container "
    "model.",
    fix=FIX,
    before="""
        # the image has LABEL com.amazonaws.sagemaker.capabilities.accept-bind-to-port=true, but:
        app.run(host="0.0.0.0", port=8080)
    """,
    after="""
        import os

        app.run(host="0.0.0.0", port=int(os.environ.get("SAGEMAKER_BIND_TO_PORT", "8080")))
    """,
)
def bind_to_port(ctx: CheckContext) -> str:
    image = ctx.config.image
    value = ctx.target.image.labels.get(ACCEPT_BIND_TO_PORT_LABEL)
    ctx.evidence["label"] = value
    if value != "true":
        if value is not None:
            ctx.warn(
                f"the label {ACCEPT_BIND_TO_PORT_LABEL} is {value!r}, not 'true' (what SageMaker's message "
                f"asks for; smlocal counts only 'true')"
            )
        raise CheckSkipped(
            f"the image has no label {ACCEPT_BIND_TO_PORT_LABEL}=true, so it cannot join a "
            f"multi-container model or an inference pipeline: SageMaker fails such an endpoint with "
            f'"{missing_bind_to_port_label(image)}" (single-container endpoints need neither the label nor '
            f"SAGEMAKER_BIND_TO_PORT). To use it there, make the server listen on $SAGEMAKER_BIND_TO_PORT "
            f"and add `LABEL {ACCEPT_BIND_TO_PORT_LABEL}=true`; this check then verifies it."
        )
    shared = ctx.target.startup_seen()
    if shared is not None and not shared.healthy:
        raise CheckSkipped(
            f"the container never became healthy ({shared.last_observation}); see start.healthy"
        )
    default_port = ctx.config.limits.container_port
    variables = {"SAGEMAKER_BIND_TO_PORT": str(BIND_PORT), "SAGEMAKER_SAFE_PORT_RANGE": SAFE_PORT_RANGE}
    try:
        container = ctx.target.start(variables, container_port=BIND_PORT, extra_ports=(default_port,))
    except EngineError:
        if ctx.target.startup().start_error is not None:  # the image cannot run at all: one check says so
            raise CheckSkipped("Docker could not start the container; see start.no-exit") from None
        raise  # the engine failing for this container alone is no verdict on the image: ERROR
    seen = _watch(ctx, container, default_port)
    ctx.evidence.update(
        environment=variables,
        bind_port=seen.bind.evidence(),
        default_port=seen.default.evidence(),
        healthy_s=None if seen.healthy_s is None else round(seen.healthy_s, 3),
        exit_code=seen.exit_code,
    )
    given = f"SAGEMAKER_BIND_TO_PORT={BIND_PORT} (SAGEMAKER_SAFE_PORT_RANGE={SAFE_PORT_RANGE})"
    bind, default = seen.bind, seen.default
    if default.answered_s is not None:
        if seen.healthy_s is not None or bind.answered_s is not None:
            what = (
                f"GET /ping answered on port {BIND_PORT} ({bind.last}), but port {default_port} answered "
                f"HTTP {default.status} as well: the server listens on both. In a multi-container instance "
                f"{default_port} is outside the container's ports and may be another container's"
            )
        else:
            what = (
                f"the server ignores the variable: port {default_port} answered GET /ping HTTP "
                f"{default.status} {_s(default.answered_s)} after start, while port {BIND_PORT} gave "
                f"{bind.last}. SageMaker sends this container's health checks and invocations to its "
                f"SAGEMAKER_BIND_TO_PORT, so a "
                f"multi-container endpoint or pipeline with this image would fail its ping health check"
            )
        raise CheckFailed(
            f"the image carries {ACCEPT_BIND_TO_PORT_LABEL}=true and was started with {given}; {what}. "
            f"{_logs(container)}\nListen on $SAGEMAKER_BIND_TO_PORT only when it is set, or remove the label."
        )
    if seen.healthy_s is None:
        startup = ctx.target.startup()  # the shared start without the variables: the same problem there?
        if not startup.healthy:
            raise CheckSkipped(
                f"the container never became healthy ({startup.last_observation}); see start.healthy"
            )
        how = (
            f"exited with code {seen.exit_code} after {_s(seen.elapsed_s)}"
            if seen.exited
            else f"gave no GET /ping 200 on port {BIND_PORT} in {_s(seen.elapsed_s)} (last: {bind.last})"
        )
        if default.probes:
            how += f", and nothing answered on port {default_port} either ({default.last})"
        raise CheckFailed(
            f"the image carries {ACCEPT_BIND_TO_PORT_LABEL}=true, but started with {given} the container "
            f"{how}; started without them it became healthy (start.healthy). {_logs(container)}\n"
            f"Serve on $SAGEMAKER_BIND_TO_PORT when it is set, or remove the label."
        )
    return (
        f"started with {given}: GET /ping answered 200 on port {BIND_PORT} {_s(seen.healthy_s)} after start, "
        f"and port {default_port} gave no HTTP answer ({default.probes} probes, last: {default.last}); the "
        f"image can join a multi-container model or an inference pipeline"
    )
