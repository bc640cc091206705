"""invocations.keepalive (contract_tests/checks/keepalive.py): warns on its twin (the echo image with
NAGLE=1: headers and body in two sends, Nagle on), and passes without a warning on the good echo image
(TCP_NODELAY, one send) and on real serving stacks (gunicorn + Flask, aiohttp: the keep-alive image; uvicorn + FastAPI)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from contract_tests.checks.keepalive import PAIRS, ROUNDS
from contract_tests.registry import select
from contract_tests.result import CheckResult, Outcome

pytestmark = pytest.mark.docker

RunOne = Callable[..., CheckResult]
TwinImage = Callable[[str], str]
CHECK = "invocations.keepalive"


def test_the_check_has_a_twin_and_an_example() -> None:
    (c,) = select([CHECK])
    assert c.func.__module__ == "contract_tests.checks.keepalive"
    assert (Path(__file__).parents[1] / "fixtures" / "twins" / CHECK / "Dockerfile").is_file()
    assert c.before and c.after and c.fix


def test_nagle_two_sends_twin_warns(run_one: RunOne, twin_image: TwinImage) -> None:
    result = run_one(CHECK, twin_image(CHECK))
    assert result.outcome is Outcome.PASSED, result.message
    assert result.message.startswith("kept-alive connections stall: median ")
    (text,) = result.warnings
    assert "requests on a kept-alive connection were " in text
    assert f"ms slower than on new connections in {ROUNDS} rounds of {PAIRS}" in text
    assert "each answer waits for a delayed ACK" in text
    assert "Fix: Send each response in one write, or set TCP_NODELAY" in text
    rounds = result.evidence["rounds"]
    assert len(rounds) == ROUNDS
    for r in rounds:
        kept = sorted(r["kept_alive_ms"])
        assert len(kept) == PAIRS and kept[PAIRS // 2] > 30  # the ~40 ms delayed ACK, every round


@pytest.mark.parametrize("server", ["echo", "gunicorn", "aiohttp", "uvicorn"])
def test_good_servers_pass_without_warning(
    run_one: RunOne, echo_image: str, keepalive_image: str, fastapi_image: str, server: str
) -> None:
    if server == "echo":
        result = run_one(CHECK, echo_image)
    elif server == "uvicorn":  # uvicorn + FastAPI (tests/fixtures/stacks.py)
        result = run_one(CHECK, fastapi_image)
    else:
        result = run_one(CHECK, keepalive_image, environment={"SERVER": server})
    assert result.outcome is Outcome.PASSED, result.message
    assert result.message.startswith("no keep-alive stall: median "), result.message
    assert result.warnings == ()
    (r,) = result.evidence["rounds"]  # one round: a second one only confirms a stall
    assert len(r["kept_alive_ms"]) == PAIRS


def test_server_closing_connections_is_skipped(run_one: RunOne, keepalive_image: str) -> None:
    result = run_one(CHECK, keepalive_image, environment={"KEEPALIVE_S": "0"})
    assert result.outcome is Outcome.SKIPPED, result.message
    assert "the server closes the connection after each answer" in result.message


def test_slow_model_is_not_measured(run_one: RunOne, echo_image: str) -> None:
    result = run_one(CHECK, echo_image, environment={"INVOKE_SLEEP_S": "0.6"})
    assert result.outcome is Outcome.SKIPPED, result.message
    assert "one invocation takes " in result.message and "not measured" in result.message
