"""The serverless.* contract checks (`--profile serverless`): each FAILS on its broken twin
(tests/fixtures/twins/serverless.*) and PASSES on the good echo image; under the default realtime
profile none of them runs (SKIPPED, nothing started). serverless.payload-size's request half and
serverless.startup-time have no twin image: a payload over 4 MB, and a lowered limit on an echo image
that becomes healthy after 2 s."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from contract_tests.check_config import SERVERLESS_MAX_PAYLOAD_BYTES, CheckConfig
from contract_tests.registry import select
from contract_tests.result import CheckResult, Outcome
from contract_tests.runner import run_checks
from contract_tests.target import Target
from tests.fixtures.twins import FAST_LIMITS

pytestmark = pytest.mark.docker

RunOne = Callable[..., CheckResult]
TwinImage = Callable[[str], str]
ROOT = Path(__file__).parents[2]
IDS = [
    "serverless.writes-outside-tmp",
    "serverless.no-gpu",
    "serverless.payload-size",
    "serverless.startup-time",
]
SANDBOX = (
    "with root file system read-only, /tmp the only writable folder, user 65534:65534 that owns none of "
    "the image's files (as SageMaker serverless may run it)"
)


def _failed(result: CheckResult, check_id: str) -> str:
    assert result.id == check_id
    assert result.outcome is Outcome.FAILED, f"{result.outcome}: {result.message}"
    return result.message


def _passed(result: CheckResult, check_id: str) -> str:
    assert result.id == check_id
    assert result.outcome is Outcome.PASSED, f"{result.outcome}: {result.message} {result.evidence}"
    return result.message


def _run_all(image: str, tmp_path: Path, **config: object) -> tuple[list[CheckResult], Target]:
    target = Target(CheckConfig(image=image, limits=FAST_LIMITS, cache_dir=tmp_path / "check", **config))  # type: ignore[arg-type]
    return run_checks(select(IDS), target), target


def test_the_realtime_profile_runs_none_of_them(echo_image: str, tmp_path: Path) -> None:
    results, target = _run_all(echo_image, tmp_path)
    assert [(r.id, r.outcome) for r in results] == [(i, Outcome.SKIPPED) for i in IDS]
    for r in results:
        assert r.message == (
            "a serverless rule: run with --profile serverless to check it (this run checks a real-time "
            "deployment)"
        )
    assert target.startup_seen() is None  # nothing was started for them


def test_the_good_image_passes_every_one(echo_image: str, tmp_path: Path) -> None:
    results, _ = _run_all(echo_image, tmp_path, profile="serverless")
    by_id = {r.id: r for r in results}
    writes = _passed(by_id["serverless.writes-outside-tmp"], "serverless.writes-outside-tmp")
    assert writes.startswith(
        "with root file system read-only, /tmp the only writable folder, user 65534:65534 that owns none "
        "of the image's files, the container became healthy in "
    )
    assert "answered POST /invocations HTTP 200 in " in writes and "(normally HTTP 200)" in writes
    gpu = _passed(by_id["serverless.no-gpu"], "serverless.no-gpu")
    assert gpu.startswith("without a GPU the container became healthy in ")
    assert "answered POST /invocations HTTP 200" in gpu
    size = _passed(by_id["serverless.payload-size"], "serverless.payload-size")
    assert size == "requests and answers within 4,194,304 bytes (request -> answer bytes: 2 -> 2)"
    startup = _passed(by_id["serverless.startup-time"], "serverless.startup-time")
    assert startup.startswith("first GET /ping 200 ") and startup.endswith("(serverless limit 180 s)")
    assert all(r.warnings == () for r in results)


def test_a_write_at_start_outside_tmp_fails_naming_the_path(run_one: RunOne, twin_image: TwinImage) -> None:
    image = twin_image("serverless.writes-outside-tmp")
    _passed(run_one("start.no-exit", image), "start.no-exit")  # it starts fine as root on a writable layer
    result = run_one("serverless.writes-outside-tmp", image, profile="serverless")
    message = _failed(result, "serverless.writes-outside-tmp")
    assert message.startswith(f"{SANDBOX}, the container exited with code 1 after "), message
    assert ", where the normal container became healthy in " in message
    assert ". It tried to write /opt/program/state.bin: the log says:" in message
    assert "Read-only file system: '/opt/program/state.bin'" in message
    assert "SageMaker serverless may give the container no write access outside /tmp. Fix: Write only " in (
        message
    )
    assert (
        "SageMaker's advice for permission errors on serverless, chmod o+rwX, lets a user other " in message
    )
    assert result.evidence["paths"] == ["/opt/program/state.bin"]
    assert result.evidence["exit_code"] == 1 and result.evidence["healthy"] is False


def test_a_write_per_request_outside_tmp_fails_on_its_5xx(run_one: RunOne, twin_image: TwinImage) -> None:
    image = twin_image("serverless.writes-outside-tmp.per-request")
    result = run_one("serverless.writes-outside-tmp", image, profile="serverless")
    message = _failed(result, "serverless.writes-outside-tmp")
    assert message.startswith(f"{SANDBOX}, POST /invocations with the configured payload got HTTP 500 in ")
    assert "Read-only file system: '/var/cache/echo-requests.log'" in message
    assert "where the normal container answers HTTP 200." in message
    assert "It tried to write /var/cache/echo-requests.log: the log says:" in message
    assert "Fix: Write only under /tmp" in message
    assert result.evidence["status"] == 500 and result.evidence["status_usual"] == 200


def test_files_only_root_can_read_fail_through_the_unprivileged_user(
    run_one: RunOne, twin_image: TwinImage
) -> None:
    image = twin_image("serverless.writes-outside-tmp.unreadable")
    _passed(run_one("start.no-exit", image), "start.no-exit")  # root reads its chmod 700 code
    result = run_one("serverless.writes-outside-tmp", image, profile="serverless")
    message = _failed(result, "serverless.writes-outside-tmp")
    assert message.startswith(f"{SANDBOX}, the container exited with code 2 after "), message
    assert (
        ". It was denied access to /opt/program/server.py (the "
        "user owns none of the image's files): the log says:\n    python3: can't open file "
        "'/opt/program/server.py': [Errno 13] Permission denied\n"
    ) in message
    assert "`RUN chmod -R o+rX /opt/program`" in message


@pytest.mark.parametrize("stack", ["gunicorn", "aiohttp", "fastapi"])
def test_real_serving_stacks_pass_the_sandbox(
    stack: str, run_one: RunOne, request: pytest.FixtureRequest
) -> None:
    """gunicorn's gthread worker + Flask, aiohttp.web and uvicorn + FastAPI serve with nothing writable
    but /tmp, as a user other than root. gunicorn 27 logs (and survives) a refused write: its control
    socket under $HOME (nobody's is /nonexistent): a warning, with the log line."""
    image = request.getfixturevalue("fastapi_image" if stack == "fastapi" else "keepalive_image")
    environment = {"SERVER": stack} if stack != "fastapi" else {}
    result = run_one("serverless.writes-outside-tmp", image, profile="serverless", environment=environment)
    message = _passed(result, "serverless.writes-outside-tmp")
    assert "the container became healthy in " in message and "(normally HTTP 200)" in message
    if stack == "gunicorn":
        (warning,) = result.warnings
        assert warning.startswith("it served, but its log shows refused writes outside /tmp (e.g. ")
        assert "Control server error: [Errno 30] Read-only file system: '/nonexistent'" in warning
        assert warning.endswith("): on serverless these fail too")
    else:
        assert result.warnings == ()


def test_an_image_needing_a_gpu_fails_with_its_cuda_error(run_one: RunOne, twin_image: TwinImage) -> None:
    result = run_one("serverless.no-gpu", twin_image("serverless.no-gpu"), profile="serverless")
    message = _failed(result, "serverless.no-gpu")
    assert message.startswith(
        "started without a GPU, as on serverless, the container exited with code 1 (the image's "
        "environment asks for GPUs: NVIDIA_VISIBLE_DEVICES=all, NVIDIA_REQUIRE_CUDA=cuda>=12.2); its log "
        "says:\n    echo: RuntimeError: CUDA error: no CUDA-capable device is detected (REQUIRE_GPU=1)\n"
    ), message
    assert "SageMaker serverless inference has no GPUs. Fix: Serve on CPU when no GPU is there" in message


def test_a_cuda_image_serving_on_cpu_passes_with_a_warning(run_one: RunOne, twin_image: TwinImage) -> None:
    image = twin_image("serverless.no-gpu.cpu-fallback")
    result = run_one("serverless.no-gpu", image, profile="serverless")
    _passed(result, "serverless.no-gpu")
    assert result.warnings == (
        "the image's environment asks for GPUs (NVIDIA_VISIBLE_DEVICES=all, NVIDIA_REQUIRE_CUDA=cuda>=12.2); "
        "it served on CPU here, as serverless would run it: make sure the model is fast enough on CPU",
    )


def test_a_server_error_naming_cuda_fails(run_one: RunOne, echo_image: str) -> None:
    cuda = {
        "INVOKE_STATUS": "500",
        "INVOKE_STATUS_BODY": "RuntimeError: Found no NVIDIA driver on your system.",
    }
    result = run_one("serverless.no-gpu", echo_image, profile="serverless", environment=cuda)
    message = _failed(result, "serverless.no-gpu")
    assert message.startswith(
        "started without a GPU, as on serverless, the container is healthy but answered POST /invocations "
        "HTTP 500 in "
    ), message
    assert (
        "('RuntimeError: Found no NVIDIA driver on your system.').\nSageMaker serverless inference has no "
        in (message)
    )


def test_the_serverless_profile_hides_gpus_from_every_container(
    twin_image: TwinImage, tmp_path: Path
) -> None:
    """NVIDIA_VISIBLE_DEVICES=void under the serverless profile, whatever the image's environment says
    (an engine whose default runtime is nvidia would honour the image's `all`); realtime leaves it."""
    image = twin_image("serverless.no-gpu.cpu-fallback")  # ENV NVIDIA_VISIBLE_DEVICES=all
    seen = {}
    for profile in ("realtime", "serverless"):
        target = Target(CheckConfig(image=image, limits=FAST_LIMITS, cache_dir=tmp_path, profile=profile))
        try:
            with target.healthy().client() as client:
                answer = client.post(
                    "/invocations",
                    content=b"{}",
                    headers={"X-Amzn-SageMaker-Custom-Attributes": "env=NVIDIA_VISIBLE_DEVICES"},
                )
            seen[profile] = (answer.status_code, answer.text)
        finally:
            target.close()
    assert seen == {"realtime": (200, "all"), "serverless": (200, "void")}


def test_a_startup_failure_without_gpu_words_is_no_gpu_verdict(run_one: RunOne, echo_image: str) -> None:
    result = run_one(
        "serverless.no-gpu", echo_image, profile="serverless", environment={"EXIT_AT_START": "4"}
    )
    assert result.outcome is Outcome.SKIPPED, result.message
    assert result.message == "the container exited with code 4 and its log names no GPU; see start.no-exit"


def test_an_answer_over_4_mb_fails(run_one: RunOne, twin_image: TwinImage) -> None:
    image = twin_image("serverless.payload-size")
    _passed(run_one("invocations.response-size", image), "invocations.response-size")  # within 6 MB
    result = run_one("serverless.payload-size", image, profile="serverless")
    message = _failed(result, "serverless.payload-size")
    assert message.startswith(
        "POST /invocations with the default payload (2 bytes, application/json) was answered HTTP 200 with "
        "5,000,000 bytes: over SageMaker serverless' 4,194,304-byte (4.00 MB) response cap, so the client "
        "would get an error instead of the answer (real-time endpoints allow 6,291,456 bytes). Fix: Keep "
    ), message
    assert result.evidence["response_bytes"] == [5_000_000]


def test_a_request_over_4_mb_fails_with_sagemakers_answer(run_one: RunOne, echo_image: str) -> None:
    body = b'"' + b"x" * (SERVERLESS_MAX_PAYLOAD_BYTES - 1) + b'"'
    result = run_one(
        "serverless.payload-size",
        echo_image,
        profile="serverless",
        payload=body,
        payload_given=True,
        payload_source="--payload big.json",
    )
    message = _failed(result, "serverless.payload-size")
    assert message.startswith(
        "--payload big.json (4,194,305 bytes, application/json) is over SageMaker serverless' "
        "4,194,304-byte (4.00 MB) request cap: InvokeEndpoint answers ValidationError 'Request "
        "{request-id} has oversize body.' and the container never sees it. Fix: Keep requests and answers "
        "within 4 MB on serverless"
    ), message
    at_cap = run_one(
        "serverless.payload-size",
        echo_image,
        profile="serverless",
        payload=body[:-1],
        payload_given=True,
    )
    assert _passed(at_cap, "serverless.payload-size") == (
        "requests and answers within 4,194,304 bytes (request -> answer bytes: 4,194,304 -> 4,194,304)"
    )


def test_a_startup_over_the_serverless_limit_fails(run_one: RunOne, echo_image: str) -> None:
    result = run_one(
        "serverless.startup-time",
        echo_image,
        profile="serverless",
        environment={"STARTUP_DELAY_S": "2"},
        serverless_startup_timeout_s=1.0,
    )
    message = _failed(result, "serverless.startup-time")
    assert message.startswith("the first GET /ping 200 came 2.")
    assert message.split(" s after", 1)[1].startswith(
        " the container's start, later than SageMaker serverless' 1 s (model download included), although "
        "within the real-time limit of 6 s. Fix: Become healthy within 3 minutes"
    ), message
    assert result.evidence["limit_s"] == 1.0 and result.evidence["first_healthy_s"] >= 2.0


def test_the_cli_runs_them_under_the_serverless_profile_only(echo_image: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cli = [sys.executable, "-m", "contract_tests.cli", echo_image, "--check", "serverless"]
    for profile, outcome in (("realtime", "skipped"), ("serverless", "passed")):
        out = tmp_path / f"{profile}.json"
        run = subprocess.run(
            [*cli, "--profile", profile, "--startup-timeout", "30", "--json", str(out)],
            capture_output=True,
            text=True,
            env=env,
            timeout=180,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        rows = json.loads(out.read_text())["results"]
        assert [(r["id"], r["outcome"]) for r in rows] == [(i, outcome) for i in IDS], rows
