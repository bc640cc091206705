"""Deployments: model data from S3 and local paths, the artifact cache, and every way a deployment fails."""

from __future__ import annotations

import io
import tarfile
import time
from pathlib import Path
from typing import Any

import docker
import pytest

from tests.fixtures.smlocal_server import Smlocal, model_tar

pytestmark = pytest.mark.docker

EXTRACT_FAILED = (
    'Failed to extract model data archive from URL "{url}". '
    "Please ensure that the object located at the URL is a valid tar.gz archive."
)


def test_s3_model_data_reaches_the_container(
    smlocal: Smlocal, s3_client: Any, s3_bucket: str, tmp_path: Path
) -> None:
    archive = model_tar(tmp_path / "model.tar.gz", {"model/weights.bin": b"s3 weights"})
    s3_client.upload_file(str(archive), s3_bucket, "models/model.tar.gz")
    url = f"s3://{s3_bucket}/models/model.tar.gz"
    assert smlocal.deploy("FromS3", model_data=url)["EndpointStatus"] == "InService"
    try:
        body = smlocal.rt.invoke_endpoint(EndpointName="FromS3", Body=b"x", CustomAttributes="model=1")[
            "Body"
        ].read()
        assert b"model/weights.bin" in body
    finally:
        smlocal.cleanup("FromS3")


def test_uncompressed_s3_prefix(smlocal: Smlocal, s3_client: Any, s3_bucket: str) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="raw/config.json", Body=b"{}")
    s3_client.put_object(Bucket=s3_bucket, Key="raw/shards/part-1", Body=b"1")
    smlocal.sm.create_model(
        ModelName="Prefix",
        PrimaryContainer={
            "Image": smlocal.image,
            "ModelDataSource": {
                "S3DataSource": {
                    "S3Uri": f"s3://{s3_bucket}/raw/",
                    "S3DataType": "S3Prefix",
                    "CompressionType": "None",
                }
            },
        },
    )
    smlocal.sm.create_endpoint_config(
        EndpointConfigName="Prefix",
        ProductionVariants=[
            {
                "VariantName": "v",
                "ModelName": "Prefix",
                "InstanceType": "ml.m5.large",
                "InitialInstanceCount": 1,
            }
        ],
    )
    smlocal.sm.create_endpoint(EndpointName="Prefix", EndpointConfigName="Prefix")
    try:
        assert smlocal.wait("Prefix")["EndpointStatus"] == "InService"
        body = smlocal.rt.invoke_endpoint(EndpointName="Prefix", Body=b"x", CustomAttributes="model=1")[
            "Body"
        ].read()
        assert b"config.json" in body and b"shards/part-1" in body
    finally:
        smlocal.cleanup("Prefix")


def test_second_endpoint_on_the_same_model_data_extracts_nothing(smlocal: Smlocal, tmp_path: Path) -> None:
    archive = model_tar(tmp_path / "same.tar.gz", {"w": b"same bytes" * 1000})
    service = smlocal.server.service
    assert service is not None
    before = service.artifacts.stats  # type: ignore[attr-defined]
    smlocal.deploy("Same1", model_data=f"file://{archive}")
    middle = service.artifacts.stats  # type: ignore[attr-defined]
    smlocal.deploy("Same2", model_data=str(archive))
    after = service.artifacts.stats  # type: ignore[attr-defined]
    try:
        assert middle.extractions == before.extractions + 1
        assert after.extractions == middle.extractions
        assert after.hashes == middle.hashes  # not even re-hashed: (path, size, mtime) is indexed
    finally:
        smlocal.cleanup("Same1")
        smlocal.cleanup("Same2")


def _hostile_archive(path: Path) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        info = tarfile.TarInfo("../../etc/evil")
        info.size = 4
        tf.addfile(info, io.BytesIO(b"evil"))
    return path


