"""Soak: 10,000 invocations at concurrency 64 through smlocal; every one must be answered 200.

    python3 bench/load_soak.py [--requests N] [--concurrency C] [--server echo|gunicorn|aiohttp]
                               [--keepalive-s S] [--json PATH]

smlocal runs as a subprocess so that its /proc entries can be read: open file descriptors and RSS
before (after a warm-up), during (sampled every 0.5 s) and after (after a settle), and the number of
its containers. At the end smlocal gets SIGTERM; no container of it may be left behind.
Exit status 0 only when every request got a 200 and nothing leaked. --server gunicorn/aiohttp soaks
the keep-alive test image (tests/fixtures/images/keepalive) instead of the echo image: a server that
closes idle connections after --keep-alive-s seconds (default 2).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench._harness import (  # noqa: E402
    IMAGE,
    SmlocalProcess,
    boto_clients,
    deploy,
    docker_client,
    keepalive_session,
    poster,
    run_load,
)
from emulator.runtime.labels import owner_id  # noqa: E402

KB = b"s" * 1024
SETTLE_S = 3.0


def snapshot(server: SmlocalProcess) -> dict[str, Any]:
    owner = owner_id(server.state_dir / "state")
    mine = docker_client().containers.list(all=True, filters={"label": f"smlocal.owner={owner}"})
    return {
        "fds": server.fd_count(),
        "rss_mib": round(server.rss_mib(), 1),
        "containers": len(mine),
        "running": sum(1 for c in mine if c.status == "running"),
    }


async def soak(server: SmlocalProcess, n: int, concurrency: int, max_s: float) -> tuple[Any, dict[str, Any]]:
    url = f"{server.url}/endpoints/bench-soak/invocations"
    peak = {"fds": 0, "rss_mib": 0.0}
    done = asyncio.Event()

    async def sampler() -> None:
        while not done.is_set():
            peak["fds"] = max(peak["fds"], server.fd_count())
            peak["rss_mib"] = max(peak["rss_mib"], round(server.rss_mib(), 1))
            try:
                await asyncio.wait_for(done.wait(), 0.5)
            except TimeoutError:
                pass

    async with keepalive_session() as session:
        call = poster(session, url, KB, timeout_s=60)
        task = asyncio.create_task(sampler())
        try:
            run = await run_load(call, concurrency, n, max_s)
        finally:
            done.set()
            await task
    return run, peak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--max-seconds", type=float, default=300.0)
    parser.add_argument("--server", choices=("echo", "gunicorn", "aiohttp"), default="echo")
    parser.add_argument("--keepalive-s", type=float, default=2.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    image, env = IMAGE, {}
    if args.server != "echo":
        from emulator.runtime.images import ensure_base_image
        from tests.fixtures.keepalive import build_keepalive_image

        image = build_keepalive_image(ensure_base_image(docker_client()))
        env = {"SERVER": args.server, "KEEPALIVE_S": f"{args.keepalive_s:g}"}
    console = Console(width=max(100, Console().width))
    with SmlocalProcess() as server:
        sm, _ = boto_clients(server.url)
        deploy(sm, "bench-soak", env=env, image=image)
        warm = asyncio.run(_warm(server.url))
        time.sleep(1.0)
        before = snapshot(server)
        console.log(f"smlocal pid {server.pid}; before: {before}; load average {os.getloadavg()}")
        run, peak = asyncio.run(soak(server, args.requests, args.concurrency, args.max_seconds))
        time.sleep(SETTLE_S)
        after = snapshot(server)
        console.log(f"after {SETTLE_S} s settle: {after}")
        code = server.stop()
    leftovers = server.leftovers
    global_left = docker_client().containers.list(all=True, filters={"label": "smlocal.managed=true"})

    what = "echo" if args.server == "echo" else f"{args.server}, keep-alive {args.keepalive_s:g} s"
    t = Table(
        title=f"Soak: {args.requests:,} invocations at concurrency {args.concurrency} through smlocal "
        f"({what})"
    )
    t.add_column("figure")
    t.add_column("value", justify="right")
    t.add_row("answered 200", f"{run.ok:,} / {args.requests:,}")
    t.add_row("statuses / exceptions", str(dict(run.statuses)))
    t.add_row("wall time", f"{run.wall_s:.1f} s ({run.rps:,.0f} req/s)")
    t.add_row("latency p50 / p99 / max", f"{run.p50:.1f} / {run.p99:.1f} / {max(run.latencies_ms):.1f} ms")
    for key in ("fds", "rss_mib", "containers", "running"):
        t.add_row(f"{key}: before -> peak -> after", f"{before[key]} -> {peak.get(key, '-')} -> {after[key]}")
    t.add_row("smlocal exit code after SIGTERM", str(code))
    t.add_row("its containers left after exit", str(leftovers or "none"))
    t.add_row(
        "any smlocal.managed=true container on the engine", str([c.name for c in global_left] or "none")
    )
    console.print(t)
    ok = (
        run.ok == args.requests
        and not run.failures
        and not leftovers
        and after["containers"] == before["containers"]
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "server": args.server,
                    "keepalive_s": args.keepalive_s,
                    "requests": args.requests,
                    "concurrency": args.concurrency,
                    "ok": run.ok,
                    "statuses": {str(k): v for k, v in run.statuses.items()},
                    "wall_s": run.wall_s,
                    "rps": run.rps,
                    "p50_ms": run.p50,
                    "p99_ms": run.p99,
                    "max_ms": max(run.latencies_ms),
                    "before": before,
                    "peak": peak,
                    "after": after,
                    "exit_code": code,
                    "leftovers": leftovers,
                    "warmup_statuses": {str(k): v for k, v in warm.statuses.items()},
                },
                indent=2,
            )
        )
    console.print("[green]PASS[/]" if ok else "[red]FAIL[/]")
    return 0 if ok else 1


async def _warm(url: str) -> Any:
    async with keepalive_session() as session:
        call = poster(session, f"{url}/endpoints/bench-soak/invocations", KB)
        return await run_load(call, 64, 500, 60)


if __name__ == "__main__":
    sys.exit(main())
