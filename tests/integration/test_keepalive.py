"""Model servers that close idle keep-alive connections (gunicorn, aiohttp.web), called through smlocal.

Requests come at irregular gaps clustered around the server's keep-alive timeout, so some go out just
as the container closes the pooled connection. None may fail, none may reach the model twice (the
image counts what it received), and the instance stays in rotation (never replaced).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.fixtures.smlocal_server import Smlocal, start_smlocal
from tests.integration.test_fleet import Client, endpoint_containers, strict_runtime

pytestmark = pytest.mark.docker

#: (server, keep-alive timeout s, streams, requests per stream)
CASES = [("aiohttp", 0.5, 1, 100), ("gunicorn", 2.0, 4, 12)]


@pytest.fixture(scope="module")
def smlocal_ka(tmp_path_factory: pytest.TempPathFactory, keepalive_image: str) -> Iterator[Smlocal]:
    env = start_smlocal(tmp_path_factory.mktemp("smlocal-ka"), keepalive_image)
    try:
        yield env
    finally:
        env.server.stop()


def gaps(timeout_s: float, n: int, rng: random.Random) -> list[float]:
    """Mostly just around the keep-alive timeout (the race), some short (reuse), some well past it."""
    out = []
    for _ in range(n):
        roll = rng.random()
        if roll < 0.7:
            out.append(rng.uniform(timeout_s - 0.004, timeout_s + 0.002))
        elif roll < 0.85:
            out.append(rng.uniform(0.0, 0.05))
        else:
            out.append(rng.uniform(timeout_s, timeout_s * 1.5 + 1.0))
    return out


def container_count(smlocal: Smlocal, name: str) -> int:
    """What the model received: GET /count on the container itself (its port on 127.0.0.1)."""
    service = smlocal.server.service
    assert service is not None
    (instance,) = service._fleets[name].all_instances()
    return int(httpx.get(f"{instance.base_url}/count").text)


@pytest.mark.parametrize(("server", "timeout_s", "streams", "per_stream"), CASES, ids=[c[0] for c in CASES])
def test_idle_connection_closes_never_fail_a_request(
    smlocal_ka: Smlocal, server: str, timeout_s: float, streams: int, per_stream: int
) -> None:
    name = f"Ka-{server}"
    described = smlocal_ka.deploy(name, env={"SERVER": server, "KEEPALIVE_S": f"{timeout_s:g}"})
    assert described["EndpointStatus"] == "InService", described.get("FailureReason")
    before = {c.id for c in endpoint_containers(smlocal_ka, name)}
    assert smlocal_ka.server.service is not None
    retries_before = getattr(smlocal_ka.server.service.invoker, "stale_retries", 0)
    failures: list[str] = []
    sent = 0
    lock = threading.Lock()

    def stream(seed: int) -> None:
        nonlocal sent
        rt: Any = strict_runtime(smlocal_ka)
        for gap in gaps(timeout_s, per_stream, random.Random(seed)):
            time.sleep(gap)
            try:
                body = rt.invoke_endpoint(EndpointName=name, Body=b"ka")["Body"].read()
                assert body == b"ka"
            except Exception as exc:  # noqa: BLE001 - every failure is counted and shown
                with lock:
                    failures.append(f"{type(exc).__name__}: {exc}")
            with lock:
                sent += 1

    try:
        threads = [threading.Thread(target=stream, args=(seed,)) for seed in range(streams)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        described = smlocal_ka.sm.describe_endpoint(EndpointName=name)
        received = container_count(smlocal_ka, name)
        after = {c.id for c in endpoint_containers(smlocal_ka, name)}
        retries = getattr(smlocal_ka.server.service.invoker, "stale_retries", 0) - retries_before
    finally:
        smlocal_ka.cleanup(name)
    assert failures == [], f"{len(failures)} of {sent} failed:\n" + "\n".join(failures[:5])
    assert received == sent  # none lost, none sent twice
    assert described["ProductionVariants"][0]["CurrentInstanceCount"] == 1
    assert after == before  # the instance stayed in rotation: never replaced
    print(
        f"{server} keep-alive {timeout_s:g} s: {sent} requests, 0 failed, {retries} stale-connection retries"
    )


def test_killed_instance_of_a_keepalive_server_is_replaced(smlocal_ka: Smlocal) -> None:
    """test_fleet's replacement check on gunicorn: a killed instance costs at most the one request
    in flight on it, the survivor is never suspected for its idle closes, the victim is replaced."""
    name = "Ka-heal"
    smlocal_ka.deploy(name, count=2, env={"SERVER": "gunicorn", "KEEPALIVE_S": "2"})
    before = {c.id: c for c in endpoint_containers(smlocal_ka, name)}
    assert len(before) == 2
    client = Client(smlocal_ka, name, "k=v")
    client.start()
    try:
        deadline = time.monotonic() + 10
        while len(client.answers) < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        victim = next(iter(before.values()))
        victim.kill()
        deadline = time.monotonic() + 30
        replaced = False
        while time.monotonic() < deadline and not replaced:
            described = smlocal_ka.sm.describe_endpoint(EndpointName=name)
            running = {c.id for c in endpoint_containers(smlocal_ka, name)}
            replaced = (
                described["ProductionVariants"][0]["CurrentInstanceCount"] == 2
                and len(running - set(before)) == 1
            )
            time.sleep(0.05)
        assert replaced, "the killed instance was not replaced"
        seen = len(client.answers)
        deadline = time.monotonic() + 10
        while len(client.answers) < seen + 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        survivor = next(c for cid, c in before.items() if cid != victim.id)
        still = {c.id for c in endpoint_containers(smlocal_ka, name)}
    finally:
        client.finish()
        smlocal_ka.cleanup(name)
    assert len(client.failures) <= 1, "\n".join(client.failures)
    assert all("ModelError" in f for f in client.failures)
    assert survivor.id in still  # never taken out for closing idle connections


def all_counts(smlocal: Smlocal, name: str) -> int:
    """What every instance of the endpoint received, added up."""
    service = smlocal.server.service
    assert service is not None
    return sum(int(httpx.get(f"{i.base_url}/count").text) for i in service._fleets[name].all_instances())


@pytest.mark.parametrize(("server", "timeout_s"), [("gunicorn", "2"), ("aiohttp", "0.5")])
def test_invoke_paths_on_real_servers(smlocal_ka: Smlocal, server: str, timeout_s: str) -> None:
    """test_invoke's round trip and payload cap, and test_fleet's spread over instances under
    concurrency, on gunicorn + Flask and aiohttp.web (their own framing, Content-Type and keep-alive
    closes): every answer right, no retry by boto3, none lost or sent twice."""
    name = f"Ka-paths-{server}"
    described = smlocal_ka.deploy(name, count=2, env={"SERVER": server, "KEEPALIVE_S": timeout_s})
    assert described["EndpointStatus"] == "InService", described.get("FailureReason")
    try:
        small = smlocal_ka.rt.invoke_endpoint(
            EndpointName=name, Body=b'{"x": 1}', ContentType="application/json"
        )
        assert small["Body"].read() == b'{"x": 1}'
        assert small["ContentType"] == "application/octet-stream"  # the container's, not the request's
        assert small["InvokedProductionVariant"] == "AllTraffic"
        assert small["ResponseMetadata"]["RetryAttempts"] == 0

        cap = bytes(range(256)) * (6_291_456 // 256)
        big = smlocal_ka.rt.invoke_endpoint(
            EndpointName=name, Body=cap, ContentType="application/octet-stream"
        )
        assert big["Body"].read() == cap

        failures: list[str] = []
        lock = threading.Lock()

        def worker(seed: int) -> None:
            rt: Any = strict_runtime(smlocal_ka)
            for i in range(15):
                body = f"{seed}-{i}".encode()
                try:
                    assert rt.invoke_endpoint(EndpointName=name, Body=body)["Body"].read() == body
                except Exception as exc:  # noqa: BLE001 - every failure is counted and shown
                    with lock:
                        failures.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        received = all_counts(smlocal_ka, name)
        counts = {
            i.handle.id: int(httpx.get(f"{i.base_url}/count").text)
            for i in smlocal_ka.server.service._fleets[name].all_instances()  # type: ignore[union-attr]
        }
    finally:
        smlocal_ka.cleanup(name)
    assert failures == [], f"{len(failures)} failed:\n" + "\n".join(failures[:5])
    assert received == 2 + 8 * 15  # none lost, none sent twice
    assert len(counts) == 2 and all(n > 0 for n in counts.values()), counts  # both instances served
