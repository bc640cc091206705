"""Irregular requests through smlocal to model servers that close idle keep-alive connections.

    python3 bench/keepalive_soak.py [--requests N] [--streams S] [--case NAME ...] [--json PATH]

Builds the keep-alive test image (tests/fixtures/images/keepalive), starts `smlocal serve` as a
subprocess, and for each case deploys S endpoints of one instance each and sends N invocations in
all, one sequential stream per endpoint (so the idle time of the pooled connection is the stream's
gap: streams sharing one endpoint would share its pool and blur the pattern), each sleeping an
irregular gap before its next request: 70 % just around the server's keep-alive timeout (where a
request crosses the server's close), 15 % short (reuse), 15 % well past it. Figures: failed
requests (goal 0), requests the models received (GET /count on each container: must equal those
sent, i.e. none sent twice), whether an instance was replaced. Exit status 0 only when no request
failed, none was lost or doubled, and no instance was replaced.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench._harness import (  # noqa: E402
    SmlocalProcess,
    boto_clients,
    create_endpoint,
    docker_client,
    wait_in_service,
)
from emulator.runtime.images import ensure_base_image  # noqa: E402
from emulator.runtime.labels import owner_id  # noqa: E402
from tests.fixtures.keepalive import build_keepalive_image  # noqa: E402

#: name -> (SERVER, KEEPALIVE_S)
CASES = {
    "gunicorn-2s": ("gunicorn", 2.0),
    "aiohttp-2s": ("aiohttp", 2.0),
    "aiohttp-0.5s": ("aiohttp", 0.5),
}


def gap(timeout_s: float, rng: random.Random) -> float:
    roll = rng.random()
    if roll < 0.7:
        return rng.uniform(timeout_s - 0.01, timeout_s + 0.005)
    if roll < 0.85:
        return rng.uniform(0.0, 0.05)
    return rng.uniform(timeout_s, timeout_s * 1.5 + 1.0)


async def irregular(urls: list[str], timeout_s: float, requests: int) -> Counter[int | str]:
    outcomes: Counter[int | str] = Counter()
    left = requests

    async def stream(seed: int, url: str, session: aiohttp.ClientSession) -> None:
        nonlocal left
        rng = random.Random(seed)
        while left > 0:
            left -= 1
            await asyncio.sleep(gap(timeout_s, rng))
            try:
                async with session.post(url, data=b"ka", headers={"Content-Type": "text/plain"}) as resp:
                    body = await resp.read()
                    outcomes[resp.status if resp.status != 200 or body == b"ka" else "short body"] += 1
            except Exception as exc:  # noqa: BLE001 - every outcome is counted
                outcomes[type(exc).__name__] += 1

    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(stream(seed, url, session) for seed, url in enumerate(urls)))
    return outcomes


def deploy_all(sm: Any, names: list[str], image: str, env: dict[str, str]) -> None:
    for name in names:  # all created first, so that their containers start together
        create_endpoint(sm, name, env, image)
    for name in names:
        wait_in_service(sm, name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--streams", type=int, default=10, help="endpoints, one stream each")
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="default: all")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    console = Console(width=max(100, Console().width))
    client = docker_client()
    image = build_keepalive_image(ensure_base_image(client), client)
    results: dict[str, dict[str, Any]] = {}
    with SmlocalProcess() as server:
        sm, _ = boto_clients(server.url)
        owner = owner_id(server.state_dir / "state")
        for case in args.case or list(CASES):
            kind, timeout_s = CASES[case]
            names = [f"bench-ka-{case.replace('.', '-')}-{i}" for i in range(args.streams)]
            deploy_all(sm, names, image, {"SERVER": kind, "KEEPALIVE_S": f"{timeout_s:g}"})
            before = containers_of(client, owner, names)
            started = time.monotonic()
            urls = [f"{server.url}/endpoints/{name}/invocations" for name in names]
            outcomes = asyncio.run(irregular(urls, timeout_s, args.requests))
            wall = time.monotonic() - started
            after = containers_of(client, owner, names)
            received = sum(int(aiohttp_get(count_url(client, owner, name))) for name in names)
            results[case] = {
                "requests": args.requests,
                "failed": sum(n for k, n in outcomes.items() if k != 200),
                "outcomes": {str(k): v for k, v in outcomes.items()},
                "received_by_model": received,
                "replaced": before != after,
                "wall_s": round(wall, 1),
            }
            for name in names:
                sm.delete_endpoint(EndpointName=name)
        server.stop()
    t = Table(
        title=f"{args.requests:,} irregular requests per case, {args.streams} endpoints x 1 stream, "
        "through smlocal"
    )
    for col in ("case", "failed", "received by the model", "instance replaced", "outcomes", "wall"):
        t.add_column(col)
    for case, r in results.items():
        t.add_row(
            case,
            str(r["failed"]),
            f"{r['received_by_model']:,}",
            str(r["replaced"]),
            str(r["outcomes"]),
            f"{r['wall_s']} s",
        )
    console.print(t)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    ok = all(
        not r["failed"] and r["received_by_model"] == r["requests"] and not r["replaced"]
        for r in results.values()
    )
    console.print("[green]PASS[/]" if ok else "[red]FAIL[/]")
    return 0 if ok else 1


def containers(client: Any, owner: str, name: str) -> list[Any]:
    """This server's running containers of one endpoint (other servers on the engine may use the name)."""
    wanted = [f"smlocal.endpoint={name}", f"smlocal.owner={owner}"]
    return list(client.containers.list(filters={"label": wanted}))


def containers_of(client: Any, owner: str, names: list[str]) -> set[str]:
    return {c.id for name in names for c in containers(client, owner, name)}


def count_url(client: Any, owner: str, name: str) -> str:
    """GET /count on the endpoint's container, through its port published on 127.0.0.1."""
    (container,) = containers(client, owner, name)
    for bindings in (container.attrs["NetworkSettings"]["Ports"] or {}).values():
        for b in bindings or []:
            if b.get("HostIp") in ("127.0.0.1", "") and b.get("HostPort"):
                return f"http://127.0.0.1:{b['HostPort']}/count"
    raise RuntimeError(f"no published port on {container.name}")


def aiohttp_get(url: str) -> str:
    async def get() -> str:
        async with aiohttp.ClientSession() as session, session.get(url) as resp:
            return await resp.text()

    return asyncio.run(get())


if __name__ == "__main__":
    raise SystemExit(main())
