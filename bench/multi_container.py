"""Multi-container endpoints: time to InService against the containers' own ready time, and what
each Serial hop adds against calling the same containers directly, in one run.

    python3 bench/multi_container.py [--quick] [--json PATH]

Ready time: N echo containers (the image with the accept-bind-to-port label) started directly with
the docker SDK, one thread each (as smlocal starts an instance's containers), each on its own
published port, timed until every /ping answered 200;
then an N-container Direct endpoint through smlocal, timed from CreateEndpoint to InService (polled
every 20 ms). Serial hops: a 3-container Serial endpoint (STAGE echo containers) called through
smlocal, against the same three containers of that endpoint called in turn directly on their
published 127.0.0.1 ports, each answer's body and Content-Type the next request, as smlocal does.
Both sides run one request at a time over keep-alive connections, alternating in blocks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench._harness import HOST, IMAGE, SmlocalProcess, boto_clients, docker_client, keepalive_session  # noqa: E402
from emulator.runtime import labels  # noqa: E402
from emulator.runtime.images import build_image  # noqa: E402

BIND_IMAGE = IMAGE.rsplit(":", 1)[0] + "-bind:latest"
BIND_DIR = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "images" / "echo-bind"
BODY = b'{"x": 1}'


def _variant(name: str) -> list[dict[str, Any]]:
    return [
        {
            "VariantName": "AllTraffic",
            "ModelName": name,
            "InitialInstanceCount": 1,
            "InstanceType": "ml.m5.large",
        }
    ]


def _create(sm: Any, name: str, containers: list[dict[str, Any]], mode: str) -> float:
    """Model, config and endpoint; the seconds from CreateEndpoint to InService."""
    sm.create_model(ModelName=name, Containers=containers, InferenceExecutionConfig={"Mode": mode})
    sm.create_endpoint_config(EndpointConfigName=name, ProductionVariants=_variant(name))
    started = time.perf_counter()
    sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    while True:
        described = sm.describe_endpoint(EndpointName=name)
        if described["EndpointStatus"] != "Creating":
            break
        time.sleep(0.02)
    took = time.perf_counter() - started
    if described["EndpointStatus"] != "InService":
        raise RuntimeError(f"{name}: {described['EndpointStatus']}: {described.get('FailureReason')}")
    return took


def _delete(sm: Any, name: str) -> None:
    sm.delete_endpoint(EndpointName=name)
    sm.delete_endpoint_config(EndpointConfigName=name)
    sm.delete_model(ModelName=name)


def direct_ready_time(n: int) -> tuple[float, float]:
    """N containers started at once with the docker SDK (one thread each, as smlocal starts an
    instance's containers), each on its own port: (seconds until every /ping answered 200, the
    slowest container's own time from its start call to its first 200)."""
    import httpx

    client = docker_client()
    run = uuid.uuid4().hex[:8]

    def start_and_wait(i: int) -> tuple[Any, float]:
        began = time.perf_counter()
        c = client.containers.run(
            BIND_IMAGE,
            ["serve"],
            detach=True,
            name=f"smlocal-bench-ready-{run}-{i}",
            labels={labels.MANAGED: "true", labels.ROLE: "bench"},
            ports={"8080/tcp": (HOST, None)},
        )
        c.reload()
        url = f"http://{HOST}:{c.attrs['NetworkSettings']['Ports']['8080/tcp'][0]['HostPort']}/ping"
        with httpx.Client(timeout=2.0) as http:
            while True:
                try:
                    if http.get(url).status_code == 200:
                        return c, time.perf_counter() - began
                except httpx.HTTPError:
                    pass
                time.sleep(0.02)

    from concurrent.futures import ThreadPoolExecutor

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=n) as pool:
        done = list(pool.map(start_and_wait, range(n)))
    all_ready = time.perf_counter() - started
    for c, _ in done:
        c.remove(force=True)
    return all_ready, max(own for _, own in done)


def published_ports(endpoint: str) -> dict[str, str]:
    """ContainerHostname -> its published 127.0.0.1 URL, read from the engine (the instance's network
    container publishes every container's port)."""
    client = docker_client()
    found = client.containers.list(filters={"label": f"{labels.ENDPOINT}={endpoint}"})
    net = [c for c in found if c.labels.get(labels.ROLE) == labels.ROLE_INSTANCE_NET]
    if len(net) != 1:
        raise RuntimeError(f"expected one instance network container for {endpoint}, found {len(net)}")
    ports = net[0].attrs["NetworkSettings"]["Ports"]
    out: dict[str, str] = {}
    for c in found:
        hostname = c.labels.get(labels.CONTAINER_HOSTNAME)
        if hostname:
            port = c.labels[labels.CONTAINER_PORT]
            out[hostname] = f"http://{HOST}:{ports[f'{port}/tcp'][0]['HostPort']}"
    return out


