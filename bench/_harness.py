"""Shared pieces of the benchmarks: smlocal in its own process, endpoints, an aiohttp load generator.

smlocal runs as a subprocess (`python -m emulator.cli serve`), never in the load generator's
process: the two must not share one GIL and one event loop, or the figure measures the generator.
Every loop here is bounded in count and in time; every socket goes to 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parent.parent
IMAGE = "smlocal-test/echo:latest"
HOST = "127.0.0.1"
MANAGED_FILTER = {"label": "smlocal.managed=true"}


def docker_client() -> Any:
    import docker  # noqa: TID251 - the bench reads container ports and counts containers itself

    return docker.from_env()


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def managed_containers() -> list[Any]:
    return list(docker_client().containers.list(all=True, filters=MANAGED_FILTER))


class SmlocalProcess:
    """`smlocal serve` as a child process on a free port, with a temporary state dir."""

    def __init__(
        self,
        ready_timeout_s: float = 30.0,
        python_args: tuple[str, ...] = (),
        event_loop: str = "auto",
        serve_args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self._serve_args = serve_args  # more `smlocal serve` options (e.g. "--time-scale", "60")
        self._env = env  # the environment of the server (None: this process's)
        self._python_args = python_args  # e.g. ("-m", "cProfile", "-o", PATH) to profile the server
        self._event_loop = event_loop
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self._tmp = tempfile.TemporaryDirectory(prefix="smlocal-bench-")
        self.state_dir = Path(self._tmp.name)
        self._ready_timeout_s = ready_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.state_dir / "server.log"
        #: containers of this server still present after it exited (force-removed by __exit__)
        self.leftovers: list[str] = []

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def __enter__(self) -> SmlocalProcess:
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in __exit__
        self.proc = subprocess.Popen(
            [
                sys.executable,
                *self._python_args,
                "-m",
                "emulator.cli",
                "--log-level",
                "WARNING",
                "serve",
                "--host",
                HOST,
                "--port",
                str(self.port),
                "--state-dir",
                str(self.state_dir / "state"),
                "--stop-grace",
                "5",
                "--event-loop",
                self._event_loop,
                *self._serve_args,
            ],
            cwd=REPO,
            env=self._env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + self._ready_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"smlocal exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                with socket.create_connection((HOST, self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"smlocal did not listen within {self._ready_timeout_s} s: {self.log_tail()}")

    def log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self, timeout_s: float = 60.0) -> int | None:
        """SIGTERM, wait (smlocal stops its containers first), then SIGKILL. Returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout=10)

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            self._log.close()
            self.leftovers = remove_leftovers(self.state_dir)
            self._tmp.cleanup()

    # --------------------------------------------------------------- /proc readings

    def fd_count(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")


def remove_leftovers(state_dir: Path) -> list[str]:
    """Double-check: force-remove any managed container this bench's server left behind."""
    from emulator.runtime.labels import owner_id

    owner = owner_id(state_dir / "state")
    removed = []
    for c in docker_client().containers.list(all=True, filters={"label": f"smlocal.owner={owner}"}):
        c.remove(force=True)
        removed.append(c.name)
    return removed


def boto_clients(url: str) -> tuple[Any, Any]:
    import boto3
    from botocore.config import Config

    session = boto3.session.Session(
        aws_access_key_id="bench", aws_secret_access_key="bench", region_name="us-east-1"
    )
    config = Config(retries={"max_attempts": 1, "mode": "standard"}, read_timeout=60)
    return (
        session.client("sagemaker", endpoint_url=url, config=config),
        session.client("sagemaker-runtime", endpoint_url=url, config=config),
    )


def deploy(
    sm: Any, name: str, env: dict[str, str] | None = None, timeout_s: float = 120, image: str = IMAGE
) -> None:
    create_endpoint(sm, name, env, image)
    wait_in_service(sm, name, timeout_s)


def create_endpoint(sm: Any, name: str, env: dict[str, str] | None = None, image: str = IMAGE) -> None:
    """Model, endpoint config (one ml.m5.large instance) and endpoint of the same name; no wait."""
    sm.create_model(ModelName=name, PrimaryContainer={"Image": image, "Environment": env or {}})
    sm.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": name,
                "InitialInstanceCount": 1,
                "InstanceType": "ml.m5.large",
            }
        ],
    )
    sm.create_endpoint(EndpointName=name, EndpointConfigName=name)


