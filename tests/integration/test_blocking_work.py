"""Blocking engine work does not starve the control plane (issue 9, point 4): while 8 containers that
ignore SIGTERM are being stopped (each stop waits out the stop grace, then SIGKILL), CreateModel,
DescribeEndpoint and the server's readiness route keep answering at once, and a new endpoint starts.
Real Docker (the echo image with IGNORE_SIGTERM=1), boto3 against the real server."""

from __future__ import annotations

import statistics
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker
import pytest

from emulator.config import ContractLimits
from emulator.runtime import labels
from tests.fixtures.smlocal_server import TEST_LIMITS, start_smlocal

pytestmark = pytest.mark.docker

GRACE_S = 8.0  # each stop holds its engine call this long: the measurement runs inside it
STUCK = 8


def _timed(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def test_control_plane_answers_while_stuck_containers_are_stopped(
    tmp_path: Path, echo_image: str, aws_credentials: None
) -> None:
    limits = ContractLimits(
        startup_timeout_s=30.0,
        invocation_timeout_s=TEST_LIMITS.invocation_timeout_s,
        stop_grace_s=GRACE_S,
    )
    env = start_smlocal(tmp_path, echo_image, limits=limits)
    client = docker.from_env()
    owner = labels.owner_id(tmp_path)
    try:
        stuck = env.deploy("Stuck", env={"IGNORE_SIGTERM": "1"}, count=STUCK, wait=True)
        assert stuck["EndpointStatus"] == "InService", stuck.get("FailureReason")
        env.sm.describe_endpoint(EndpointName="Stuck")  # warm the client's connection
        env.sm.create_model(ModelName="Warm", PrimaryContainer={"Image": echo_image})
        env.sm.create_endpoint_config(
            EndpointConfigName="Fresh",
            ProductionVariants=[
                {"VariantName": "AllTraffic", "ModelName": "Warm", "InitialInstanceCount": 1}
            ],
        )

        env.sm.delete_endpoint(EndpointName="Stuck")  # 8 stops, each waiting out the grace
        deleting_since = time.monotonic()
        env.sm.create_endpoint(EndpointName="Fresh", EndpointConfigName="Fresh")
        latencies: dict[str, list[float]] = {"CreateModel": [], "DescribeEndpoint": [], "health": []}
        fresh_ready: float | None = None
        n = 0
        while time.monotonic() - deleting_since < GRACE_S - 2.0:
            n += 1
            latencies["CreateModel"].append(
                _timed(
                    lambda n=n: env.sm.create_model(ModelName=f"M{n}", PrimaryContainer={"Image": echo_image})
                )
            )
            latencies["DescribeEndpoint"].append(
                _timed(lambda: env.sm.describe_endpoint(EndpointName="Stuck"))
            )
            latencies["health"].append(
                _timed(lambda: urllib.request.urlopen(f"{env.server.url}/_smlocal/health", timeout=30).read())
            )
            if fresh_ready is None:
                status = env.sm.describe_endpoint(EndpointName="Fresh")["EndpointStatus"]
                if status == "InService":
                    fresh_ready = time.monotonic() - deleting_since
            time.sleep(0.05)
        # the stops were still under way the whole time (else the measurement proves nothing)
        assert env.sm.describe_endpoint(EndpointName="Stuck")["EndpointStatus"] == "Deleting"

        for what, values in latencies.items():
            ms = sorted(v * 1000 for v in values)
            print(
                f"{what}: {len(ms)} calls during {STUCK} stuck stops, "
                f"p50 {statistics.median(ms):.1f} ms, max {ms[-1]:.1f} ms"
            )
        print(f"a new endpoint was InService {fresh_ready} s after DeleteEndpoint of the stuck one")
        # The goal is every call under 100 ms (measured and printed above; docs/reliability.md). The
        # assertion guards against starvation (a starved call took 8.3 s before the bounded pools) with
        # room for a loaded CI machine: the median under 100 ms, every single call under 500 ms.
        for what, values in latencies.items():
            assert statistics.median(values) < 0.1, (what, sorted(values)[-5:])
            assert max(values) < 0.5, (what, sorted(values)[-5:])
        assert fresh_ready is not None and fresh_ready < GRACE_S - 2.0

        assert env.server.service is not None
        env.server.call(env.server.service.wait_idle(), timeout_s=60)
        for i in range(1, n + 1):
            env.sm.delete_model(ModelName=f"M{i}")
        env.cleanup("Fresh")
        env.sm.delete_model(ModelName="Warm")
        env.cleanup("Stuck")
    finally:
        env.server.stop()
    assert client.api.containers(all=True, filters={"label": f"{labels.OWNER}={owner}"}) == []
    client.close()
