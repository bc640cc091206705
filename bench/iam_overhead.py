"""What `--iam-policies` costs an invocation, and that without it the invoke path is unchanged; one run.

    python3 bench/iam_overhead.py [--quick] [--before REV] [--image IMAGE]

Three smlocal processes, each with one echo endpoint: `before` (the tree at REV, default the commit
before the authorization step, exported with `git archive`), `after` (this tree, no option) and
`after+iam` (this tree with a policies file of three statements, one with a TargetContainerHostname-
style condition and one Deny). The load generator (this process, aiohttp keep-alive, one request at
a time) sends the same signed-looking Authorization header to all three and alternates between them
in blocks, so that drift in the machine's load hits all alike. Also the in-process cost of one
AccessCheck call (timeit).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._harness import (  # noqa: E402
    HOST,
    IMAGE,
    REPO,
    Run,
    boto_clients,
    deploy,
    free_port,
    keepalive_session,
    merge,
    poster,
    remove_leftovers,
    run_load,
)

AUTH = {
    "Authorization": "AWS4-HMAC-SHA256 Credential=AKIABENCH/20261201/us-east-1/sagemaker/aws4_request, "
    "SignedHeaders=content-type;host;x-amz-date, Signature=" + "0" * 64,
    "X-Amz-Date": "20261201T000000Z",
}
POLICIES = {
    "identities": {
        "AKIABENCH": {
            "arn": "arn:aws:iam::123456789012:user/bench",
            "policies": [
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {"Effect": "Allow", "Action": "sagemaker:Describe*", "Resource": "*"},
                        {
                            "Effect": "Allow",
                            "Action": "sagemaker:Invoke*",
                            "Resource": "arn:aws:sagemaker:*:123456789012:endpoint/*",
                            "Condition": {
                                "StringNotLikeIfExists": {"sagemaker:TargetContainerHostname": "x*"}
                            },
                        },
                        {
                            "Effect": "Deny",
                            "Action": "sagemaker:InvokeEndpoint",
                            "Resource": "*",
                            "Condition": {"StringLike": {"sagemaker:TargetContainerHostname": "secret*"}},
                        },
                    ],
                }
            ],
        }
    }
}


class Server:
    """`smlocal serve` from a given tree, on a free port, with a temporary state dir."""

    def __init__(self, tree: Path, extra: tuple[str, ...] = ()) -> None:
        self.tree, self.extra = tree, extra
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self._tmp = tempfile.TemporaryDirectory(prefix="smlocal-bench-iam-")
        self.state_dir = Path(self._tmp.name)

    def __enter__(self) -> Server:
        self.log = open(self.state_dir / "server.log", "wb")  # noqa: SIM115 - closed in __exit__
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "emulator.cli",
                "--log-level",
                "WARNING",
                "serve",
                "--port",
                str(self.port),
            ]
            + ["--state-dir", str(self.state_dir / "state"), "--stop-grace", "5", *self.extra],
            cwd=self.tree,
            env={**os.environ, "PYTHONPATH": str(self.tree)},
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        import httpx

        while True:
            try:
                if httpx.get(f"{self.url}/_smlocal/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((self.state_dir / "server.log").read_text(errors="replace")[-2000:])
            time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        finally:
            self.log.close()
            remove_leftovers(self.state_dir)
            self._tmp.cleanup()


def export_tree(rev: str, into: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], capture_output=True, check=True).stdout
    tree = into / "before"
    tree.mkdir()
    import io

    with tarfile.open(fileobj=io.BytesIO(archive)) as tf:
        tf.extractall(tree, filter="data")
    return tree


async def measure(urls: dict[str, str], n: int, block: int) -> dict[str, Run]:
    runs: dict[str, list[Run]] = {k: [] for k in urls}
    async with keepalive_session() as session:
        calls = {
            k: poster(session, f"{u}/endpoints/bench/invocations", b"x" * 64, headers=AUTH)
            for k, u in urls.items()
        }
        for call in calls.values():  # warm every connection and path
            await run_load(call, 1, 100, 30)
        for _ in range(n // block):
            for name, call in calls.items():
                runs[name].append(await run_load(call, 1, block, 60))
    return {k: merge(v) for k, v in runs.items()}


def check_cost() -> tuple[float, float]:
    """µs per AccessCheck.invoke_endpoint (allowed), and per `if access is not None` when None."""
    from emulator.model.arns import Account
    from emulator.model.iam_access import AccessPolicies
    from emulator.wire.access import AccessCheck

    check = AccessCheck(
        AccessPolicies.parse(json.dumps(POLICIES), "us-east-1"), Account("us-east-1", "123456789012")
    )
    members = {"EndpointName": "bench", "Body": b"x"}
    n = 20_000
    with_check = timeit.timeit(lambda: check.invoke_endpoint(AUTH, {}, members), number=n) / n * 1e6
    access = None
    none_branch = timeit.timeit(lambda: access is not None, number=n * 10) / (n * 10) * 1e6
    return with_check, none_branch


def _before_the_check() -> str:
    added = subprocess.run(
        ["git", "-C", str(REPO), "log", "--diff-filter=A", "--format=%H", "--", "emulator/wire/access.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return f"{added[-1]}^"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--before", help="the tree to compare with (default: before wire/access.py was added)"
    )
    parser.add_argument("--image", default=os.environ.get("SMLOCAL_ECHO_TAG", IMAGE))
    args = parser.parse_args()
    n, block = (2000, 250) if args.quick else (6000, 500)
    with tempfile.TemporaryDirectory(prefix="smlocal-bench-iam-") as tmp:
        policies = Path(tmp) / "policies.json"
        policies.write_text(json.dumps(POLICIES))
        before_tree = export_tree(args.before or _before_the_check(), Path(tmp))
        with (
            Server(before_tree) as before,
            Server(REPO) as after,
            Server(REPO, ("--iam-policies", str(policies))) as guarded,
        ):
            for server in (before, after, guarded):
                deploy(boto_clients(server.url)[0], "bench", image=args.image)
            runs = asyncio.run(
                measure({"before": before.url, "after": after.url, "after+iam": guarded.url}, n, block)
            )
    with_check, none_branch = check_cost()
    base = runs["before"].p50
    print(f"{'server':<10} {'ok':>6} {'fail':>5} {'p50 ms':>8} {'p99 ms':>8} {'p50/before':>10}")
    for name, run in runs.items():
        ratio = run.p50 / base
        print(f"{name:<10} {run.ok:>6} {run.failures:>5} {run.p50:>8.3f} {run.p99:>8.3f} {ratio:>10.3f}")
    print(
        f"AccessCheck.invoke_endpoint in-process: {with_check:.2f} us/call; "
        f"the None branch: {none_branch:.3f} us"
    )
    print("mean: " + ", ".join(f"{k} {statistics.mean(r.latencies_ms):.3f} ms" for k, r in runs.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
