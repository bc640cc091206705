"""Multi-model endpoints under concurrency: the share of calls that fail when CALLS concurrent calls
over MODELS models reach a container that holds ROOM of them (it answers 507 beyond), in one run.

    python3 bench/multi_model_crowd.py [--calls 60] [--models 6] [--room 2] [--rounds 3] [--json PATH]

The prefix is an S3 bucket on moto's server (127.0.0.1, in this process); smlocal runs as a subprocess
with AWS_ENDPOINT_URL_S3 pointing at it; the container is the MME test image (tests/fixtures/images/mme)
with MAX_LOADED=ROOM and LOAD_SLEEP_S (a load that takes a while, so loads overlap). Each round sends
CALLS calls at once (one thread each, boto3 with retries off: a failure is counted, not hidden), model
`i % MODELS` for call i, on an endpoint deployed for the round (nothing loaded at its start). Printed:
calls, ok, failed (by error code and status), the failure rate, and the slowest call.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import logging
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import boto3  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402

from bench._harness import HOST, SmlocalProcess, boto_clients  # noqa: E402
from bench.multi_model import BUCKET, MME_DIR, MME_IMAGE, artifact, deploy  # noqa: E402
from emulator.runtime.images import LOCAL_BASE_IMAGE, build_image  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--models", type=int, default=6)
    parser.add_argument("--room", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--load-sleep-s", type=float, default=0.1)
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    build_image(MME_DIR, MME_IMAGE, buildargs={"BASE_IMAGE": LOCAL_BASE_IMAGE})
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's request log
    moto = ThreadedMotoServer(ip_address=HOST, port=0, verbose=False)
    moto.start()
    s3_url = "http://{}:{}".format(*moto.get_host_and_port())
    os.environ.update(
        AWS_ENDPOINT_URL_S3=s3_url,
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1",
    )
    s3 = boto3.client("s3", endpoint_url=s3_url, region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    failures: collections.Counter[str] = collections.Counter()
    sent = ok = 0
    slowest = 0.0
    env = {"MAX_LOADED": str(args.room), "LOAD_SLEEP_S": str(args.load_sleep_s)}
    try:
        with SmlocalProcess() as server:
            sm, rt = boto_clients(server.url)
            for r in range(args.rounds):
                name = f"crowd{r}"
                for i in range(args.models):
                    s3.put_object(Bucket=BUCKET, Key=f"{name}/m{i}.tar.gz", Body=artifact(f"m{i}", 1024))
                deploy(sm, name, env)

                def one(i: int, endpoint: str = name) -> tuple[str | None, float]:
                    began = time.perf_counter()
                    try:
                        got = rt.invoke_endpoint(
                            EndpointName=endpoint, Body=b"q", TargetModel=f"m{i % args.models}.tar.gz"
                        )
                        got["Body"].read()
                        return None, time.perf_counter() - began
                    except ClientError as exc:
                        status = exc.response["ResponseMetadata"]["HTTPStatusCode"]
                        return f"{exc.response['Error']['Code']} {status}", time.perf_counter() - began

                with concurrent.futures.ThreadPoolExecutor(args.calls) as pool:
                    results = list(pool.map(one, range(args.calls)))
                for error, took in results:
                    sent += 1
                    slowest = max(slowest, took)
                    if error is None:
                        ok += 1
                    else:
                        failures[error] += 1
                sm.delete_endpoint(EndpointName=name)
    finally:
        moto.stop()
    rate = (sent - ok) / sent if sent else 0.0
    print(
        f"multi-model crowd: {args.rounds} rounds of {args.calls} concurrent calls over {args.models} "
        f"models, room for {args.room}: sent {sent}, ok {ok}, failed {sent - ok} "
        f"({rate:.1%}) {dict(failures)}; slowest call {slowest:.2f} s"
    )
    if args.json:
        figures = {"sent": sent, "ok": ok, "failed": dict(failures), "failure_rate": rate}
        figures["slowest_s"] = slowest
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
