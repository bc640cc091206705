"""Inference components, measured: the time from CreateInferenceComponent to InService against the
container's own ready time, and what routing by InferenceComponentName adds to an invocation.

    python3 bench/inference_components.py [--quick] [--json PATH]

smlocal runs as a subprocess; this process is the load generator (aiohttp, keep-alive), as in
bench/invoke_overhead.py. All three calls reach the same kind of container (the echo test image):

* direct: the component's copy called on its published 127.0.0.1 port;
* endpoint: a plain endpoint's /endpoints/NAME/invocations on smlocal;
* component: the component's, with X-Amzn-SageMaker-Inference-Component.

The ready time: the copy container's own time from its start until its /ping first answered 200 is
read from smlocal's cold-start profile of the copy (/_smlocal/endpoints/NAME/cold-starts), beside
what the client saw: CreateInferenceComponent until DescribeInferenceComponent says InService
(polled every 20 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench._harness import (  # noqa: E402
    HOST,
    IMAGE,
    Run,
    SmlocalProcess,
    boto_clients,
    deploy,
    docker_client,
    keepalive_session,
    merge,
    poster,
    run_load,
)

ROLE = "arn:aws:iam::123456789012:role/bench"
BODY = b"x" * 1024


def create_component_endpoint(sm: Any, name: str) -> None:
    sm.create_endpoint_config(
        EndpointConfigName=name,
        ExecutionRoleArn=ROLE,
        ProductionVariants=[
            {"VariantName": "AllTraffic", "InstanceType": "ml.m5.large", "InitialInstanceCount": 1}
        ],
    )
    sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    while sm.describe_endpoint(EndpointName=name)["EndpointStatus"] == "Creating":
        time.sleep(0.02)


def create_component(sm: Any, endpoint: str, name: str) -> float:
    """Seconds from CreateInferenceComponent until it is InService."""
    began = time.perf_counter()
    sm.create_inference_component(
        InferenceComponentName=name,
        EndpointName=endpoint,
        VariantName="AllTraffic",
        Specification={
            "Container": {"Image": IMAGE},
            "ComputeResourceRequirements": {"NumberOfCpuCoresRequired": 0.5, "MinMemoryRequiredInMb": 1024},
        },
        RuntimeConfig={"CopyCount": 1},
    )
    while True:
        status = sm.describe_inference_component(InferenceComponentName=name)["InferenceComponentStatus"]
        if status != "Creating":
            break
        time.sleep(0.02)
    if status != "InService":
        raise RuntimeError(f"{name} is {status}")
    return time.perf_counter() - began


def copy_url(component: str) -> str:
    found = docker_client().containers.list(filters={"label": f"smlocal.inference-component={component}"})
    for bindings in (found[0].attrs["NetworkSettings"]["Ports"] or {}).values():
        for b in bindings or []:
            if b.get("HostIp") in (HOST, "") and b.get("HostPort"):
                return f"http://{HOST}:{b['HostPort']}"
    raise RuntimeError(f"no published port for {component}")


def ready_seconds(url: str, endpoint: str) -> list[float]:
    """Each copy's own start until its first healthy /ping (container start, first TCP accept,
    first /ping 200), from smlocal's cold-start profiles (oldest first)."""
    import httpx

    own = ("container start", "first TCP accept", "first /ping 200")
    profiles = httpx.get(f"{url}/_smlocal/endpoints/{endpoint}/cold-starts", timeout=10).json()["Profiles"]
    return [sum(p["Seconds"] for p in profile["Phases"] if p["Name"] in own) for profile in profiles]


async def latencies(urls: dict[str, tuple[str, dict[str, str]]], total: int, block: int) -> dict[str, Run]:
    """Each call `total` times, sequentially, in alternating blocks (drift hits all alike)."""
    runs: dict[str, list[Run]] = {k: [] for k in urls}
    async with keepalive_session() as session:
        calls = {k: poster(session, url, BODY, headers=h) for k, (url, h) in urls.items()}
        for call in calls.values():  # warm the connections
            await run_load(call, 1, 20, 10)
        for _ in range(max(1, total // block)):
            for k, call in calls.items():
                runs[k].append(await run_load(call, 1, block, 60))
    return {k: merge(v) for k, v in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    total, block = (300, 100) if args.quick else (1500, 250)
    console = Console()
    with SmlocalProcess() as server:
        sm, _ = boto_clients(server.url)
        deploy(sm, "bench-plain")
        create_component_endpoint(sm, "bench-ic")
        to_service = [create_component(sm, "bench-ic", f"bench-c{n}") for n in range(3)]
        ready = ready_seconds(server.url, "bench-ic")
        urls = {
            "direct": (f"{copy_url('bench-c0')}/invocations", {}),
            "endpoint": (f"{server.url}/endpoints/bench-plain/invocations", {}),
            "component": (
                f"{server.url}/endpoints/bench-ic/invocations",
                {"X-Amzn-SageMaker-Inference-Component": "bench-c0"},
            ),
        }
        runs = asyncio.run(latencies(urls, total, block))
        for n in range(3):
            sm.delete_inference_component(InferenceComponentName=f"bench-c{n}")
        while sm.list_inference_components()["InferenceComponents"]:
            time.sleep(0.05)
        for name in ("bench-ic", "bench-plain"):
            sm.delete_endpoint(EndpointName=name)
    direct = runs["direct"].p50
    table = Table(title="Inference components (sequential, keep-alive, 1 KiB bodies)")
    for column in ("call", "ok", "p50 ms", "p99 ms", "p50 / direct"):
        table.add_column(column)
    for name, run in runs.items():
        table.add_row(name, str(run.ok), f"{run.p50:.3f}", f"{run.p99:.3f}", f"{run.p50 / direct:.2f}")
    console.print(table)
    overhead_ms = runs["component"].p50 - runs["endpoint"].p50
    console.print(
        f"CreateInferenceComponent -> InService: {', '.join(f'{s:.2f}' for s in to_service)} s "
        f"(median {statistics.median(to_service):.2f} s); the copy's own start to ready: "
        f"{', '.join(f'{s:.2f}' for s in ready)} s"
    )
    console.print(f"routing by component adds {overhead_ms:+.3f} ms at p50 over a plain endpoint's call")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "to_in_service_s": to_service,
                    "copy_ready_s": ready,
                    "p50_ms": {k: r.p50 for k, r in runs.items()},
                    "p99_ms": {k: r.p99 for k, r in runs.items()},
                    "component_minus_endpoint_p50_ms": overhead_ms,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
