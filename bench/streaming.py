"""Response streaming: what smlocal adds to a streamed answer, against the same container called
directly, in one run.

    python3 bench/streaming.py [--quick] [--json PATH]

The model is the streamer test image (tests/fixtures/images/streamer, uvicorn + FastAPI
StreamingResponse), one endpoint through smlocal (`smlocal serve` in its own process) and the
same container's published 127.0.0.1 port for the direct calls. Both sides are read by one aiohttp
client in this process, one request at a time, alternating direct and smlocal; the smlocal side
decodes the event stream with botocore's own decoder, as boto3 does.

- time to first byte: a one-chunk answer; from sending the request to the first body byte (direct)
  or the first PayloadPart decoded (smlocal);
- chunk delay: 200 chunks 10 ms apart, each stamped with time.time_ns() by the container as it
  writes it; the delay is the client's time.time_ns() when the part carrying it is read, minus the
  stamp (the container and this process share the machine's clock);
- throughput: an 800-chunk answer of 64 KiB chunks (52.4 MB), read to the end; through smlocal
  twice: decoded with botocore (what a boto3 user gets) and read as bytes (what the server does).
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

import aiohttp  # noqa: E402
from botocore.eventstream import EventStreamBuffer  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench._harness import SmlocalProcess, boto_clients, container_url, deploy, keepalive_session  # noqa: E402
from tests.fixtures.streaming import STREAMER_TAG, build_streamer_image  # noqa: E402

NAME = "bench-stream"


def _script(**script: Any) -> bytes:
    return json.dumps(script).encode()


class Side:
    """One way to the container: `direct` (its own port) or through smlocal (the stream op)."""

    def __init__(self, session: aiohttp.ClientSession, url: str, through: bool, decode: bool = True) -> None:
        self.session = session
        self.url = url
        self.through = through
        self.decode = decode

    async def read(self, body: bytes, on_part: Any = None) -> tuple[float, int]:
        """(seconds to the first byte or part, total bytes of the answer); `on_part(bytes, ns)`
        for each piece as read."""
        started = time.perf_counter()
        first: float | None = None
        size = 0
        buffer = EventStreamBuffer()
        async with self.session.post(self.url, data=body, headers={"Content-Type": "application/json"}) as r:
            assert r.status == 200, await r.text()
            async for chunk in r.content.iter_any():
                now_ns = time.time_ns()
                if self.through and self.decode:
                    buffer.add_data(chunk)
                    pieces = [m.payload for m in buffer if m.headers.get(":event-type") == "PayloadPart"]
                else:
                    pieces = [chunk]
                for piece in pieces:
                    if first is None:
                        first = time.perf_counter() - started
                    size += len(piece)
                    if on_part is not None:
                        on_part(piece, now_ns)
        assert first is not None
        return first, size


async def measure(
    direct: Side, smlocal: Side, raw: Side, rounds: int, delay_rounds: int, mb_rounds: int
) -> dict[str, Any]:
    sides = (direct, smlocal)
    ttfb: dict[bool, list[float]] = {False: [], True: []}
    one = _script(parts=1)
    for side in sides:  # warm both connections
        await side.read(one)
    for _ in range(rounds):
        for side in sides:
            ttfb[side.through].append((await side.read(one))[0])

    delays: dict[bool, list[float]] = {False: [], True: []}
    stamped = _script(parts=200, interval_s=0.01, stamp=True)
    for _ in range(delay_rounds):
        for side in sides:
            pending = bytearray()

            def on_part(piece: bytes, now_ns: int, side: Side = side, pending: bytearray = pending) -> None:
                pending.extend(piece)
                *lines, rest = bytes(pending).split(b"\n")
                pending[:] = rest
                for line in lines:
                    delays[side.through].append((now_ns - int(line.split()[1])) / 1e6)

            await side.read(stamped, on_part)

    throughput: dict[str, list[float]] = {"direct": [], "smlocal": [], "smlocal_undecoded": []}
    big = _script(parts=800, size=65536)
    for _ in range(mb_rounds):
        for key, side in (("direct", direct), ("smlocal", smlocal), ("smlocal_undecoded", raw)):
            started = time.perf_counter()
            _, size = await side.read(big)
            assert size >= 800 * 65536
            throughput[key].append(800 * 65536 / (time.perf_counter() - started) / 1e6)

    def pct(values: list[float], p: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]

    return {
        "ttfb_ms": {
            k: statistics.median(v) * 1e3 for k, v in (("direct", ttfb[False]), ("smlocal", ttfb[True]))
        },
        "ttfb_p99_ms": {k: pct(v, 99) * 1e3 for k, v in (("direct", ttfb[False]), ("smlocal", ttfb[True]))},
        "delay_p50_ms": {
            k: statistics.median(v) for k, v in (("direct", delays[False]), ("smlocal", delays[True]))
        },
        "delay_p99_ms": {k: pct(v, 99) for k, v in (("direct", delays[False]), ("smlocal", delays[True]))},
        "throughput_mb_s": {k: statistics.median(v) for k, v in throughput.items()},
        "samples": {"ttfb": rounds, "delays": len(delays[True]), "throughput": mb_rounds},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    rounds, delay_rounds, mb_rounds = (20, 1, 1) if args.quick else (300, 5, 5)
    console = Console()
    build_streamer_image("smlocal-base:py3.11-bookworm")
    with SmlocalProcess() as server:
        sm, _ = boto_clients(server.url)
        deploy(sm, NAME, image=STREAMER_TAG)

        async def run() -> dict[str, Any]:
            async with keepalive_session() as session:
                direct = Side(session, f"{container_url(NAME)}/invocations", through=False)
                through = Side(
                    session, f"{server.url}/endpoints/{NAME}/invocations-response-stream", through=True
                )
                raw = Side(session, through.url, through=True, decode=False)
                return await measure(direct, through, raw, rounds, delay_rounds, mb_rounds)

        results = asyncio.run(run())
        sm.delete_endpoint(EndpointName=NAME)
    table = Table("figure", "direct", "through smlocal", "difference / ratio")
    for key, label in (
        ("ttfb_ms", "time to first byte, p50 (ms)"),
        ("ttfb_p99_ms", "time to first byte, p99 (ms)"),
        ("delay_p50_ms", "chunk written -> part read, p50 (ms)"),
        ("delay_p99_ms", "chunk written -> part read, p99 (ms)"),
    ):
        d, s = results[key]["direct"], results[key]["smlocal"]
        table.add_row(label, f"{d:.3f}", f"{s:.3f}", f"+{s - d:.3f} ms")
    d, s = results["throughput_mb_s"]["direct"], results["throughput_mb_s"]["smlocal"]
    table.add_row("52.4 MB stream (MB/s)", f"{d:.0f}", f"{s:.0f}", f"{s / d:.2f}")
    u = results["throughput_mb_s"]["smlocal_undecoded"]
    table.add_row("  the same, event stream not decoded", f"{d:.0f}", f"{u:.0f}", f"{u / d:.2f}")
    console.print(table)
    console.print(f"samples: {results['samples']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