def wait_in_service(sm: Any, name: str, timeout_s: float = 120) -> None:
    try:
        sm.get_waiter("endpoint_in_service").wait(
            EndpointName=name, WaiterConfig={"Delay": 1, "MaxAttempts": int(timeout_s)}
        )
    except Exception as exc:
        reason = sm.describe_endpoint(EndpointName=name).get("FailureReason")
        raise RuntimeError(f"endpoint {name} did not come up: {reason}") from exc


def container_url(endpoint_name: str) -> str:
    """The container's published 127.0.0.1 port, read from the engine (DescribeEndpoint hides it)."""
    found = docker_client().containers.list(filters={"label": f"smlocal.endpoint={endpoint_name}"})
    if len(found) != 1:
        raise RuntimeError(f"expected one container for {endpoint_name}, found {len(found)}")
    for bindings in (found[0].attrs["NetworkSettings"]["Ports"] or {}).values():
        for b in bindings or []:
            if b.get("HostIp") in (HOST, "") and b.get("HostPort"):
                return f"http://{HOST}:{b['HostPort']}"
    raise RuntimeError(f"no published port on {found[0].name}")


# ------------------------------------------------------------------- load generation


def keepalive_session(**connector_kwargs: Any) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=0, **connector_kwargs)
    return aiohttp.ClientSession(
        connector=connector, auto_decompress=False, skip_auto_headers=("User-Agent", "Accept-Encoding")
    )


@dataclass
class Run:
    """Latencies (ms) of successful requests, statuses, errors, wall time."""

    latencies_ms: list[float] = field(default_factory=list)
    statuses: Counter[int | str] = field(default_factory=Counter)
    wall_s: float = 0.0

    @property
    def ok(self) -> int:
        return self.statuses.get(200, 0)

    @property
    def failures(self) -> int:
        return sum(n for k, n in self.statuses.items() if k != 200)

    def pct(self, p: float) -> float:
        if not self.latencies_ms:
            return float("nan")
        data = sorted(self.latencies_ms)
        return data[min(len(data) - 1, int(round(p / 100 * (len(data) - 1))))]

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies_ms) if self.latencies_ms else float("nan")

    @property
    def p99(self) -> float:
        return self.pct(99)

    @property
    def rps(self) -> float:
        return self.ok / self.wall_s if self.wall_s else float("nan")


def poster(
    session: aiohttp.ClientSession,
    url: str,
    body: bytes,
    expect_len: int | None = None,
    headers: dict[str, str] | None = None,
    timeout_s: float = 60,
) -> Callable[[], Awaitable[int]]:
    """One POST, body read in full; returns the status (a short body on 200 counts as a failure)."""
    hdrs = {"Content-Type": "application/octet-stream", **(headers or {})}
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    expected = len(body) if expect_len is None else expect_len

    async def call() -> int:
        async with session.post(url, data=body, headers=hdrs, timeout=timeout) as resp:
            data = await resp.read()
            if resp.status == 200 and len(data) != expected:
                return -1
            return resp.status

    return call


async def run_load(
    call: Callable[[], Awaitable[int]], concurrency: int, max_requests: int, max_seconds: float
) -> Run:
    """`concurrency` workers issue requests until max_requests were started or max_seconds passed."""
    run = Run()
    started = 0
    deadline = time.perf_counter() + max_seconds

    async def worker() -> None:
        nonlocal started
        while started < max_requests and time.perf_counter() < deadline:
            started += 1
            t0 = time.perf_counter_ns()
            try:
                status = await call()
            except Exception as exc:  # counted, never raised: a soak must see every outcome
                run.statuses[type(exc).__name__] += 1
                continue
            elapsed = (time.perf_counter_ns() - t0) / 1e6
            run.statuses[status] += 1
            if status == 200:
                run.latencies_ms.append(elapsed)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    run.wall_s = time.perf_counter() - t0
    return run


def merge(runs: list[Run]) -> Run:
    out = Run()
    for r in runs:
        out.latencies_ms.extend(r.latencies_ms)
        out.statuses.update(r.statuses)
        out.wall_s += r.wall_s
    return out


# ------------------------------------------------------------------- CPU accounting

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads), from /proc/PID/stat."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return float("nan")
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def container_pid(endpoint_name: str) -> int:
    found = docker_client().containers.list(filters={"label": f"smlocal.endpoint={endpoint_name}"})
    return int(found[0].attrs["State"]["Pid"])


def docker_proxy_pid(host_port: int) -> int | None:
    """dockerd's userland proxy serving a published port, if any (it is the default on Linux)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            args = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if args and args[0].endswith(b"docker-proxy") and str(host_port).encode() in args:
            return int(entry)
    return None
