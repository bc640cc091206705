"""What smlocal adds to an invocation: the same container called directly and through smlocal, one run.

    python3 bench/invoke_overhead.py [--quick] [--json PATH]

smlocal runs as a subprocess; this process is the load generator (aiohttp, keep-alive). Both endpoints
use the echo test image: `bench-echo` (TCP_NODELAY, one send per response) and `bench-nagle`
(NAGLE=1: headers and body in two sends with Nagle on, like plain http.server). The direct figures
call the container's published 127.0.0.1 port; the "through" figures call
/endpoints/{name}/invocations on smlocal. Runs alternate direct/through in blocks so that drift in
the machine's load hits both sides alike.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench._harness import (  # noqa: E402
    Run,
    SmlocalProcess,
    boto_clients,
    container_pid,
    container_url,
    cpu_seconds,
    deploy,
    docker_proxy_pid,
    keepalive_session,
    merge,
    poster,
    run_load,
)

KB = b"x" * 1024
SIX_MB = b"y" * 6_000_000


def sizes(quick: bool) -> dict[str, Any]:
    if quick:
        return dict(
            warm=100,
            lat_n=400,
            lat_block=100,
            tput_rounds=2,
            tput_n=3000,
            tput_s=3.0,
            big_n=8,
            nagle_n=40,
            boto_n=50,
        )
    return dict(
        warm=300,
        lat_n=2000,
        lat_block=250,
        tput_rounds=2,
        tput_n=10_000,
        tput_s=5.0,
        big_n=30,
        nagle_n=150,
        boto_n=300,
    )


async def alternate(
    calls: dict[str, Any], concurrency: int, total: int, block: int, max_seconds: float
) -> dict[str, Run]:
    """Run each call `total` times in blocks, alternating between them; bounded by max_seconds each."""
    runs: dict[str, list[Run]] = {k: [] for k in calls}
    per_block_s = max_seconds / max(1, total // block)
    for _ in range(max(1, total // block)):
        for name, call in calls.items():
            runs[name].append(await run_load(call, concurrency, block, per_block_s))
    return {k: merge(v) for k, v in runs.items()}


def cpu_snapshot(pids: dict[str, int | None]) -> dict[str, float]:
    return {name: cpu_seconds(pid) if pid else float("nan") for name, pid in pids.items()}


async def measure(
    smlocal_url: str,
    direct: str,
    nagle_direct: str,
    s: dict[str, Any],
    console: Console,
    pids: dict[str, int | None],
    cpu: dict[str, dict[str, float]],
) -> dict[str, Run]:
    through = f"{smlocal_url}/endpoints/bench-echo/invocations"
    nagle_through = f"{smlocal_url}/endpoints/bench-nagle/invocations"
    out: dict[str, Run] = {}
    async with (
        keepalive_session() as d,
        keepalive_session() as t,
        keepalive_session(force_close=True) as fresh,
    ):
        calls = {"direct": poster(d, f"{direct}/invocations", KB), "through": poster(t, through, KB)}
        console.log("warm-up")
        for call in calls.values():
            await run_load(call, 32, s["warm"], 20)
            await run_load(call, 1, s["warm"], 20)

        console.log(f"concurrency 1, 1 KB body, {s['lat_n']} requests each")
        r = await alternate(calls, 1, s["lat_n"], s["lat_block"], 120)
        out["lat_direct"], out["lat_through"] = r["direct"], r["through"]

        console.log(
            f"concurrency 32, 1 KB body, {s['tput_rounds']} x ({s['tput_n']} requests or "
            f"{s['tput_s']} s) each"
        )
        tput: dict[str, list[Run]] = {"direct": [], "through": []}
        for name in calls:
            cpu[name] = {k: 0.0 for k in pids}
        for _ in range(s["tput_rounds"]):
            for name, call in calls.items():
                c0 = cpu_snapshot(pids)
                tput[name].append(await run_load(call, 32, s["tput_n"], s["tput_s"]))
                c1 = cpu_snapshot(pids)
                for k in pids:
                    cpu[name][k] += c1[k] - c0[k]
        out["tput_direct"], out["tput_through"] = merge(tput["direct"]), merge(tput["through"])

        console.log(f"6,000,000-byte round trips, {s['big_n']} each")
        big = {"direct": poster(d, f"{direct}/invocations", SIX_MB), "through": poster(t, through, SIX_MB)}
        for call in big.values():
            await run_load(call, 1, 2, 60)
        r = await alternate(big, 1, s["big_n"], 1, 300)
        out["big_direct"], out["big_through"] = r["direct"], r["through"]

        console.log(f"NAGLE=1 endpoint, concurrency 1, 1 KB body, {s['nagle_n']} requests each")
        nagle = {
            "direct": poster(d, f"{nagle_direct}/invocations", KB),
            "through": poster(t, nagle_through, KB),
            "direct_new_conn": poster(fresh, f"{nagle_direct}/invocations", KB),
        }
        for call in nagle.values():
            await run_load(call, 1, 5, 10)
        r = await alternate(nagle, 1, s["nagle_n"], max(1, s["nagle_n"] // 5), 60)
        out["nagle_direct"], out["nagle_through"] = r["direct"], r["through"]
        out["nagle_direct_new_conn"] = r["direct_new_conn"]
    return out


def boto_p50(rt: Any, n: int) -> float:
    for _ in range(10):
        rt.invoke_endpoint(EndpointName="bench-echo", Body=KB, ContentType="application/octet-stream")
    samples = []
    deadline = time.monotonic() + 60
    for _ in range(n):
        if time.monotonic() > deadline:
            break
        t0 = time.perf_counter_ns()
        resp = rt.invoke_endpoint(EndpointName="bench-echo", Body=KB, ContentType="application/octet-stream")
        resp["Body"].read()
        samples.append((time.perf_counter_ns() - t0) / 1e6)
    return statistics.median(samples)


def cpu_table(r: dict[str, Run], cpu: dict[str, dict[str, float]], console: Console) -> dict[str, Any]:
    """CPU time per request of each process on the path, during the concurrency-32 runs."""
    t = Table(title="CPU per request during the c=32 runs (us of CPU time; 2 cores = 2,000,000 us/s)")
    names = list(next(iter(cpu.values())))
    t.add_column("path")
    for n in names:
        t.add_column(n, justify="right")
    t.add_column("total", justify="right")
    t.add_column("wall s / CPU s", justify="right")
    out: dict[str, Any] = {}
    for path, key in (("direct", "tput_direct"), ("through", "tput_through")):
        run = r[key]
        per = {n: cpu[path][n] / max(1, run.ok) * 1e6 for n in names}
        total_cpu = sum(v for v in cpu[path].values() if v == v)
        t.add_row(
            path,
            *(f"{per[n]:.0f}" for n in names),
            f"{sum(v for v in per.values() if v == v):.0f}",
            f"{run.wall_s:.1f} / {total_cpu:.1f}",
        )
        out[path] = {**{n: round(per[n], 1) for n in names}, "wall_s": run.wall_s, "cpu_s": total_cpu}
    console.print(t)
    return out


def report(r: dict[str, Run], boto_ms: float, console: Console) -> dict[str, Any]:
    ld, lt = r["lat_direct"], r["lat_through"]
    td, tt = r["tput_direct"], r["tput_through"]
    bd, bt = r["big_direct"], r["big_through"]
    summary = {
        "c1_p50_direct_ms": ld.p50,
        "c1_p50_through_ms": lt.p50,
        "c1_p50_overhead_ms": lt.p50 - ld.p50,
        "c1_p99_direct_ms": ld.p99,
        "c1_p99_through_ms": lt.p99,
        "c1_p99_overhead_ms": lt.p99 - ld.p99,
        "c32_rps_direct": td.rps,
        "c32_rps_through": tt.rps,
        "c32_ratio": tt.rps / td.rps,
        "c32_p50_direct_ms": td.p50,
        "c32_p50_through_ms": tt.p50,
        "6mb_p50_direct_ms": bd.p50,
        "6mb_p50_through_ms": bt.p50,
        "6mb_overhead_ms": bt.p50 - bd.p50,
        "boto3_p50_through_ms": boto_ms,
        "nagle_p50_direct_ms": r["nagle_direct"].p50,
        "nagle_p50_through_ms": r["nagle_through"].p50,
        "nagle_p99_direct_ms": r["nagle_direct"].p99,
        "nagle_p99_through_ms": r["nagle_through"].p99,
        "nagle_p50_direct_new_conn_ms": r["nagle_direct_new_conn"].p50,
        "nagle_p99_direct_new_conn_ms": r["nagle_direct_new_conn"].p99,
        "failures": {k: v.failures for k, v in r.items()},
        "counts": {k: v.ok for k, v in r.items()},
    }
    s = summary

    def ok(flag: bool) -> str:
        return "[green]met[/]" if flag else "[red]missed[/]"

    t = Table(title="smlocal invoke overhead (echo container, aiohttp keep-alive load generator)")
    for col in ("measurement", "direct", "through smlocal", "overhead / ratio", "target"):
        t.add_column(col, justify="right" if col != "measurement" else "left")
    t.add_row(
        "c=1, 1 KB: p50",
        f"{ld.p50:.3f} ms",
        f"{lt.p50:.3f} ms",
        f"+{s['c1_p50_overhead_ms']:.3f} ms",
        f"< 0.5 ms {ok(s['c1_p50_overhead_ms'] < 0.5)}",
    )
    t.add_row(
        "c=1, 1 KB: p99", f"{ld.p99:.3f} ms", f"{lt.p99:.3f} ms", f"+{s['c1_p99_overhead_ms']:.3f} ms", ""
    )
    t.add_row(
        "c=32, 1 KB: throughput",
        f"{td.rps:,.0f} req/s",
        f"{tt.rps:,.0f} req/s",
        f"{s['c32_ratio']:.2f}x",
        f">= 0.9x {ok(s['c32_ratio'] >= 0.9)}",
    )
    t.add_row("c=32, 1 KB: p50", f"{td.p50:.2f} ms", f"{tt.p50:.2f} ms", f"+{tt.p50 - td.p50:.2f} ms", "")
    t.add_row(
        "6,000,000 B round trip: p50",
        f"{bd.p50:.1f} ms",
        f"{bt.p50:.1f} ms",
        f"+{s['6mb_overhead_ms']:.1f} ms",
        "",
    )
    t.add_row(
        "boto3 invoke_endpoint, 1 KB: p50",
        "",
        f"{boto_ms:.2f} ms",
        f"+{boto_ms - ld.p50:.2f} ms vs direct aiohttp",
        "",
    )
    console.print(t)

    n = Table(title="Keep-alive trap: NAGLE=1 container (headers and body in two sends, Nagle on), c=1, 1 KB")
    for col in ("client", "p50", "p99", "requests"):
        n.add_column(col, justify="right" if col != "client" else "left")
    for label, key in (
        ("direct, keep-alive", "nagle_direct"),
        ("direct, new connection per request", "nagle_direct_new_conn"),
        ("through smlocal (its invoker's connections)", "nagle_through"),
    ):
        run = r[key]
        n.add_row(label, f"{run.p50:.2f} ms", f"{run.p99:.2f} ms", str(run.ok))
    console.print(n)
    fails = {k: dict(v.statuses) for k, v in r.items() if v.failures}
    console.print(f"failures: {fails or 'none'}")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests (about 1 minute in all)")
    parser.add_argument("--json", type=Path, help="write the figures to this file as JSON")
    parser.add_argument(
        "--event-loop",
        default="auto",
        choices=("auto", "asyncio", "uvloop"),
        help="smlocal serve --event-loop (auto: uvloop when installed)",
    )
    args = parser.parse_args(argv)
    console = Console(width=max(110, Console().width))
    s = sizes(args.quick)
    console.log("starting smlocal (subprocess) and deploying bench-echo, bench-nagle")
    with SmlocalProcess(event_loop=args.event_loop) as server:
        sm, rt = boto_clients(server.url)
        deploy(sm, "bench-echo")
        deploy(sm, "bench-nagle", {"NAGLE": "1"})
        direct, nagle_direct = container_url("bench-echo"), container_url("bench-nagle")
        pids = {
            "load generator": os.getpid(),
            "smlocal": server.pid,
            "docker-proxy": docker_proxy_pid(int(direct.rsplit(":", 1)[1])),
            "container": container_pid("bench-echo"),
        }
        console.log(f"pids: {pids}; load average {os.getloadavg()}")
        cpu: dict[str, dict[str, float]] = {}
        runs = asyncio.run(measure(server.url, direct, nagle_direct, s, console, pids, cpu))
        console.log(f"boto3: {s['boto_n']} invocations through smlocal")
        boto_ms = boto_p50(rt, s["boto_n"])
        summary = report(runs, boto_ms, console)
        summary["cpu_us_per_request_c32"] = cpu_table(runs, cpu, console)
        summary["load_average_after"] = os.getloadavg()
        console.log("stopping smlocal (SIGTERM)")
    left = server.leftovers
    console.print(f"bench containers left after SIGTERM: {left or 'none'}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2, default=str))
    console.print("[dim]caveat: 2 cores shared by the load generator, smlocal and the container[/]")
    return 0 if not left else 1


if __name__ == "__main__":
    sys.exit(main())
