"""Multi-model endpoints: first-call latency (download + extract + load) and warm-call latency against
a direct call to the same container, for 1 MB and 100 MB artifacts; hit ratio and evictions in a run
of calls over many models with room for few. In one run.

    python3 bench/multi_model.py [--quick] [--json PATH]

The prefix is an S3 bucket on moto's server (127.0.0.1, in this process); smlocal runs as a subprocess
with AWS_ENDPOINT_URL_S3 pointing at it. The container is the MME test image
(tests/fixtures/images/mme). First calls: REPEAT artifacts of each size, each invoked once cold through
smlocal (a fresh TargetModel each: the download from S3, the safe extraction, the link into the
instance's folder and the container's load). Warm calls: WARM requests of one loaded model through
smlocal's runtime route, against the same model invoked directly on the container's published port
(`POST /models/{name}/invoke`), one at a time over keep-alive connections, alternating in blocks.
Hit ratio: CALLS calls over MODELS small models drawn with a Zipf(1) law (seeded), on an endpoint
whose container answers 507 beyond ROOM loaded models; hits, misses and evictions read from smlocal's
own metrics (ModelCacheHit, ModelUnloadingTime).
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import random
import statistics
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import boto3  # noqa: E402
import httpx  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench._harness import HOST, SmlocalProcess, boto_clients, container_url  # noqa: E402
from emulator.hosting.multi_model.cache import model_name  # noqa: E402
from emulator.runtime.images import LOCAL_BASE_IMAGE, build_image  # noqa: E402

MME_DIR = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "images" / "mme"
MME_IMAGE = "smlocal-bench/mme:latest"
BUCKET = "smlocal-bench-mme"
SIZES = {"1 MB": 1 << 20, "100 MB": 100 << 20}


def artifact(answer: str, pad: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        for name, data in (("answer.txt", answer.encode()), ("pad.bin", os.urandom(pad))):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def deploy(sm: Any, name: str, env: dict[str, str]) -> None:
    sm.create_model(
        ModelName=name,
        PrimaryContainer={
            "Image": MME_IMAGE,
            "Mode": "MultiModel",
            "ModelDataUrl": f"s3://{BUCKET}/{name}/",
            "Environment": env,
        },
    )
    variant = {
        "VariantName": "AllTraffic",
        "ModelName": name,
        "InitialInstanceCount": 1,
        "InstanceType": "ml.m5.large",
    }
    sm.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[variant])
    sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    sm.get_waiter("endpoint_in_service").wait(
        EndpointName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 120}
    )


def p50_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests (a smoke run)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    repeat, warm, calls, models, room = (2, 200, 200, 20, 5) if args.quick else (3, 1000, 1000, 50, 10)
    console = Console()
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
    figures: dict[str, Any] = {"first_call_s": {}, "warm_ms": {}}
    try:
        with SmlocalProcess() as server:
            sm, _ = boto_clients(server.url)
            deploy(sm, "sizes", {})
            invoke_url = f"{server.url}/endpoints/sizes/invocations"
            direct = container_url("sizes")
            with httpx.Client(timeout=300) as http:
                for label, size in SIZES.items():
                    slug = label.replace(" ", "")
                    data = artifact(f"model-{slug}", size)
                    for i in range(repeat + 1):
                        s3.put_object(Bucket=BUCKET, Key=f"sizes/{slug}-{i}.tar.gz", Body=data)
                    firsts = []
                    for i in range(repeat):  # a fresh model each: a cold first call
                        target = f"{slug}-{i}.tar.gz"
                        began = time.perf_counter()
                        got = http.post(
                            invoke_url, content=b"q", headers={"X-Amzn-SageMaker-Target-Model": target}
                        )
                        firsts.append(time.perf_counter() - began)
                        assert got.status_code == 200, got.text
                    target = f"{slug}-{repeat}.tar.gz"
                    http.post(invoke_url, content=b"q", headers={"X-Amzn-SageMaker-Target-Model": target})
                    name = model_name(target)
                    through: list[float] = []
                    straight: list[float] = []
                    for _ in range(warm // 100):  # alternate in blocks of 100
                        for _ in range(100):
                            began = time.perf_counter()
                            r = http.post(
                                invoke_url, content=b"q", headers={"X-Amzn-SageMaker-Target-Model": target}
                            )
                            through.append(time.perf_counter() - began)
                            assert r.status_code == 200
                        for _ in range(100):
                            began = time.perf_counter()
                            r = http.post(f"{direct}/models/{name}/invoke", content=b"q")
                            straight.append(time.perf_counter() - began)
                            assert r.status_code == 200
                    figures["first_call_s"][label] = statistics.median(firsts)
                    figures["warm_ms"][label] = (p50_ms(straight), p50_ms(through))

            deploy(sm, "lru", {"MAX_LOADED": str(room)})
            for i in range(models):
                s3.put_object(Bucket=BUCKET, Key=f"lru/m{i}.tar.gz", Body=artifact(f"m{i}", 1024))
            rng = random.Random(13)
            weights = [1 / (k + 1) for k in range(models)]
            picks = rng.choices(range(models), weights=weights, k=calls)
            lru_url = f"{server.url}/endpoints/lru/invocations"
            began = time.perf_counter()
            with httpx.Client(timeout=300) as http:
                for k in picks:
                    r = http.post(
                        lru_url, content=b"q", headers={"X-Amzn-SageMaker-Target-Model": f"m{k}.tar.gz"}
                    )
                    assert r.status_code == 200, r.text
                took = time.perf_counter() - began
                report = http.get(f"{server.url}/_smlocal/endpoints/lru/metrics").json()
            hits = sum(p["Metrics"].get("ModelCacheHit", {}).get("Sum", 0) for p in report["Periods"])
            counted = sum(
                p["Metrics"].get("ModelCacheHit", {}).get("SampleCount", 0) for p in report["Periods"]
            )
            evictions = sum(
                p["Metrics"].get("ModelUnloadingTime", {}).get("SampleCount", 0) for p in report["Periods"]
            )
            figures["lru"] = {
                "calls": calls,
                "models": models,
                "room": room,
                "hits": hits,
                "counted": counted,
                "hit_ratio": hits / counted if counted else 0.0,
                "evictions": evictions,
                "seconds": took,
                "distinct": len(set(picks)),
            }
    finally:
        moto.stop()

    table = Table(title="multi-model: first and warm calls")
    for column in (
        "artifact",
        "first call (download+extract+load)",
        "warm direct p50",
        "warm smlocal p50",
        "ratio",
    ):
        table.add_column(column)
    for label in SIZES:
        d, t = figures["warm_ms"][label]
        table.add_row(
            label, f"{figures['first_call_s'][label]:.3f} s", f"{d:.3f} ms", f"{t:.3f} ms", f"{t / d:.2f}"
        )
    console.print(table)
    lru = figures["lru"]
    console.print(
        f"LRU run: {lru['calls']} calls over {lru['models']} models (Zipf(1), {lru['distinct']} drawn), "
        f"room for {lru['room']}: hit ratio {lru['hit_ratio']:.3f} ({lru['hits']:.0f}/{lru['counted']:.0f}), "
        f"{lru['evictions']:.0f} evictions, {lru['seconds']:.1f} s"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
