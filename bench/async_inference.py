"""Asynchronous inference: queue throughput, the latency a request adds against a direct call, and
the time from a request queued at zero instances to its output under AWS's scale-from-zero recipe,
in one run.

    python3 bench/async_inference.py [--quick] [--json PATH]

smlocal runs as a subprocess (`smlocal serve`, S3 and SNS pointed at moto's server in this process);
the model is the echo test image (a trivial model). Throughput: N inputs uploaded first, then N
InvokeEndpointAsync calls as fast as one client sends them, on one instance with
MaxConcurrentInvocationsPerInstance 8; the figure is N over the time from the first call to the
last output listed in S3. Added latency: one request at a time, the time from InvokeEndpointAsync to
its output object existing (HEAD polled every 2 ms), against POST /invocations on the same container
directly (its published 127.0.0.1 port). Scale from zero: a second server with `--time-scale 60`,
the endpoint at 0 instances, a step-scaling policy on a HasBacklogWithoutCapacity alarm (Average,
Period 60, 2 of 2 datapoints, >= 1, +1 instance), then one request: the time to its output.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import boto3  # noqa: E402
import httpx  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench._harness import HOST, IMAGE, SmlocalProcess, boto_clients, container_url  # noqa: E402
from tests.fixtures.scaling import scale_from_zero_recipe  # noqa: E402

KEYS = {"aws_access_key_id": "bench", "aws_secret_access_key": "bench", "region_name": "us-east-1"}


def _deploy(sm: Any, name: str, bucket: str, concurrency: int) -> None:
    sm.create_model(ModelName=name, PrimaryContainer={"Image": IMAGE})
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
        AsyncInferenceConfig={
            "OutputConfig": {"S3OutputPath": f"s3://{bucket}/{name}/out"},
            "ClientConfig": {"MaxConcurrentInvocationsPerInstance": concurrency},
        },
    )
    sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    sm.get_waiter("endpoint_in_service").wait(
        EndpointName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 120}
    )


def _exists(s3: Any, url: str) -> bool:
    bucket, key = url.removeprefix("s3://").split("/", 1)
    try:
        s3.head_object(Bucket=bucket, Key=key)
        return True
    except s3.exceptions.ClientError:
        return False


def _wait(s3: Any, url: str, timeout_s: float = 120.0, poll_s: float = 0.002) -> float:
    started = time.perf_counter()
    while not _exists(s3, url):
        if time.perf_counter() - started > timeout_s:
            raise RuntimeError(f"no output at {url}")
        time.sleep(poll_s)
    return time.perf_counter() - started


def throughput(rt: Any, s3: Any, bucket: str, name: str, n: int) -> float:
    for i in range(n):
        s3.put_object(Bucket=bucket, Key=f"in/{i}.json", Body=json.dumps({"i": i}).encode())
    started = time.perf_counter()
    for i in range(n):
        rt.invoke_endpoint_async(EndpointName=name, InputLocation=f"s3://{bucket}/in/{i}.json")
    prefix = f"{name}/out/"
    while True:
        listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("KeyCount", 0)
        if listed >= n:
            return n / (time.perf_counter() - started)
        if time.perf_counter() - started > 300:
            raise RuntimeError(f"only {listed} of {n} outputs")
        time.sleep(0.01)


def added_latency(rt: Any, s3: Any, bucket: str, name: str, rounds: int) -> tuple[float, float]:
    s3.put_object(Bucket=bucket, Key="in/one.json", Body=b'{"x": 1}')
    direct_url = f"{container_url(name)}/invocations"
    through: list[float] = []
    direct: list[float] = []
    with httpx.Client() as client:
        for _ in range(rounds):
            started = time.perf_counter()
            answer = rt.invoke_endpoint_async(EndpointName=name, InputLocation=f"s3://{bucket}/in/one.json")
            _wait(s3, answer["OutputLocation"])
            through.append(time.perf_counter() - started)
            started = time.perf_counter()
            client.post(direct_url, content=b'{"x": 1}', headers={"Content-Type": "application/json"})
            direct.append(time.perf_counter() - started)
    return statistics.median(through), statistics.median(direct)


def scale_from_zero(s3_url: str, bucket: str) -> float:
    env = {"AWS_ENDPOINT_URL_S3": s3_url, "AWS_ENDPOINT_URL_SNS": s3_url, **_credentials_env()}
    with SmlocalProcess(serve_args=("--time-scale", "60"), env=env) as server:
        sm, rt = boto_clients(server.url)
        aas = boto3.client("application-autoscaling", endpoint_url=server.url, **KEYS)
        cw = boto3.client("cloudwatch", endpoint_url=server.url, **KEYS)
        s3 = boto3.client("s3", endpoint_url=s3_url, **KEYS)
        name = "bench-zero"
        _deploy(sm, name, bucket, 4)
        scale_from_zero_recipe(aas, cw, name, max_capacity=1)
        sm.update_endpoint_weights_and_capacities(
            EndpointName=name,
            DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": 0}],
        )
        deadline = time.monotonic() + 60
        while True:
            described = sm.describe_endpoint(EndpointName=name)
            if (
                described["EndpointStatus"] == "InService"
                and described["ProductionVariants"][0]["CurrentInstanceCount"] == 0
            ):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("never reached zero instances")
            time.sleep(0.05)
        s3.put_object(Bucket=bucket, Key="in/zero.json", Body=b"zero")
        started = time.perf_counter()
        answer = rt.invoke_endpoint_async(EndpointName=name, InputLocation=f"s3://{bucket}/in/zero.json")
        _wait(s3, answer["OutputLocation"], poll_s=0.02)
        took = time.perf_counter() - started
        sm.delete_endpoint(EndpointName=name)
        return took


def _credentials_env() -> dict[str, str]:
    import os

    return {**os.environ, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests (a smoke run)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    n, rounds = (50, 5) if args.quick else (300, 30)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request
    moto = ThreadedMotoServer(ip_address=HOST, port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    s3_url = f"http://{host}:{port}"
    s3 = boto3.client("s3", endpoint_url=s3_url, **KEYS)
    bucket = f"bench-async-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    try:
        env = {"AWS_ENDPOINT_URL_S3": s3_url, "AWS_ENDPOINT_URL_SNS": s3_url, **_credentials_env()}
        with SmlocalProcess(env=env) as server:
            sm, rt = boto_clients(server.url)
            _deploy(sm, "bench-async", bucket, 8)
            rps = throughput(rt, s3, bucket, "bench-async", n)
            through, direct = added_latency(rt, s3, bucket, "bench-async", rounds)
            sm.delete_endpoint(EndpointName="bench-async")
        from_zero = scale_from_zero(s3_url, bucket)
    finally:
        moto.stop()
    results = {
        "throughput_rps": rps,
        "requests": n,
        "async_p50_s": through,
        "direct_p50_s": direct,
        "added_p50_s": through - direct,
        "scale_from_zero_s": from_zero,
    }
    table = Table("figure", "value")
    table.add_row(f"queue throughput ({n} requests, 1 instance, 8 at once)", f"{rps:.1f} requests/s")
    table.add_row("one request: InvokeEndpointAsync to output in S3, p50", f"{through * 1e3:.1f} ms")
    table.add_row("the same model called directly, p50", f"{direct * 1e3:.2f} ms")
    table.add_row("added per request", f"{(through - direct) * 1e3:.1f} ms")
    table.add_row("queued at 0 instances -> output (--time-scale 60, recipe)", f"{from_zero:.2f} s")
    Console().print(table)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