async def _serial_direct(session: aiohttp.ClientSession, urls: list[str]) -> float:
    started = time.perf_counter()
    body, content_type = BODY, "application/json"
    for url in urls:
        async with session.post(f"{url}/invocations", data=body, headers={"Content-Type": content_type}) as r:
            body = await r.read()
            content_type = r.headers.get("Content-Type", "application/octet-stream")
            if r.status != 200:
                raise RuntimeError(f"direct hop {url}: HTTP {r.status}")
    return time.perf_counter() - started


async def _through(session: aiohttp.ClientSession, url: str) -> float:
    started = time.perf_counter()
    async with session.post(url, data=BODY, headers={"Content-Type": "application/json"}) as r:
        await r.read()
        if r.status != 200:
            raise RuntimeError(f"through smlocal: HTTP {r.status}")
    return time.perf_counter() - started


async def serial_hops(
    server_url: str, endpoint: str, hostnames: list[str], n: int, block: int
) -> dict[str, Any]:
    urls_by_name = published_ports(endpoint)
    urls = [urls_by_name[h] for h in hostnames]
    through_url = f"{server_url}/endpoints/{endpoint}/invocations"
    direct: list[float] = []
    through: list[float] = []
    async with keepalive_session() as session:
        for _ in range(20):  # warm both paths' connections
            await _serial_direct(session, urls)
            await _through(session, through_url)
        while len(direct) < n:
            for _ in range(block):
                direct.append(await _serial_direct(session, urls))
            for _ in range(block):
                through.append(await _through(session, through_url))
    d50, t50 = statistics.median(direct), statistics.median(through)
    return {
        "containers": len(urls),
        "requests_each": len(direct),
        "direct_chain_p50_ms": d50 * 1000,
        "through_p50_ms": t50 * 1000,
        "added_per_hop_ms": (t50 - d50) * 1000 / len(urls),
        "through_over_direct": t50 / d50,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer requests and one InService run each")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    rounds = 1 if args.quick else 3
    n_requests, block = (300, 50) if args.quick else (2000, 100)
    build_image(BIND_DIR, BIND_IMAGE, buildargs={"ECHO_IMAGE": IMAGE})
    console = Console()
    results: dict[str, Any] = {"in_service": [], "serial": None}
    with SmlocalProcess(ready_timeout_s=60) as server:
        sm, _ = boto_clients(server.url)
        for n in (2, 15):
            for r in range(rounds):
                ready, own = direct_ready_time(n)
                name = f"bench-mc{n}-{r}-{uuid.uuid4().hex[:6]}"
                containers = [{"ContainerHostname": f"c{i}", "Image": BIND_IMAGE} for i in range(n)]
                in_service = _create(sm, name, containers, "Direct")
                _delete(sm, name)
                results["in_service"].append(
                    {"containers": n, "ready_s": ready, "slowest_own_s": own, "in_service_s": in_service}
                )
        name = f"bench-serial-{uuid.uuid4().hex[:6]}"
        hostnames = ["first", "second", "third"]
        stages = [
            {
                "ContainerHostname": h,
                "Image": BIND_IMAGE,
                "Environment": {"STAGE": h, "STAGE_CONTENT_TYPE": "text/csv"},
            }
            for h in hostnames
        ]
        _create(sm, name, stages, "Serial")
        results["serial"] = asyncio.run(serial_hops(server.url, name, hostnames, n_requests, block))
        _delete(sm, name)
    table = Table(
        "containers",
        "all ready (direct)",
        "slowest container's own",
        "InService (smlocal)",
        "ratio to all ready",
    )
    for n in (2, 15):
        rows = [x for x in results["in_service"] if x["containers"] == n]
        ready = statistics.median(x["ready_s"] for x in rows)
        own = statistics.median(x["slowest_own_s"] for x in rows)
        in_service = statistics.median(x["in_service_s"] for x in rows)
        table.add_row(
            str(n), f"{ready:.2f} s", f"{own:.2f} s", f"{in_service:.2f} s", f"{in_service / ready:.2f}"
        )
    console.print(table)
    s = results["serial"]
    hops = Table("Serial, 3 containers", "direct chain p50", "through smlocal p50", "ratio", "added per hop")
    hops.add_row(
        f"{s['requests_each']} requests each",
        f"{s['direct_chain_p50_ms']:.3f} ms",
        f"{s['through_p50_ms']:.3f} ms",
        f"{s['through_over_direct']:.2f}",
        f"{s['added_per_hop_ms']:.3f} ms",
    )
    console.print(hops)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
