"""Serverless cold starts, split into their parts, against the container's own ready time.

    python3 bench/serverless_cold_start.py [--runs N] [--image TAG]

One serverless endpoint (MemorySizeInMB 1024, the echo test image) on an in-process smlocal server
whose idle time is 0.5 s, so that every call after an idle pause is a cold start. For each run:

- the call: boto3's invoke_endpoint, from sending to the answer (what a client waits);
- container start: the engine's create and start (smlocal's platform log line of the cold start);
- first ping: from the container started to its first 200 on /ping (same line);
- the container's own ready time: from the engine's State.StartedAt to the server's own
  "listening" log line (docker logs with timestamps), i.e. what no emulator can make shorter.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402

from bench._harness import IMAGE, docker_client  # noqa: E402
from emulator.config import ContractLimits  # noqa: E402
from emulator.runtime import labels  # noqa: E402
from emulator.runtime.labels import owner_id  # noqa: E402
from tests.fixtures.smlocal_server import start_smlocal  # noqa: E402

_SPLIT = re.compile(
    r"cold start in ([\d.]+) s \(container start ([\d.]+) s, first /ping 200 after ([\d.]+) s\)"
)


def _ts(text: str) -> float:
    # docker's RFC 3339 with nanoseconds: keep microseconds
    base, _, frac = text.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{base}.{(frac + '000000')[:6]}+00:00").timestamp()


def own_ready_s(container: Any) -> float:
    container.reload()
    started = _ts(container.attrs["State"]["StartedAt"])
    for line in container.logs(timestamps=True).decode().splitlines():
        stamp, _, text = line.partition(" ")
        if "listening on" in text:
            return _ts(stamp) - started
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--image", default=IMAGE)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="smlocal-bench-") as state:
        env = start_smlocal(
            Path(state), args.image, limits=ContractLimits(stop_grace_s=2.0), serverless_idle_s=0.5
        )
        name = "bench-serverless"
        rows: list[tuple[float, float, float, float]] = []
        try:
            env.sm.create_model(ModelName=name, PrimaryContainer={"Image": args.image})
            variant = {
                "VariantName": "AllTraffic",
                "ModelName": name,
                "ServerlessConfig": {"MemorySizeInMB": 1024, "MaxConcurrency": 1},
            }
            env.sm.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[variant])
            env.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
            env.wait(name)
            wanted = [f"{labels.ENDPOINT}={name}", f"{labels.OWNER}={owner_id(env.state_dir)}"]
            engine = docker_client()
            for _ in range(args.runs):
                while engine.containers.list(filters={"label": wanted}):  # idle-stopped first
                    time.sleep(0.05)
                began = time.perf_counter()
                env.rt.invoke_endpoint(EndpointName=name, Body=b"x")["Body"].read()
                call_s = time.perf_counter() - began
                (container,) = engine.containers.list(filters={"label": wanted})
                own = own_ready_s(container)
                log = httpx.get(f"{env.server.url}/_smlocal/endpoints/{name}/logs").text
                split = _SPLIT.findall(log)[-1]
                rows.append((call_s, float(split[1]), float(split[2]), own))
        finally:
            env.cleanup(name)
            env.server.stop()
    print("run  call_s  container_start_s  first_ping_s  container_own_ready_s")
    for i, (call_s, start_s, ping_s, own) in enumerate(rows, 1):
        print(f"{i:>3}  {call_s:6.3f}  {start_s:17.3f}  {ping_s:12.3f}  {own:21.3f}")
    for label, index in (("call", 0), ("container start", 1), ("first ping", 2), ("own ready", 3)):
        print(f"median {label}: {statistics.median(r[index] for r in rows):.3f} s")


if __name__ == "__main__":
    main()