def test_hostile_archive_fails_the_endpoint(smlocal: Smlocal, tmp_path: Path) -> None:
    archive = _hostile_archive(tmp_path / "evil.tar.gz")
    described = smlocal.deploy("Hostile", model_data=str(archive))
    try:
        assert described["EndpointStatus"] == "Failed"
        assert described["FailureReason"] == EXTRACT_FAILED.format(url=str(archive))
        platform_log = (smlocal.state_dir / "logs" / "Hostile" / "_smlocal.log").read_text()
        assert "../../etc/evil" in platform_log
        assert not (tmp_path.parent / "etc" / "evil").exists()
    finally:
        smlocal.cleanup("Hostile")


def test_not_a_tar_fails_the_endpoint(smlocal: Smlocal, tmp_path: Path) -> None:
    bogus = tmp_path / "model.tar.gz"
    bogus.write_bytes(b"this is not gzip")
    described = smlocal.deploy("NotTar", model_data=str(bogus))
    try:
        assert described["EndpointStatus"] == "Failed"
        assert described["FailureReason"] == EXTRACT_FAILED.format(url=str(bogus))
    finally:
        smlocal.cleanup("NotTar")


def test_container_that_exits_fails_the_endpoint_at_once(smlocal: Smlocal) -> None:
    started = time.monotonic()
    described = smlocal.deploy("Exits", env={"EXIT_AT_START": "3"})
    elapsed = time.monotonic() - started
    try:
        assert described["EndpointStatus"] == "Failed"
        reason = described["FailureReason"]
        assert reason.startswith(
            "CannotStartContainerError. Please ensure the model container for variant AllTraffic starts "
            "correctly when invoked with 'docker run <image> serve'"
        )
        assert "exited with code 3" in reason
        assert "echo: exiting at start with 3" in reason  # its last log lines
        assert len(reason) <= 1024
        assert elapsed < 8.0  # well before the 8 s startup deadline of this server
    finally:
        smlocal.cleanup("Exits")


def test_container_that_never_answers_ping_fails_the_endpoint(smlocal: Smlocal) -> None:
    described = smlocal.deploy("Unhealthy", env={"PING_STATUS": "503"})
    try:
        assert described["EndpointStatus"] == "Failed"
        assert described["FailureReason"] == (
            "The primary container for production variant AllTraffic did not pass the ping health check. "
            "Please check CloudWatch logs for this endpoint."
        )
        platform_log = (smlocal.state_dir / "logs" / "Unhealthy" / "_smlocal.log").read_text()
        assert "/ping answered HTTP 503" in platform_log
    finally:
        smlocal.cleanup("Unhealthy")


def test_failed_endpoint_leaves_no_container(smlocal: Smlocal) -> None:
    client = docker.from_env()
    described = smlocal.deploy("Leaves", env={"EXIT_AT_START": "1"}, count=2)
    try:
        assert described["EndpointStatus"] == "Failed"
        left = client.containers.list(all=True, filters={"label": "smlocal.endpoint=Leaves"})
        assert left == []
    finally:
        smlocal.cleanup("Leaves")
        client.close()


def test_in_service_follows_the_first_healthy_ping_closely(smlocal: Smlocal) -> None:
    """The container answers 503 for 1.5 s after it starts listening, then 200."""
    smlocal.deploy("Prompt", env={"STARTUP_DELAY_S": "1.5"}, wait=False)
    try:
        while smlocal.sm.describe_endpoint(EndpointName="Prompt")["EndpointStatus"] == "Creating":
            time.sleep(0.02)
        in_service_at = time.time()
        client = docker.from_env()
        (container,) = client.containers.list(filters={"label": "smlocal.endpoint=Prompt"})
        logs = container.logs().decode()
        client.close()
        healthy_at = next(
            float(line.split()[-1]) for line in logs.splitlines() if line.startswith("echo: healthy at")
        )
        lag = in_service_at - healthy_at
        print(f"InService {lag * 1000:.0f} ms after the container's first healthy moment")
        assert lag < 1.0  # by design ~0.05 s (poll interval); generous for a loaded CI machine
    finally:
        smlocal.cleanup("Prompt")
