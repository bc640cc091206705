"""A user's test with one `sagemaker_endpoint`, against a bare testcontainers run of the same image.

    python3 bench/user_test.py [--runs N] [--image TAG]

smlocal, through the fixtures' own code (contract_tests.pytest_fixtures, what pytest runs), split:
- server start: `smlocal serve` subprocess on a free port until its health route answers;
- InService: CreateModel, CreateEndpointConfig, CreateEndpoint, DescribeEndpoint until InService;
- invoke: one boto3 invoke_endpoint;
- teardown: DeleteEndpoint until DescribeEndpoint no longer knows it, DeleteEndpointConfig, DeleteModel;
- server stop: SIGTERM, the process gone, the check that none of its containers is left, state dir removed.
Plus the whole thing as a user runs it: `python -m pytest` on a one-test file (interpreter, pytest,
plugin and boto3 imports included), and the same pytest on a test that uses no fixture (its floor).

testcontainers (TESTCONTAINERS_RYUK_DISABLED=true, TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1): a
DockerContainer running `IMAGE serve`, port 8080 published on 127.0.0.1, HttpWaitStrategy for a 200
from /ping (polled every 50 ms), one POST /invocations, SIGTERM stop then remove. Split: start
(create + start), ready (/ping 200), invoke, stop.

Each run does both, alternating which goes first; the figures are medians, the ratios smlocal /
testcontainers of the same run's medians. The first run of each is a warm-up (imports), not counted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._harness import IMAGE, REPO, free_port  # noqa: E402

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
os.environ.setdefault("TESTCONTAINERS_HOST_OVERRIDE", "127.0.0.1")
# Inside a container (as on these machines) testcontainers picks the bridge gateway (172.17.0.1)
# despite the host override; docker_host mode makes it use the override and the mapped port.
os.environ.setdefault("TESTCONTAINERS_CONNECTION_MODE", "docker_host")

USER_TEST = """
import os

def test_predict(sagemaker_endpoint, sagemaker_clients):
    name = sagemaker_endpoint(os.environ["MODEL_IMAGE"])
    out = sagemaker_clients.runtime.invoke_endpoint(
        EndpointName=name, Body=b"{}", ContentType="application/json"
    )
    assert out["Body"].read() == b"{}"
"""
EMPTY_TEST = "def test_nothing():\n    pass\n"

Parts = dict[str, float]


def _timed(parts: Parts, name: str, fn: Callable[[], object]) -> object:
    start = time.perf_counter()
    result = fn()
    parts[name] = time.perf_counter() - start
    return result


def smlocal_run(image: str) -> Parts:
    from contract_tests.pytest_fixtures.clients import make_clients
    from contract_tests.pytest_fixtures.endpoints import EndpointFactory, build_request
    from contract_tests.pytest_fixtures.server import endpoint_logs, start_server

    parts: Parts = {}
    start = time.perf_counter()
    server = start_server("us-east-1", [])
    parts["server start"] = time.perf_counter() - start
    try:
        clients = make_clients(server.url, server.region)
        factory = EndpointFactory(clients.sagemaker, lambda n: endpoint_logs(server.url, n), "bench")
        name = _timed(parts, "InService", lambda: factory.create(build_request(image)))
        body = _timed(
            parts,
            "invoke",
            lambda: clients.runtime.invoke_endpoint(
                EndpointName=name, Body=b"{}", ContentType="application/json"
            )["Body"].read(),
        )
        assert body == b"{}", body
        problems = _timed(parts, "teardown", factory.cleanup)
        assert problems == [], problems
    finally:
        _timed(parts, "server stop", server.stop)
    assert server.leftover_containers == 0
    return parts


def testcontainers_run(image: str) -> Parts:
    import httpx
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.wait_strategies import HttpWaitStrategy

    parts: Parts = {}
    port = free_port()
    container = DockerContainer(image).with_command("serve")
    container.ports["8080/tcp"] = ("127.0.0.1", port)  # type: ignore[assignment] # loopback only
    container.waiting_for(
        HttpWaitStrategy(8080, "/ping").for_status_code(200).with_poll_interval(0.05).with_startup_timeout(60)
    )
    try:
        start = time.perf_counter()
        container.start()
        parts["start+ready"] = time.perf_counter() - start
        body = _timed(
            parts,
            "invoke",
            lambda: (
                httpx.post(
                    f"http://127.0.0.1:{port}/invocations",
                    content=b"{}",
                    headers={"Content-Type": "application/json"},
                    timeout=60,
                ).content
            ),
        )
        assert body == b"{}", body
    finally:

        def stop() -> None:
            wrapped = container.get_wrapped_container()
            if wrapped is not None:
                wrapped.stop(timeout=30)  # SIGTERM, the contract's grace
            container.stop()

        _timed(parts, "stop", stop)
    return parts


def pytest_run(test_text: str, image: str) -> float:
    with tempfile.TemporaryDirectory(prefix="smlocal-bench-user-") as tmp:
        (Path(tmp) / "test_user.py").write_text(test_text)
        (Path(tmp) / "pytest.ini").write_text("[pytest]\n")
        env = {**os.environ, "MODEL_IMAGE": image, "PYTHONPATH": str(REPO)}
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"],
            cwd=tmp,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        elapsed = time.perf_counter() - start
        if done.returncode != 0:
            raise RuntimeError(f"the user's pytest failed:\n{done.stdout}\n{done.stderr}")
        return elapsed


def _median(runs: list[Parts], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--image", default=os.environ.get("SMLOCAL_ECHO_TAG", IMAGE))
    args = parser.parse_args()

    smlocal_run(args.image)  # warm-up: imports, the engine's image cache
    testcontainers_run(args.image)
    ours: list[Parts] = []
    theirs: list[Parts] = []
    whole: list[float] = []
    floor: list[float] = []
    for i in range(args.runs):
        order = [(ours, smlocal_run), (theirs, testcontainers_run)]
        for runs, fn in order if i % 2 == 0 else reversed(order):
            runs.append(fn(args.image))
        whole.append(pytest_run(USER_TEST, args.image))
        floor.append(pytest_run(EMPTY_TEST, args.image))

    for r in ours:
        r["total"] = sum(r.values())
    for r in theirs:
        r["total"] = sum(r.values())
    print(f"image {args.image}, {args.runs} runs (medians, seconds)")
    print("smlocal fixtures (in-process, the fixtures' code):")
    for key in ("server start", "InService", "invoke", "teardown", "server stop", "total"):
        print(f"  {key:<14} {_median(ours, key):7.3f}")
    print("testcontainers (bare DockerContainer):")
    for key in ("start+ready", "invoke", "stop", "total"):
        print(f"  {key:<14} {_median(theirs, key):7.3f}")
    w, f = statistics.median(whole), statistics.median(floor)
    print(f"user's pytest run, one sagemaker_endpoint test: {w:7.3f} (a test with no fixture: {f:.3f})")
    mine, tc = (lambda k: _median(ours, k)), (lambda k: _median(theirs, k))
    rows = [
        ("total", mine("total"), tc("total")),
        ("start + InService / start+ready", mine("server start") + mine("InService"), tc("start+ready")),
        ("InService / start+ready", mine("InService"), tc("start+ready")),
        ("invoke", mine("invoke"), tc("invoke")),
        ("teardown + server stop / stop", mine("teardown") + mine("server stop"), tc("stop")),
        ("user's pytest run minus its floor / total", w - f, tc("total")),
    ]
    print("ratios (smlocal / testcontainers, same run):")
    for label, a, b in rows:
        print(f"  {label:<42} {a / b:6.2f}x")


if __name__ == "__main__":
    main()
