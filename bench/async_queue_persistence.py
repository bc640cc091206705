"""The asynchronous queue's persistence cost per change against its backlog (no server, no S3).

    python3 bench/async_queue_persistence.py [--requests 5000]

Queues N requests, then starts and finishes them all, timing each change (the append to the journal,
and the compactions it triggers), and compares the p50/max per change with one rewrite of the whole
queue at full backlog (what each change cost before the journal). Prints a table; docs/performance.md
has the figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import tempfile
import time
from pathlib import Path

from emulator.hosting.async_inference.queue import AsyncRequest, RequestQueue
from emulator.hosting.state_files import write_atomically


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000)
    n = parser.parse_args().requests
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "queue.json"
        queue = RequestQueue(path)
        puts, ends = [], []
        for i in range(n):
            request = AsyncRequest(
                f"id-{i}", f"s3://b/in/{i}", f"s3://b/out/{i}", f"s3://b/err/{i}", time.time(), 21600, 900
            )
            began = time.perf_counter()
            queue.put(request)
            puts.append(time.perf_counter() - began)
        began = time.perf_counter()
        RequestQueue(path)
        reload_s = time.perf_counter() - began
        items = [dataclasses.asdict(r) for r in queue._waiting]  # the old way: the whole queue per change
        began = time.perf_counter()
        write_atomically(Path(folder) / "whole.json", json.dumps(items, indent=1))
        whole_s = time.perf_counter() - began
        while (first := queue.peek()) is not None:
            began = time.perf_counter()
            queue.start(first)
            queue.finish(first)
            ends.append((time.perf_counter() - began) / 2)
    ms = 1e3
    print(f"{n} requests queued, then started and finished (seconds per change, ms)")
    for label, times, count in (("put", puts, 1), ("start/finish", ends, 2)):
        p50, top = statistics.median(times) * ms, max(times) * ms
        print(f"  {label:13} p50 {p50:.3f}  max {top:.2f}  total {sum(times) * count:.2f} s")
    print(f"  reload of the full queue: {reload_s * ms:.1f} ms")
    print(
        f"  one rewrite of the whole queue at {n} (a change's cost before the journal): {whole_s * ms:.1f} ms"
    )
    print(f"  ratio, that rewrite / a put's p50: {whole_s / statistics.median(puts):.0f}x")


if __name__ == "__main__":
    main()
