"""serverless checks: the rules an image breaks on SageMaker serverless inference only (hosting contract
§7), run under `--profile serverless` (SKIPPED under the default realtime profile). image.size, whose
limit is a serverless rule too, stays with the image checks.

  serverless.writes-outside-tmp  a container of its own, started as serverless may run it [U]: root
                                 file system read-only, /tmp a tmpfs, an unprivileged user; it must
                                 become healthy and answer the configured request as the shared one does
  serverless.no-gpu              the shared container (never given a GPU, like every container the
                                 checker starts) must start and serve; one that fails with GPU errors in
                                 its log fails here
  serverless.payload-size        the configured requests and their answers within 4 MB
  serverless.startup-time        the shared container's first 200 from /ping within 3 minutes

Each judges one rule; a cause another check reports (the container never became healthy at all) is a
skip pointing to it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from contract_tests.check_config import SERVERLESS_MAX_PAYLOAD_BYTES
from contract_tests.checks.calls import (
    Answer,
    container_note,
    describe_payload,
    invoke,
    noted,
    read_limit,
    served_answers,
    steady,
)
from contract_tests.registry import check
from contract_tests.result import CheckFailed, CheckSkipped
from contract_tests.running import RunningContainer, Startup
from contract_tests.target import CheckContext

#: The user the sandbox runs the image as [U]: unprivileged, owning none of the image's files (Debian's
#: and most distributions' `nobody:nogroup`), whatever the image's USER says.
SANDBOX_USER = "65534:65534"
#: The sandbox's only writable folder: a tmpfs, sticky and world-writable like a normal /tmp, of the
#: 5 GB of ephemeral storage serverless gives (hosting contract §7).
SANDBOX_TMPFS = {"/tmp": "rw,exec,mode=1777,size=5g"}
#: The sandbox's wait for its first 200 from /ping: this many times the normal container's time, plus
#: SANDBOX_WAIT_S (at most the startup limit): a container stuck on a refused write costs no 8 minutes.
SANDBOX_WAIT_FACTOR = 2.0
SANDBOX_WAIT_S = 60.0
SANDBOX = (
    f"root file system read-only, /tmp the only writable folder, user {SANDBOX_USER} that owns none of "
    "the image's files"
)
#: strerror(EROFS) and strerror(EACCES), as every libc and language runtime prints them, and the names.
_WRITE_ERROR = re.compile(r"read-only file system|permission denied|\bEROFS\b|\bEACCES\b", re.IGNORECASE)
_DENIED = re.compile(r"permission denied|\bEACCES\b", re.IGNORECASE)
#: An absolute path in a log line: quoted ('/x', "/x", `/x`) first, else a bare one.
_QUOTED_PATH = re.compile(r"""['"`](/[^'"`\s]*)['"`]""")
_BARE_PATH = re.compile(r"(?<![\w.:/])(/[\w.@+-]+(?:/[\w.@+-]*)*)")
#: Log words of a program that wants a GPU it did not get (CUDA, the NVIDIA driver and its libraries).
_GPU_ERROR = re.compile(r"\b(cuda\w*|nvidia\w*|nvml|libcuda\S*|cudnn|nccl|gpus?)\b", re.IGNORECASE)
#: Image environment that asks the NVIDIA container runtime for GPUs (set by the nvidia/cuda images).
GPU_ENV = ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_REQUIRE_CUDA", "NVIDIA_DRIVER_CAPABILITIES")
_SHOWN_LINES = 5

WRITES_FIX = (
    "Write only under /tmp at run time: point caches and scratch files there (TMPDIR, HOME, "
    "XDG_CACHE_HOME, HF_HOME, MPLCONFIGDIR, NUMBA_CACHE_DIR ... =/tmp/...), send logs to stdout/stderr "
    "rather than files, move a web server's pid and temp files to /tmp (nginx: pid, *_temp_path), and "
    "make the image's own files readable by any user (`RUN chmod -R o+rX /opt/program`). SageMaker's "
    "advice for permission errors on serverless, chmod o+rwX, lets a user other than root write a path; "
    "this check also makes the root file system read-only [U], so that only /tmp passes here."
)
GPU_FIX = (
    "Serve on CPU when no GPU is there: pick the device at start (`device = 'cuda' if "
    "torch.cuda.is_available() else 'cpu'`), load weights with map_location=device, do not exit or fail "
    "/ping without CUDA; or deploy the GPU image to a real-time endpoint on a GPU instance."
)
PAYLOAD_FIX = (
    "Keep requests and answers within 4 MB on serverless: send smaller inputs (compressed images, fewer "
    "rows per request), return less (fewer results, a compact encoding), or pass S3 locations instead of "
    "the data; for larger payloads use asynchronous inference or a real-time endpoint (6 MB)."
)
STARTUP_FIX = (
    "Become healthy within 3 minutes of the start on serverless (the model download counts too): a "
    "smaller model or a faster load (safetensors, no compilation at start, weights in model.tar.gz rather "
    "than downloaded at start), or use a real-time endpoint (8 minutes, or "
    "ContainerStartupHealthCheckTimeoutInSeconds)."
)


