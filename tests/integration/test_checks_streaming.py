"""streaming.* (contract_tests/checks/streaming.py) against real servers: the streaming image
(tests/fixtures/images/streamer) passes all three on uvicorn + FastAPI, gunicorn + Flask and aiohttp;
each twin (tests/fixtures/twins/streaming.*, built on it) fails its own check with a message that says
what to change; without --streaming (CheckConfig.stream None) nothing runs; and `smlocal check
--streaming --stream-body` end to end, with its JSON and JUnit reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import docker
import pytest

from contract_tests.check_config import DEFAULT_STREAM_BODY, CheckConfig, Payload
from contract_tests.registry import select
from contract_tests.result import CheckResult, Outcome
from contract_tests.runner import run_checks
from contract_tests.target import Target
from emulator.config import ContractLimits
from tests.fixtures.twins import FAST_LIMITS, TWINS_DIR
from tests.integration.test_check_cli import ROOT, assert_no_containers_left, smlocal_check

pytestmark = pytest.mark.docker

TwinImage = Callable[[str], str]
IDS = ("streaming.incremental", "streaming.framing", "streaming.disconnect")
#: Eight 12-byte parts 100 ms apart (stream_app.py's script): 96 bytes over ~700 ms.
SCRIPT = '{"parts": 8, "interval_s": 0.1}'


def run_streaming(
    image: str,
    tmp_path: Path,
    body: str = SCRIPT,
    environment: dict[str, str] | None = None,
    limits: ContractLimits = FAST_LIMITS,
) -> dict[str, CheckResult]:
    """The three streaming checks in order on one Target (one shared container), by id."""
    stream = Payload(body.encode(), "application/json", None, "--stream-body")
    config = CheckConfig(
        image=image,
        limits=limits,
        cache_dir=tmp_path / "check",
        stream=stream,
        environment=environment or {},
    )
    target = Target(config)
    return {r.id: r for r in run_checks(select(["streaming"]), target)}


def outcomes(results: dict[str, CheckResult]) -> list[Outcome]:
    return [results[i].outcome for i in IDS]


def test_each_check_has_a_twin_and_an_example() -> None:
    checks = select(["streaming"])
    assert [c.id for c in checks] == list(IDS)
    for c in checks:
        assert c.func.__module__ == "contract_tests.checks.streaming"
        assert (TWINS_DIR / c.id / "Dockerfile").is_file()
        assert c.before and c.after and c.fix and "--streaming" in c.requirement


@pytest.mark.parametrize("server", ["uvicorn", "gunicorn", "aiohttp"])
def test_the_streaming_image_passes_on_every_stack(streamer_image: str, tmp_path: Path, server: str) -> None:
    results = run_streaming(streamer_image, tmp_path, environment={"SERVER": server})
    assert outcomes(results) == [Outcome.PASSED] * 3, [r.message for r in results.values()]
    incremental = results["streaming.incremental"]
    # 8 parts 100 ms apart: 8 distinct arrivals unless a loaded machine delays a read past the next part
    assert incremental.message.startswith("streamed: 96 bytes in 8 chunk(s) arrived at "), incremental.message
    assert " distinct moment(s) (10 ms or more apart), the first body byte " in incremental.message
    arrivals = incremental.evidence["answer"]["arrivals_ms"]
    assert len(arrivals) >= 3 and arrivals[-1] - arrivals[0] >= 600  # 7 intervals of 100 ms
    assert results["streaming.framing"].message == (
        "valid chunked encoding: 8 chunk(s), 96 data bytes, the terminating zero-size chunk"
    )
    disconnect = results["streaming.disconnect"]
    assert disconnect.message.startswith("a client closed its stream after reading its first 12 byte(s)")
    assert "a second stream was answered to its end (HTTP 200, 96 bytes in 8 chunk(s)" in disconnect.message
    assert disconnect.message.endswith("/ping answered 200 and the container runs")


def test_a_fast_continuous_stream_passes(streamer_image: str, tmp_path: Path) -> None:
    # 5 MB written as fast as the server can: reads come back to back, never 10 ms apart, yet the
    # answer streams (a rule counting gaps between reads failed it)
    results = run_streaming(streamer_image, tmp_path, body='{"parts": 50000, "size": 100}')
    assert outcomes(results) == [Outcome.PASSED] * 3, [r.message for r in results.values()]
    assert results["streaming.incremental"].message.startswith(
        "streamed: 5,000,000 bytes in 50000 chunk(s) arrived at "
    )


def test_server_sent_events_from_fastapi_pass(streamer_twin_image: TwinImage, tmp_path: Path) -> None:
    # An LLM server's token stream: text/event-stream, `data: {...}\n\n` per token, 30 ms apart, then
    # `data: [DONE]\n\n` (twins/streaming.incremental.sse, a StreamingResponse under uvicorn), asked with
    # the default stream body ({"inputs": ..., "parameters": {"max_new_tokens": 64}}: 12 tokens).
    twin = streamer_twin_image("streaming.incremental.sse")
    # uvicorn + FastAPI takes seconds to start on a loaded machine: more than FAST_LIMITS' 6 s
    patient = FAST_LIMITS.replace(startup_timeout_s=30.0)
    results = run_streaming(twin, tmp_path, body=DEFAULT_STREAM_BODY.decode(), limits=patient)
    assert outcomes(results) == [Outcome.PASSED] * 3, [r.message for r in results.values()]
    assert all(r.warnings == () for r in results.values())
    # 13 events (12 tokens, then [DONE]), each its own chunk
    incremental = results["streaming.incremental"].message
    assert incremental.startswith("streamed: 882 bytes in 13 chunk(s) arrived at "), incremental
    assert " distinct moment(s) (10 ms or more apart), the first body byte " in incremental
    assert results["streaming.framing"].message == (
        "valid chunked encoding: 13 chunk(s), 882 data bytes, the terminating zero-size chunk"
    )
    answer = results["streaming.incremental"].evidence["answer"]
    assert answer["transfer_encoding"] == "chunked" and answer["complete"] is True


def test_without_streaming_nothing_runs(streamer_image: str, tmp_path: Path) -> None:
    target = Target(CheckConfig(image=streamer_image, limits=FAST_LIMITS, cache_dir=tmp_path, stream=None))
    results = run_checks(select(["streaming"]), target)
    assert [r.outcome for r in results] == [Outcome.SKIPPED] * 3
    for r in results:
        assert r.message.startswith("the image was not said to stream its answers: give --streaming"), (
            r.message
        )
    assert target.startup_seen() is None  # no container was started


def test_buffering_with_content_length_fails_incremental(
    streamer_twin_image: TwinImage, tmp_path: Path
) -> None:
    results = run_streaming(streamer_twin_image("streaming.incremental"), tmp_path)
    assert outcomes(results) == [Outcome.FAILED, Outcome.SKIPPED, Outcome.SKIPPED]
    text = results["streaming.incremental"].message
    assert text.startswith(
        "POST /invocations with --stream-body (31 bytes, application/json) was answered with "
        "Content-Length: 96 (the whole body, 96 bytes, arrived "
    ), text
    assert "stream with chunked encoding (Transfer-Encoding: chunked)" in text
    assert "FastAPI/Starlette `StreamingResponse(generator())`, Flask" in text
    assert "stream_with_context" in text and "aiohttp `web.StreamResponse`" in text
    assert results["streaming.framing"].message.startswith("the answer is not chunked")
    assert "there was no stream to leave mid-way" in results["streaming.disconnect"].message


def test_chunks_written_all_at_once_fail_incremental(streamer_twin_image: TwinImage, tmp_path: Path) -> None:
    twin = streamer_twin_image("streaming.incremental")
    results = run_streaming(twin, tmp_path, environment={"BUFFER": "chunked"})
    assert outcomes(results)[:2] == [Outcome.FAILED, Outcome.PASSED]
    # disconnect: passed, or skipped when the burst came in the first read (nothing to leave mid-way)
    disconnect = results["streaming.disconnect"]
    assert disconnect.outcome is Outcome.PASSED or (
        disconnect.outcome is Outcome.SKIPPED and "first read" in disconnect.message
    ), disconnect.message
    text = results["streaming.incremental"].message
    # All 8 writes come within a millisecond, ~700 ms after the request: one burst (a loaded machine
    # may split it; the first byte then still comes at the very end, which the other half of the rule fails)
    if "arrived at 1 distinct moment(s)" in text:
        assert text.startswith("the answer is chunked but not streamed: 96 bytes in 8 chunk(s) arrived at 1 ")
        assert "the server buffers the answer, or computes every part before writing the first" in text
    else:
        assert text.startswith("the first part came late: 96 bytes in 8 chunk(s) arrived at "), text
    assert "Fix: Write the answer with HTTP/1.1 chunked transfer encoding as the model produces it" in text


@pytest.mark.parametrize(
    ("framing", "offset", "what"),
    [
        ("size", 14, "chunk 1 (size line at byte 0 declares 11 byte(s)) is not followed by CRLF"),
        (
            "no-end",
            136,
            "the connection closed at byte 136 after 8 chunk(s), with no terminating zero-size chunk",
        ),
    ],
)
def test_broken_framing_fails_framing(
    streamer_twin_image: TwinImage, tmp_path: Path, framing: str, offset: int, what: str
) -> None:
    results = run_streaming(
        streamer_twin_image("streaming.framing"), tmp_path, environment={"FRAMING": framing}
    )
    assert outcomes(results) == [Outcome.SKIPPED, Outcome.FAILED, Outcome.PASSED]
    assert results["streaming.incremental"].message == (
        f"the chunked encoding is broken at byte {offset}; see streaming.framing"
    )
    failed = results["streaming.framing"]
    assert failed.message.startswith(
        f"the chunked encoding of the answer to --stream-body (31 bytes, application/json) is broken at "
        f"byte {offset} of the body"
    ), failed.message
    assert what in failed.message
    assert "Fix: Let the serving framework write the chunked encoding" in failed.message
    assert failed.evidence["offset"] == offset
    assert "its framing error is streaming.framing" in results["streaming.disconnect"].message


def test_crashing_on_a_client_disconnect_fails_disconnect(
    streamer_twin_image: TwinImage, tmp_path: Path
) -> None:
    results = run_streaming(streamer_twin_image("streaming.disconnect"), tmp_path)
    assert outcomes(results) == [Outcome.PASSED, Outcome.PASSED, Outcome.FAILED]
    failed = results["streaming.disconnect"]
    assert failed.message.startswith("A client closed its stream after reading its first 12 byte(s), "), (
        failed.message
    )
    assert "(a connection reset), and the container exited with code 70: SageMaker would count the" in (
        failed.message
    )
    assert "client disconnected mid-stream" in failed.message  # the container's log
    assert "Fix: Treat a client that goes away mid-stream as normal" in failed.message
    assert failed.evidence["running"] is False and failed.evidence["exit_code"] == 70


def test_a_server_wedged_by_a_client_disconnect_fails_disconnect(
    streamer_twin_image: TwinImage, tmp_path: Path
) -> None:
    twin = streamer_twin_image("streaming.disconnect")
    results = run_streaming(twin, tmp_path, environment={"ON_DISCONNECT": "wedge"})
    assert outcomes(results) == [Outcome.PASSED, Outcome.PASSED, Outcome.FAILED]
    failed = results["streaming.disconnect"]
    assert failed.message.startswith("A client closed its stream after reading its first 12 byte(s), "), (
        failed.message
    )
    assert (
        '(a connection reset); a second stream of the same body then got HTTP 503 (\'{"error": "the '
        "model is busy\"}') instead of a complete 2xx answer (/ping: HTTP 503)."
    ) in failed.message
    assert "Fix: Treat a client that goes away mid-stream as normal" in failed.message
    assert failed.evidence["running"] is True and failed.evidence["ping"] == "HTTP 503"


def test_an_error_status_fails_incremental_only(streamer_image: str, tmp_path: Path) -> None:
    results = run_streaming(streamer_image, tmp_path, body='{"status": 503}')
    assert outcomes(results) == [Outcome.FAILED, Outcome.SKIPPED, Outcome.SKIPPED]
    assert results["streaming.incremental"].message == (
        "POST /invocations with --stream-body (15 bytes, application/json) answered HTTP 503 "
        '(\'{"error": "scripted status 503"}\'): a stream must begin with a 2xx (SageMaker answers a '
        "non-2xx with ModelError before the first part)."
    )
    for i in IDS[1:]:
        assert results[i].message == "the stream request got no 2xx answer; see streaming.incremental"


def test_a_stalled_stream_fails_incremental_only(streamer_image: str, tmp_path: Path) -> None:
    body = '{"parts": 3, "interval_s": 0.1, "end": "stall", "stall_s": 30}'
    results = run_streaming(streamer_image, tmp_path, body=body)
    assert outcomes(results) == [Outcome.FAILED, Outcome.SKIPPED, Outcome.SKIPPED]
    limit = f"{FAST_LIMITS.invocation_timeout_s:g}"
    assert results["streaming.incremental"].message.startswith(
        f"the stream stopped before its end: no byte for {limit} s after 36 body bytes (36 bytes in 3 "
        "chunk(s) had arrived). SageMaker ends such a stream with a ModelStreamError "
        f"(ModelInvocationTimeExceeded).\nFix: write the next part, or end the stream with its terminating "
        f"chunk, within {limit} s."
    ), results["streaming.incremental"].message
    for i in IDS[1:]:
        assert results[i].message == (
            f"the stream did not reach its end (no byte for {limit} s after 36 body bytes); see "
            "streaming.incremental"
        )


def test_a_crash_mid_stream_is_named_by_framing(streamer_image: str, tmp_path: Path) -> None:
    results = run_streaming(streamer_image, tmp_path, body='{"parts": 3, "interval_s": 0.1, "end": "crash"}')
    assert outcomes(results) == [Outcome.SKIPPED, Outcome.FAILED, Outcome.SKIPPED]
    text = results["streaming.framing"].message
    assert (
        "is broken at byte 51 of the body (after 3 chunk(s), 36 data bytes): the connection closed at "
        in text
    )
    assert "The body around it: b'" in text
    assert "The container exited with code 1: it crashed mid-answer (its log says why)" in text
    assert results["streaming.disconnect"].message.startswith("the stream to leave sent no body (")
    assert (
        "The container exited with code 1. See streaming.incremental"
        in results["streaming.disconnect"].message
    )


# --- smlocal check --streaming, end to end ------------------------------------------------------------


def test_check_cli_streaming_writes_the_checks_in_both_reports(
    streamer_image: str, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    run, pid = smlocal_check(
        streamer_image,
        "--check",
        "streaming",
        "--streaming",
        "--stream-body",
        SCRIPT,
        "--startup-timeout",
        "30",
        "--json",
        "out.json",
        "--junit",
        "out.xml",
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "; streaming with --stream-body" in run.stdout and "3 passed" in run.stdout
    assert_no_containers_left(docker_engine, pid)
    data = json.loads((tmp_path / "out.json").read_text())["results"]
    assert [(d["id"], d["outcome"]) for d in data] == [(i, "passed") for i in IDS]
    assert data[0]["evidence"]["request"] == "--stream-body (31 bytes, application/json)"
    suite = ET.parse(tmp_path / "out.xml").getroot().find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == (
        "3",
        "0",
        "0",
    )
    assert [(c.get("classname"), c.get("name")) for c in suite.iter("testcase")] == [
        ("streaming", i) for i in IDS
    ]


def test_check_cli_without_streaming_skips_and_stream_body_alone_is_a_usage_error(
    streamer_image: str, tmp_path: Path
) -> None:
    run, _ = smlocal_check(streamer_image, "--check", "streaming", "--json", "out.json", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    data = json.loads((tmp_path / "out.json").read_text())["results"]
    assert [(d["id"], d["outcome"]) for d in data] == [(i, "skipped") for i in IDS]
    bad, _ = smlocal_check(streamer_image, "--stream-body", SCRIPT, cwd=tmp_path)
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "smlocal check: --stream-body needs --streaming" in bad.stderr


def test_pytest_plugin_takes_the_streaming_options(streamer_image: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPATH": str(ROOT)}
    base = [sys.executable, "-m", "pytest", "-p", "contract_tests.plugin", "-p", "no:cacheprovider"]
    run = subprocess.run(
        base
        + ["--sagemaker-image", streamer_image, "--sagemaker-startup-timeout", "30", "-v", "-k", "streaming"]
        + ["--sagemaker-streaming", "--sagemaker-stream-body", SCRIPT],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    for check_id in IDS:
        assert f"smlocal-contract::{check_id} PASSED" in run.stdout
    bad = subprocess.run(
        base + ["--sagemaker-image", "img:1", "--sagemaker-stream-body", "{}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    assert bad.returncode == 4, bad.stdout + bad.stderr  # pytest's usage error
    assert "--sagemaker-stream-body needs --sagemaker-streaming" in bad.stderr
