"""Cold starts as `smlocal profile` shows them, and the server's memory while it downloads model data.

    python3 bench/cold_start.py [--uncompressed-mb 1024] [--sample]

Two deployments on one `smlocal serve` child process, through boto3 exactly as a user deploys:

- **uncompressed**: one S3Object of N MB of random bytes (`CompressionType: None`) in moto's S3 server
  (in this process, on 127.0.0.1), served by the echo test image on ml.m5.large;
- **sample** (`--sample`): the Stable Diffusion sample image `smlocal-sample/sd:latest` with its tiny
  model.tar.gz (both as `smlocal demo` builds them: run it once first), also from moto's S3.

For each: the cold-start profile (`GET /_smlocal/endpoints/NAME/cold-starts`, the last start), the wall
time of CreateEndpoint -> InService seen by the client, and the server process's resident memory:
its figure before the deploy and the highest one sampled every 20 ms during it (/proc/PID/status).
moto keeps the objects in its own memory (this process), so the server's figure is the server's alone.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import boto3  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402

from bench._harness import IMAGE, REPO, SmlocalProcess, boto_clients, wait_in_service  # noqa: E402

SAMPLE_IMAGE = "smlocal-sample/sd:latest"
SAMPLE_MODEL = REPO / ".smlocal" / "build" / "sd-tiny" / "model.tar.gz"
BUCKET = "smlocal-bench-cold-start"
CHUNK = 8 << 20


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class PeakRss:
    """The highest VmRSS of a process while the `with` block runs, sampled every 20 ms."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.before_kib = rss_kib(pid)
        self.peak_kib = self.before_kib
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak_kib = max(self.peak_kib, rss_kib(self.pid))

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def put_random_object(s3: Any, key: str, size: int) -> None:
    """A multipart upload of `size` random bytes (incompressible), never more than CHUNK in memory."""
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key)
    parts = []
    for number, offset in enumerate(range(0, size, CHUNK), start=1):
        body = os.urandom(min(CHUNK, size - offset))
        part = s3.upload_part(
            Bucket=BUCKET, Key=key, PartNumber=number, UploadId=upload["UploadId"], Body=body
        )
        parts.append({"PartNumber": number, "ETag": part["ETag"]})
    s3.complete_multipart_upload(
        Bucket=BUCKET, Key=key, UploadId=upload["UploadId"], MultipartUpload={"Parts": parts}
    )


def deploy_and_measure(server: SmlocalProcess, sm: Any, name: str, container: dict[str, Any]) -> None:
    sm.create_model(ModelName=name, PrimaryContainer=container)
    variant = {
        "VariantName": "AllTraffic",
        "ModelName": name,
        "InstanceType": "ml.m5.large",
        "InitialInstanceCount": 1,
    }
    sm.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[variant])
    with PeakRss(server.pid) as rss:
        started = time.monotonic()
        sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
        wait_in_service(sm, name, timeout_s=900)
        wall = time.monotonic() - started
    print(f"\n== {name}: CreateEndpoint -> InService {wall:.2f} s (the client's view); smlocal profile:")
    subprocess.run(
        [sys.executable, "-m", "emulator.cli", "profile", name, "--endpoint-url", server.url],
        cwd=REPO,
        check=True,
        env={**os.environ, "COLUMNS": "110"},
    )
    print(
        f"   server RSS: {rss.before_kib / 1024:.0f} MiB before, peak {rss.peak_kib / 1024:.0f} MiB "
        f"during the deploy (+{(rss.peak_kib - rss.before_kib) / 1024:.0f} MiB)"
    )
    sm.delete_endpoint(EndpointName=name)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--uncompressed-mb", type=int, default=1024)
    parser.add_argument("--sample", action="store_true", help="also the Stable Diffusion sample image")
    args = parser.parse_args()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    s3_url = f"http://{host}:{port}"
    s3 = boto3.client(
        "s3", endpoint_url=s3_url, region_name="us-east-1", aws_access_key_id="t", aws_secret_access_key="t"
    )
    s3.create_bucket(Bucket=BUCKET)
    env = {**os.environ, "AWS_ENDPOINT_URL_S3": s3_url}
    env.update(AWS_ACCESS_KEY_ID="t", AWS_SECRET_ACCESS_KEY="t")
    try:
        size = args.uncompressed_mb * 10**6
        started = time.monotonic()
        put_random_object(s3, "big/model.safetensors", size)
        print(f"uploaded {size / 1e6:.0f} MB to moto's S3 in {time.monotonic() - started:.1f} s")
        if args.sample:
            s3.upload_file(str(SAMPLE_MODEL), BUCKET, "sd/model.tar.gz")
        with SmlocalProcess(env=env, serve_args=("--any-registry",)) as server:
            sm, _ = boto_clients(server.url)
            uncompressed = {
                "Image": IMAGE,
                "ModelDataSource": {
                    "S3DataSource": {
                        "S3Uri": f"s3://{BUCKET}/big/model.safetensors",
                        "S3DataType": "S3Object",
                        "CompressionType": "None",
                    }
                },
            }
            deploy_and_measure(server, sm, "bench-cold-uncompressed", uncompressed)
            if args.sample:
                sample = {"Image": SAMPLE_IMAGE, "ModelDataUrl": f"s3://{BUCKET}/sd/model.tar.gz"}
                deploy_and_measure(server, sm, "bench-cold-sample", sample)
    finally:
        moto.stop()


if __name__ == "__main__":
    main()