def _serverless(ctx: CheckContext) -> None:
    """CheckSkipped unless this run checks a serverless deployment."""
    if ctx.config.profile != "serverless":
        raise CheckSkipped(
            "a serverless rule: run with --profile serverless to check it (this run checks a real-time "
            "deployment)"
        )


def _mb(n: int) -> str:
    return f"{n / 1024**2:.2f} MB"


def _s(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def write_errors(logs: str) -> list[str]:
    """The log lines that report a write refused (EROFS, EACCES), outside /tmp."""
    found = []
    for line in logs.splitlines():
        if _WRITE_ERROR.search(line):
            path = written_path(line)
            if path is None or not (path == "/tmp" or path.startswith("/tmp/")):
                found.append(line.strip())
    return found


def _paths(lines: Iterable[str]) -> list[str]:
    """The paths the lines name, each once, in order."""
    return [p for p in dict.fromkeys(written_path(line) for line in lines) if p]


def written_path(line: str) -> str | None:
    """The absolute path a write-error log line names (None: none)."""
    quoted = _QUOTED_PATH.search(line)
    if quoted:
        return quoted.group(1)
    bare = _BARE_PATH.search(line)
    return bare.group(1) if bare else None


def _shared_baseline(ctx: CheckContext) -> tuple[RunningContainer, Answer]:
    """The shared (normal) container and its answer to the configured request; CheckSkipped when the
    normal run itself has no healthy container or no answer (other checks report those)."""
    container = ctx.target.healthy()
    with container.client() as client:
        answer = steady(ctx, client)
    if not answer.answered:
        raise CheckSkipped(
            f"the normal container got no answer to the configured request ({answer.describe()}), so there "
            "is nothing to compare with; see invocations.timely"
        )
    return container, answer


@check(
    "serverless.writes-outside-tmp",
    "the container works without write access outside /tmp (serverless)",
    "SageMaker serverless may run the container without write access outside /tmp: writes that work on "
    "instances can fail with permission errors there (hosting contract §7; SageMaker's fix: chmod "
    "o+rwX). smlocal starts a container of its own the way AWS Lambda runs container images [U]: the "
    "root file system read-only, /tmp a writable tmpfs, as an unprivileged user (65534:65534) owning none "
    "of the image's files. It must become healthy and answer the configured request without the server "
    "error (5xx, dropped connection, timeout) the normal container does not give. Runs only under "
    "`--profile serverless`.",
    WRITES_FIX,
    before="""# the server caches compiled kernels next to its code at start
cache = open("/opt/program/cache/kernels.bin", "wb")  # Read-only file system on serverless""",
    after="""cache_dir = os.environ.get("CACHE_DIR", "/tmp/cache")  # /tmp: writable everywhere
os.makedirs(cache_dir, exist_ok=True)""",
)
def writes_outside_tmp(ctx: CheckContext) -> str:
    _serverless(ctx)
    _, usual = _shared_baseline(ctx)
    target = ctx.target
    normal_s = target.startup().first_healthy_s or 0.0
    wait_s = min(ctx.config.limits.startup_timeout_s, SANDBOX_WAIT_FACTOR * normal_s + SANDBOX_WAIT_S)
    sandbox = target.start(read_only_root=True, tmpfs=SANDBOX_TMPFS, user=SANDBOX_USER)
    try:
        startup = sandbox.wait_startup(wait_s)
        problem, answer = None, None
        if not startup.healthy:
            problem = (
                f"the container exited with code {startup.exit_code} after {_s(startup.elapsed_s)}"
                if startup.exited
                else f"GET /ping did not answer 200 within {wait_s:g} s (last: {startup.last_observation})"
            )
            problem += f", where the normal container became healthy in {_s(normal_s)}"
        else:
            with sandbox.client() as client:
                answer = invoke(ctx, client, read_limit=read_limit(ctx))
            if not answer.answered or ((answer.status or 0) >= 500 and (usual.status or 0) < 500):
                body = f" ({answer.excerpt()!r})" if answer.answered and answer.body else ""
                problem = (
                    f"POST /invocations with the configured payload got {answer.describe()}{body} where the "
                    f"normal container answers HTTP {usual.status}"
                )
        logs = sandbox.logs()
        note = container_note(sandbox) if startup.healthy else ""
    finally:
        target.discard(sandbox)
    errors = write_errors(logs)
    written = _paths(line for line in errors if not _DENIED.search(line))
    denied = _paths(line for line in errors if _DENIED.search(line))
    ctx.evidence.update(
        sandbox=SANDBOX,
        healthy=startup.healthy,
        exit_code=startup.exit_code,
        status=None if answer is None else answer.status,
        status_usual=usual.status,
        write_errors=errors[:20],
        paths=[*written, *denied][:20],
    )
    if problem is None:
        message = f"with {SANDBOX}, the container became healthy in {_s(startup.first_healthy_s or 0)}"
        assert answer is not None
        message += f" and answered POST /invocations {answer.describe()} (normally HTTP {usual.status})"
        if errors:
            ctx.warn(
                f"it served, but its log shows refused writes outside /tmp (e.g. {errors[0]!r}): on "
                "serverless these fail too"
            )
        return noted(message, [answer, usual])
    if written or denied:
        said = []
        if written:
            said.append(f"it tried to write {', '.join(written[:3])}")
        if denied:
            said.append(
                f"it was denied access to {', '.join(denied[:3])} (the user owns none of the image's files)"
            )
        joined = "; ".join(said)
        tried = f" {joined[0].upper()}{joined[1:]}: the log says:\n" + "\n".join(
            f"    {line}" for line in errors[:_SHOWN_LINES]
        )
    else:
        tail = "\n".join(f"    {line}" for line in logs.rstrip().splitlines()[-_SHOWN_LINES:])
        tried = " Its log names no refused write" + (f"; last lines:\n{tail}" if tail else ".")
    raise CheckFailed(
        f"with {SANDBOX} (as SageMaker serverless may run it), {problem}.{note}{tried}\n"
        f"SageMaker serverless may give the container no write access outside /tmp. Fix: {WRITES_FIX}"
    )


def gpu_words(text: str) -> bool:
    """True when `text` names CUDA, the NVIDIA driver or a GPU (what a program that wanted one logs)."""
    return _GPU_ERROR.search(text) is not None


def _gpu_env(ctx: CheckContext) -> dict[str, str]:
    """The image's environment that asks the NVIDIA container runtime for GPUs (none: {})."""
    env = ctx.target.image.env
    return {k: env[k] for k in GPU_ENV if k in env and env[k].strip().lower() not in ("", "void", "none")}


def _startup(ctx: CheckContext) -> Startup:
    startup = ctx.target.startup()
    if startup.start_error is not None:
        raise CheckSkipped("Docker could not start the container; see start.no-exit")
    return startup


@check(
    "serverless.no-gpu",
    "the image serves without a GPU (serverless)",
    "SageMaker serverless inference has no GPUs (hosting contract §7): an image that needs one cannot "
    "serve there. smlocal never gives a checked container a GPU (under this profile each also gets "
    "NVIDIA_VISIBLE_DEVICES=void, so that an engine whose default runtime is nvidia gives none either "
    "[U]), so this judges the shared container: "
    "it FAILS when the container exits, never becomes healthy, or answers the configured request with a "
    "server error while its log (or that error's body) names CUDA, the NVIDIA driver or a GPU. A failure "
    "with no such words is the start/invocations checks' (skipped, or passed with a note, here). An "
    "image whose environment asks for GPUs "
    "(NVIDIA_VISIBLE_DEVICES, NVIDIA_REQUIRE_CUDA: the nvidia/cuda base images) but serves on CPU passes "
    "with a warning. Runs only under `--profile serverless`.",
    GPU_FIX,
    before="""device = torch.device("cuda")  # RuntimeError: no CUDA-capable device on serverless
model = torch.load("/opt/ml/model/model.pt").to(device)""",
    after="""device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = torch.load("/opt/ml/model/model.pt", map_location=device)""",
)
def no_gpu(ctx: CheckContext) -> str:
    _serverless(ctx)
    asks = _gpu_env(ctx)
    ctx.evidence["gpu_env"] = asks
    startup = _startup(ctx)
    asked = (
        " (the image's environment asks for GPUs: " + ", ".join(f"{k}={v}" for k, v in asks.items()) + ")"
        if asks
        else ""
    )
    if not startup.healthy:
        gpu_lines = [line.strip() for line in startup.all_logs.splitlines() if gpu_words(line)]
        ctx.evidence["gpu_log_lines"] = gpu_lines[:20]
        how = (
            f"exited with code {startup.exit_code}"
            if startup.exited
            else f"never answered GET /ping 200 ({startup.last_observation})"
        )
        if not gpu_lines:
            why = "start.no-exit" if startup.exited else "start.healthy"
            raise CheckSkipped(f"the container {how} and its log names no GPU; see {why}")
        shown = "\n".join(f"    {line}" for line in gpu_lines[:_SHOWN_LINES])
        raise CheckFailed(
            f"started without a GPU, as on serverless, the container {how}{asked}; its log says:\n{shown}\n"
            f"SageMaker serverless inference has no GPUs. Fix: {GPU_FIX}"
        )
    container = ctx.target.healthy()
    with container.client() as client:
        answer = steady(ctx, client)
    if answer.server_error:
        body = answer.excerpt() if answer.answered and answer.body else ""
        gpu_lines = [line.strip() for line in container.log_tail(50).splitlines() if gpu_words(line)]
        ctx.evidence["gpu_log_lines"] = gpu_lines[:20]
        if gpu_lines or gpu_words(body):
            said = f" ({body!r})" if body else ""
            shown = (
                "; its log says:\n" + "\n".join(f"    {line}" for line in gpu_lines[:_SHOWN_LINES])
                if gpu_lines
                else "."
            )
            raise CheckFailed(
                f"started without a GPU, as on serverless, the container is healthy but answered POST "
                f"/invocations {answer.describe()}{said}{asked}{shown}\n"
                f"SageMaker serverless inference has no GPUs. Fix: {GPU_FIX}"
            )
    served = (
        f"without a GPU the container became healthy in {_s(startup.first_healthy_s or 0)} and answered "
        f"POST /invocations {answer.describe()}"
    )
    if asks:
        ctx.warn(
            f"the image's environment asks for GPUs ({', '.join(f'{k}={v}' for k, v in asks.items())}); it "
            "served on CPU here, as serverless would run it: make sure the model is fast enough on CPU"
        )
    return noted(served, [answer])


@check(
    "serverless.payload-size",
    "requests and answers within 4 MB (serverless)",
    "SageMaker serverless inference caps request and response bodies at 4 MB (4,194,304 bytes; hosting "
    "contract §7): a larger request is refused with ValidationError `Request {request-id} has oversize "
    "body.`, a larger answer never reaches the client. The configured payloads (--payload) and the "
    "container's answers to them must fit. Runs only under `--profile serverless`.",
    PAYLOAD_FIX,
    before="""return json.dumps({"embeddings": all_token_vectors})  # 5 MB: over serverless' 4 MB""",
    after="""return json.dumps({"embedding": pooled_vector})  # or: write to S3, return its URI""",
)
def payload_size(ctx: CheckContext) -> str:
    _serverless(ctx)
    cap = SERVERLESS_MAX_PAYLOAD_BYTES
    payloads = ctx.config.payloads
    big = [p for p in payloads if len(p.body) > cap]
    ctx.evidence.update(cap_bytes=cap, request_bytes=[len(p.body) for p in payloads])
    if big:
        shown = "; ".join(describe_payload(p) for p in big)
        raise CheckFailed(
            f"{shown} {'is' if len(big) == 1 else 'are'} over SageMaker serverless' {cap:,}-byte "
            f"({_mb(cap)}) request cap: InvokeEndpoint answers ValidationError "
            f"'Request {{request-id}} has oversize body.' and the container never sees it. "
            f"Fix: {PAYLOAD_FIX}"
        )
    answers = served_answers(ctx, payloads)
    ctx.evidence["response_bytes"] = [a.size for a in answers]
    over = [(p, a) for p, a in zip(payloads, answers, strict=True) if a.size > cap]
    if over:
        seen = "; ".join(
            f"{describe_payload(p)} was answered HTTP {a.status} with "
            f"{'at least ' if a.truncated else ''}{a.size:,} bytes"
            for p, a in over
        )
        raise CheckFailed(
            f"POST /invocations with {seen}: over SageMaker serverless' {cap:,}-byte ({_mb(cap)}) response "
            f"cap, so the client would get an error instead of the answer (real-time endpoints allow "
            f"6,291,456 bytes). Fix: {PAYLOAD_FIX}"
        )
    sizes = ", ".join(f"{len(p.body):,} -> {a.size:,}" for p, a in zip(payloads, answers, strict=True))
    return noted(f"requests and answers within {cap:,} bytes (request -> answer bytes: {sizes})", answers)


@check(
    "serverless.startup-time",
    "GET /ping answers 200 within 3 minutes (serverless)",
    "On SageMaker serverless inference the model download and the first successful GET /ping must "
    "happen within 3 minutes (hosting contract §7), not the 8 of real-time endpoints. smlocal judges "
    "the shared container's first 200 from /ping, counted from its start (the model data is fetched "
    "before: add its download time). Runs only under `--profile serverless`.",
    STARTUP_FIX,
    before="""model = AutoModel.from_pretrained("org/12b-model")  # downloaded at start: 6 minutes""",
    after="""model = AutoModel.from_pretrained("/opt/ml/model")  # in model.tar.gz, loaded in seconds""",
)
def startup_time(ctx: CheckContext) -> str:
    _serverless(ctx)
    limit = ctx.config.serverless_startup_timeout_s
    startup = _startup(ctx)
    ctx.evidence.update(limit_s=limit, first_healthy_s=startup.first_healthy_s)
    if startup.first_healthy_s is None:
        why = "start.no-exit" if startup.exited else "start.healthy"
        raise CheckSkipped(f"GET /ping never answered 200 ({startup.last_observation}); see {why}")
    first = startup.first_healthy_s
    if first > limit:
        raise CheckFailed(
            f"the first GET /ping 200 came {_s(first)} after the container's start, later than SageMaker "
            f"serverless' {limit:g} s (model download included), although within the real-time limit of "
            f"{ctx.config.limits.startup_timeout_s:g} s. Fix: {STARTUP_FIX}",
            first_healthy_s=round(first, 3),
        )
    return f"first GET /ping 200 {_s(first)} after start (serverless limit {limit:g} s)"
