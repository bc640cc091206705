"""What EnableNetworkIsolation's forwarder adds to a request: the same container image started
isolated (behind the forwarder) and not, each called directly on its 127.0.0.1 port.

    PYTHONPATH=. python3 -m bench.isolation_latency [--requests 1000] [--image smlocal-test-e/netprobe:latest]

Sequential requests on one keep-alive connection (http.client), then on a fresh connection each;
prints the median and p99 of each. Bounded in count; every socket goes to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import http.client
import os
import statistics
import time
import uuid

from emulator.runtime.base import ContainerHandle, ContainerSpec
from emulator.runtime.docker import DockerRuntime


def _wait_ready(handle: ContainerHandle, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", handle.host_port, timeout=2)
            conn.request("GET", "/ping")
            if conn.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{handle.name} never answered /ping")


def _timed(handle: ContainerHandle, count: int, keep_alive: bool) -> list[float]:
    out = []
    conn = http.client.HTTPConnection("127.0.0.1", handle.host_port, timeout=10)
    for _ in range(count):
        if not keep_alive:
            conn = http.client.HTTPConnection("127.0.0.1", handle.host_port, timeout=10)
        started = time.perf_counter()
        conn.request("POST", "/invocations", body=b"{}", headers={"Content-Type": "application/json"})
        conn.getresponse().read()
        out.append((time.perf_counter() - started) * 1000)
        if not keep_alive:
            conn.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--image", default="smlocal-test-e/netprobe:latest")
    args = parser.parse_args()
    runtime = DockerRuntime()
    owner = f"bench-isolation-{os.getpid()}"
    handles = []
    try:
        for isolated in (False, True):
            spec = ContainerSpec(
                image=args.image,
                name=f"smlocal-bench-{uuid.uuid4().hex[:8]}",
                labels={"smlocal.managed": "true", "smlocal.owner": owner, "smlocal.role": "bench"},
                network_isolation=isolated,
            )
            started = time.perf_counter()
            handles.append((isolated, runtime.start(spec)))
            kind = "isolated" if isolated else "direct  "
            print(f"{kind} start (engine calls, until running) {time.perf_counter() - started:.2f} s")
        for isolated, handle in handles:
            _wait_ready(handle)
            _timed(handle, 50, True)  # warm up
            for keep_alive in (True, False):
                ms = sorted(_timed(handle, args.requests, keep_alive))
                p99 = ms[int(len(ms) * 0.99) - 1]
                print(
                    f"{'isolated' if isolated else 'direct  '} {'keep-alive' if keep_alive else 'new conn  '}"
                    f" n={len(ms)} median={statistics.median(ms):.3f} ms p99={p99:.3f} ms"
                )
    finally:
        for isolated, handle in handles:
            started = time.perf_counter()
            runtime.stop(handle.id, 2)
            runtime.remove(handle.id)
            kind = "isolated" if isolated else "direct  "
            print(f"{kind} stop + remove {time.perf_counter() - started:.2f} s")


if __name__ == "__main__":
    main()
