"""A model that answers, but slowly: the checks that need requests of their own (variants of the
configured one) are skipped with the reason unless named by id, the others reuse the first calls, and
accept.concurrent does not wait for its held invocation. A fast image skips none of them.

The slow model is the good echo image with INVOKE_SLEEP_S=1.2 against an invocation limit of 6 s, so
that "slow" is 1 s (invocations.slow_s: a twelfth of the limit, at least 1 s, at most 5 s; 5 s with
SageMaker's 60 s limit).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from contract_tests.check_config import CheckConfig
from contract_tests.checks.calls import SLOW_MAX_S, SLOW_MIN_S, slow_s
from contract_tests.cli import named
from contract_tests.registry import select
from contract_tests.result import CheckResult, Outcome
from contract_tests.runner import run_checks
from contract_tests.target import Target
from emulator.config import ContractLimits
from tests.fixtures.twins import FAST_LIMITS

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
SLEEP_S = 1.2
SLOW_ENV = {"INVOKE_SLEEP_S": str(SLEEP_S)}
LIMITS = FAST_LIMITS.replace(invocation_timeout_s=6.0)
#: The checks that send variants of the configured request, and how many requests each would send.
VARIANTS = {
    "invocations.content-type": 1,
    "invocations.large-body": 1,
    "invocations.media-params": 2,
    "invocations.unsupported-media": 2,
    "invocations.malformed-payload": 1,
}
#: Named by id below: it runs in full although the model is slow.
NAMED = "invocations.extra-headers"
CHECKS = [
    "accept.concurrent",
    "invocations.serves",
    "invocations.timely",
    "invocations.ready-when-healthy",
    "invocations.warm-first-call",
    "invocations.content-type",
    NAMED,
    "invocations.large-body",
    "invocations.response-size",
    "invocations.media-params",
    "invocations.unsupported-media",
    "invocations.malformed-payload",
    "invocations.keepalive",
    "shutdown.in-flight",
]


def skip_reason(check_id: str, requests: int) -> re.Pattern[str]:
    n = f"the {requests} requests" if requests > 1 else "the request"
    return re.compile(
        rf"one invocation takes (\d+\.\d) s \(slow: 1 s or more\): {n} of this check would add about "
        rf"\d+ s; run it alone with --check {re.escape(check_id)} to run it anyway"
    )


def run(image: str, tmp_path: Path, **config: Any) -> dict[str, CheckResult]:
    """CHECKS on `image`, the shared container started first: then no check's duration includes its
    start or the first calls."""
    checks = select(CHECKS)  # imports the check modules: the first calls' hook runs at the start
    target = Target(CheckConfig(image=image, limits=LIMITS, cache_dir=tmp_path / "check", **config))
    try:
        assert target.startup().healthy
        results = run_checks(checks, target)
    finally:
        target.close()
    assert [r.id for r in results] == CHECKS
    return {r.id: r for r in results}


def test_slow_model_skips_the_variant_checks_unless_named(echo_image: str, tmp_path: Path) -> None:
    results = run(echo_image, tmp_path, environment=SLOW_ENV, named_checks=frozenset({NAMED}))
    call_s = results["invocations.warm-first-call"].evidence["first_calls"][-1]["elapsed_s"]
    assert call_s >= SLEEP_S
    for check_id, requests in VARIANTS.items():
        result = results[check_id]
        assert result.outcome is Outcome.SKIPPED, f"{check_id}: {result.outcome}: {result.message}"
        match = skip_reason(check_id, requests).match(result.message)
        assert match, f"{check_id}: {result.message}"
        assert float(match.group(1)) >= SLEEP_S
        assert result.duration_s < SLEEP_S / 2, f"{check_id} sent a request: {result.duration_s:.2f} s"
    assert results["invocations.content-type"].message.endswith(
        "(judged on the configured request's answer alone, HTTP 200 with Content-Type 'application/json'; "
        "the Accept variant was not sent)"
    )
    # Named by its id: it sends its request and judges it.
    named_check = results[NAMED]
    assert named_check.outcome is Outcome.PASSED, named_check.message
    assert named_check.message.startswith("HTTP 200 both without and with X-Amzn-SageMaker-Inference-Id")
    assert named_check.duration_s >= SLEEP_S
    # The checks of the configured request alone reuse the first calls.
    for check_id in ("invocations.timely", "invocations.response-size", "invocations.ready-when-healthy"):
        assert results[check_id].outcome is Outcome.PASSED, results[check_id].message
        assert results[check_id].duration_s < SLEEP_S / 2
    assert results["invocations.keepalive"].outcome is Outcome.SKIPPED  # over its own 0.5 s
    # accept.concurrent: the ping was answered while the invocation was held; its answer not awaited.
    accept = results["accept.concurrent"]
    assert accept.outcome is Outcome.PASSED, accept.message
    (m,) = accept.evidence["measurements"]
    assert re.fullmatch(r"not awaited: one invocation takes \d+\.\d s", m["invocation"]), m
    # A slow request that fits in the grace period (1.2 s + 0.5 s of 3 s) is judged.
    in_flight = results["shutdown.in-flight"]
    assert in_flight.outcome is Outcome.PASSED, in_flight.message
    assert in_flight.message.startswith("the request in flight got HTTP 200 ")
    # Bounded: after the first calls only the named check and shutdown.in-flight (its own container)
    # wait for an answer; all the others together take less than one invocation.
    rest = [r for r in results.values() if r.id not in (NAMED, "shutdown.in-flight")]
    assert sum(r.duration_s for r in rest) < SLEEP_S, [(r.id, round(r.duration_s, 2)) for r in rest]


def test_fast_image_skips_nothing(echo_image: str, tmp_path: Path) -> None:
    results = run(echo_image, tmp_path)
    for result in results.values():
        assert result.outcome is Outcome.PASSED, f"{result.id}: {result.outcome}: {result.message}"
    (m,) = results["accept.concurrent"].evidence["measurements"]
    assert m["invocation"] == "HTTP 200"  # a fast answer is awaited, as before


def test_in_flight_is_not_judged_when_the_request_cannot_end_in_the_grace_period(
    echo_image: str, tmp_path: Path
) -> None:
    """Alone (no first calls in this run): it times one invocation on its own container first."""
    limits = LIMITS.replace(stop_grace_s=1.2)  # hold 0.3 s + 1.2 s > 90 % of 1.2 s
    (check,) = select(["shutdown.in-flight"])
    target = Target(
        CheckConfig(image=echo_image, limits=limits, environment=SLOW_ENV, cache_dir=tmp_path / "check")
    )
    (result,) = run_checks([check], target)
    assert result.outcome is Outcome.SKIPPED, result.message
    assert re.fullmatch(
        r"one invocation takes (\d+\.\d) s: a request in flight at SIGTERM \(held 0\.3 s after it\) would "
        r"be answered about \d+\.\d s after SIGTERM, too close to \(or past\) the 1\.2 s grace period to "
        r"tell a dropped request from a slow one; not judged",
        result.message,
    ), result.message


def test_slow_threshold_follows_the_invocation_limit() -> None:
    def threshold(limit: float) -> float:
        return slow_s(ContractLimits(invocation_timeout_s=limit))

    assert threshold(60) == SLOW_MAX_S == 5.0  # SageMaker's limit
    assert threshold(2) == threshold(6) == SLOW_MIN_S == 1.0
    assert threshold(36) == 3.0
    assert threshold(600) == SLOW_MAX_S


def test_named_counts_exact_ids_only() -> None:
    checks = select(["invocations", "shutdown"])
    got = named(["invocations.extra-headers,shutdown", "invocations", " shutdown.in-flight "], checks)
    assert got == frozenset({"invocations.extra-headers", "shutdown.in-flight"})


def test_cli_runs_a_check_named_by_id_on_a_slow_model(echo_image: str, tmp_path: Path) -> None:
    """`--check invocations --check invocations.unsupported-media`: the group's variant checks are
    skipped, the one named by id runs (the CLI sets CheckConfig.named_checks)."""
    env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT)}
    args = [echo_image, "--env", f"INVOKE_SLEEP_S={SLEEP_S}", "--invocation-timeout", "6"]
    args += ["--startup-timeout", "30", "--check", "invocations", "--check", "invocations.unsupported-media"]
    proc = subprocess.run(
        [sys.executable, "-m", "contract_tests.cli", *args, "--json", "out.json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = {r["id"]: r for r in json.loads((tmp_path / "out.json").read_text())["results"]}
    unsupported = results["invocations.unsupported-media"]
    assert unsupported["outcome"] == "passed", unsupported
    assert unsupported["duration_s"] >= 2 * SLEEP_S  # its two requests were sent
    large = results["invocations.large-body"]
    assert large["outcome"] == "skipped" and skip_reason("invocations.large-body", 1).match(large["message"])


def test_slow_model_that_answers_only_errors_says_so_in_the_skips(echo_image: str, tmp_path: Path) -> None:
    env = {**SLOW_ENV, "INVOKE_STATUS": "500", "INVOKE_STATUS_BODY": "no model_fn"}
    target = Target(CheckConfig(image=echo_image, limits=LIMITS, environment=env, cache_dir=tmp_path))
    ids = ["invocations.content-type", "invocations.large-body"]
    results = run_checks(select(ids), target)
    assert [r.id for r in results] == ids
    note = "(every answer was an error: HTTP 500 'no model_fn'; see invocations.serves)"
    content_type, large = results
    assert content_type.outcome is Outcome.SKIPPED and large.outcome is Outcome.SKIPPED
    assert skip_reason("invocations.large-body", 1).match(large.message), large.message
    assert large.message.endswith(f"to run it anyway {note}"), large.message
    assert content_type.message.endswith(
        "(judged on the configured request's answer alone, HTTP 500 with Content-Type 'text/plain'; the "
        f"Accept variant was not sent) {note}"
    ), content_type.message


def test_in_flight_is_not_judged_when_the_first_calls_timed_out(
    twin_image: Callable[[str], str], tmp_path: Path
) -> None:
    """Every call times out (5 s against 2 s): no container is started to wait that out again."""
    checks = select(["invocations.timely", "shutdown.in-flight"])
    target = Target(
        CheckConfig(image=twin_image("invocations.timely"), limits=FAST_LIMITS, cache_dir=tmp_path)
    )
    timely, in_flight = run_checks(checks, target)
    assert timely.outcome is Outcome.FAILED, timely.message
    assert in_flight.outcome is Outcome.SKIPPED, in_flight.message
    assert in_flight.message == (
        "POST /invocations with the configured payload gets no answer within 2 s (seen by the first calls, "
        "not sent again): no request can be answered in flight; see invocations.timely"
    )
    assert in_flight.duration_s < FAST_LIMITS.invocation_timeout_s / 2
