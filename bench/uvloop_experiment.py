"""Would uvloop make smlocal cheaper per request? The same server on asyncio's loop and on uvloop.

    pip install --target /tmp/uvl uvloop   # not a dependency of smlocal; kept out of site-packages
    python3 bench/uvloop_experiment.py [--uvloop-path /tmp/uvl] [--rounds 2]

smlocal runs as a subprocess, unchanged: for the uvloop runs it is started through a `-c` stub that
calls uvloop.install() before running emulator.cli, so web.run_app gets a uvloop loop. Rounds
alternate asyncio/uvloop (a fresh server and endpoint each) so that drift hits both alike.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._harness import (  # noqa: E402
    SmlocalProcess,
    boto_clients,
    cpu_seconds,
    deploy,
    keepalive_session,
    poster,
    run_load,
)


def uvloop_stub(path: str) -> tuple[str, ...]:
    code = (
        f"import sys, runpy; sys.path.insert(0, {path!r}); import uvloop; uvloop.install(); "
        "sys.argv = ['smlocal'] + sys.argv[3:]; runpy.run_module('emulator.cli', run_name='__main__')"
    )
    return ("-c", code)


async def measure(server: SmlocalProcess) -> tuple[float, float, float, float]:
    async with keepalive_session() as s:
        call = poster(s, f"{server.url}/endpoints/bench-uv/invocations", b"x" * 1024)
        await run_load(call, 32, 1000, 10)
        lat = await run_load(call, 1, 1000, 20)
        c0 = cpu_seconds(server.pid)
        tput = await run_load(call, 32, 20_000, 5)
        cpu_us = (cpu_seconds(server.pid) - c0) / max(1, tput.ok) * 1e6
        return lat.p50, lat.p99, tput.rps, cpu_us


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uvloop-path", default="/tmp/uvl")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    for rnd in range(args.rounds):
        for label, python_args in (("asyncio", ()), ("uvloop", uvloop_stub(args.uvloop_path))):
            with SmlocalProcess(python_args=python_args) as server:
                sm, _ = boto_clients(server.url)
                deploy(sm, "bench-uv")
                p50, p99, rps, cpu = asyncio.run(measure(server))
            print(
                f"round {rnd + 1} {label:8} c=1 p50 {p50:.3f} ms  p99 {p99:.3f} ms  "
                f"c=32 {rps:,.0f} req/s  smlocal CPU {cpu:.0f} us/request"
                f"  leftovers {server.leftovers or 0}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
