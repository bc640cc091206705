"""Hostile model data through boto3 against a real server: archive bombs, local directories the server
may not mount, and ModelDataDownloadTimeoutInSeconds (a throttled S3 in front of moto's server).

The server runs with model_data_timeout_scale=0.01, so the API's 60 s minimum means 0.6 s here and
3600 s means 36 s: the first fails on an object that takes ~2.4 s to download, the second does not.
"""

from __future__ import annotations

import io
import os
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from emulator.model_data.sources import extract_failed_message, timeout_message
from tests.fixtures import archive_bombs as bombs
from tests.fixtures.s3server import make_s3_client
from tests.fixtures.slow_s3 import slow_s3_proxy
from tests.fixtures.smlocal_server import Smlocal, error_of, start_smlocal

TIMEOUT_SCALE = 0.01


@pytest.fixture(scope="module")
def hostile(
    tmp_path_factory: pytest.TempPathFactory, echo_image: str, s3_server: str, aws_credentials: None
) -> Iterator[tuple[Smlocal, str]]:
    with slow_s3_proxy(s3_server, piece_bytes=16 * 1024, interval_s=0.05) as proxy:
        env = start_smlocal(
            tmp_path_factory.mktemp("hostile"),
            echo_image,
            s3_endpoint_url=proxy,
            model_data_timeout_scale=TIMEOUT_SCALE,
        )
        try:
            yield env, proxy
        finally:
            env.server.stop()


def _cache(env: Smlocal) -> set[str]:
    root = env.state_dir / "artifacts"
    return {str(p.relative_to(root)) for d in ("models", "tmp") for p in (root / d).iterdir()}


def _platform_log(env: Smlocal, endpoint: str) -> str:
    return (env.state_dir / "logs" / endpoint / "_smlocal.log").read_text()


def _variant(name: str, **extra: Any) -> list[dict[str, Any]]:
    return [
        {
            "VariantName": "AllTraffic",
            "ModelName": name,
            "InitialInstanceCount": 1,
            "InstanceType": "ml.m5.large",
            **extra,
        }
    ]


def test_pax_bomb_fails_the_endpoint_and_leaves_no_trace(
    hostile: tuple[Smlocal, str], tmp_path: Path
) -> None:
    env, _ = hostile
    archive = bombs.pax_bomb(tmp_path / "model.tar.gz", 256 * bombs.MIB)
    before = _cache(env)
    described = env.deploy("PaxBomb", model_data=str(archive))
    try:
        assert described["EndpointStatus"] == "Failed"
        assert described["FailureReason"] == extract_failed_message(str(archive))
        assert "PAX extended header of 268435456 bytes, over the limit of 1048576 bytes" in _platform_log(
            env, "PaxBomb"
        )
        assert _cache(env) == before
    finally:
        env.cleanup("PaxBomb")


def test_a_directory_outside_the_allowed_ones_is_refused_by_create_model(
    hostile: tuple[Smlocal, str], tmp_path: Path
) -> None:
    env, _ = hostile
    with pytest.raises(env.sm.exceptions.ClientError) as caught:
        env.sm.create_model(
            ModelName="EtcModel", PrimaryContainer={"Image": env.image, "ModelDataUrl": "/etc"}
        )
    code, status, message = error_of(caught)
    assert (code, status) == ("ValidationException", 400)
    assert message.startswith("Model data directory /etc (/etc) is outside the directories smlocal may mount")
    assert "--allow-local-model-dir" in message
    with pytest.raises(env.sm.exceptions.ClientError):
        env.sm.describe_model(ModelName="EtcModel")
    # A directory under the system temp dir (the default's second root) is accepted.
    (tmp_path / "model").mkdir()
    env.sm.create_model(
        ModelName="TmpModel", PrimaryContainer={"Image": env.image, "ModelDataUrl": str(tmp_path / "model")}
    )
    env.sm.delete_model(ModelName="TmpModel")


def _slow_object(s3: Any, bucket: str, key: str) -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = os.urandom(768 * 1024)  # incompressible: 768 KiB at 320 KiB/s is ~2.4 s
        info = tarfile.TarInfo("model.bin")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    s3.put_object(Bucket=bucket, Key=key, Body=buf.getvalue())
    return f"s3://{bucket}/{key}"


def test_model_data_download_timeout_is_enforced(hostile: tuple[Smlocal, str], s3_server: str) -> None:
    env, proxy = hostile
    s3 = make_s3_client(proxy)
    bucket = "smlocal-test-slow-b"
    s3.create_bucket(Bucket=bucket)
    uri = _slow_object(s3, bucket, "slow/model.tar.gz")
    before = _cache(env)
    try:
        described = env.deploy(
            "SlowShort", model_data=uri, variants=_variant("SlowShort", ModelDataDownloadTimeoutInSeconds=60)
        )
        assert described["EndpointStatus"] == "Failed"
        assert described["FailureReason"] == timeout_message(uri, 60)
        assert "(ModelDataDownloadTimeoutInSeconds 60)" in _platform_log(env, "SlowShort")
        assert _cache(env) == before  # nothing published, tmp/ clean (what came waits in partial/)
        # The same data with the API's maximum (36 s here) downloads and serves.
        described = env.deploy(
            "SlowLong", model_data=uri, variants=_variant("SlowLong", ModelDataDownloadTimeoutInSeconds=3600)
        )
        assert described["EndpointStatus"] == "InService", described.get("FailureReason")
    finally:
        env.cleanup("SlowShort")
        env.cleanup("SlowLong")
        s3.delete_object(Bucket=bucket, Key="slow/model.tar.gz")
        s3.delete_bucket(Bucket=bucket)


def test_a_stalled_download_fails_at_the_deadline_not_at_the_read_timeout(
    hostile: tuple[Smlocal, str],
) -> None:
    env, proxy = hostile
    s3 = make_s3_client(proxy)
    bucket = "smlocal-test-stall-b"
    s3.create_bucket(Bucket=bucket)
    uri = _slow_object(s3, bucket, "stall/model.tar.gz")
    before = _cache(env)
    try:
        started = time.monotonic()
        described = env.deploy(
            "Stalled", model_data=uri, variants=_variant("Stalled", ModelDataDownloadTimeoutInSeconds=60)
        )
        took = time.monotonic() - started
        assert described["EndpointStatus"] == "Failed"
        assert described["FailureReason"] == timeout_message(uri, 60)
        assert took < 20, took  # 0.6 s deadline; botocore's read timeout would be 60 s
        assert _cache(env) == before
    finally:
        env.cleanup("Stalled")
        s3.delete_object(Bucket=bucket, Key="stall/model.tar.gz")
        s3.delete_bucket(Bucket=bucket)


@pytest.mark.parametrize("where", ["S3Prefix", "channel"])
def test_the_download_timeout_covers_uncompressed_data_and_every_channel(
    hostile: tuple[Smlocal, str], where: str
) -> None:
    """ModelDataDownloadTimeoutInSeconds bounds uncompressed model data (a slow object under an
    S3Prefix) and an AdditionalModelDataSources channel just as it bounds a model.tar.gz."""
    env, proxy = hostile
    s3 = make_s3_client(proxy)
    bucket = f"smlocal-test-slow-{where.lower()}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="fast/model.bin", Body=b"fast")
    s3.put_object(Bucket=bucket, Key="slow/weights.bin", Body=os.urandom(768 * 1024))  # ~2.4 s
    slow: dict[str, Any] = {
        "S3DataSource": {"S3Uri": f"s3://{bucket}/slow/", "S3DataType": "S3Prefix", "CompressionType": "None"}
    }
    if where == "S3Prefix":
        container: dict[str, Any] = {"ModelDataSource": slow}
    else:
        fast = {"S3Uri": f"s3://{bucket}/fast/", "S3DataType": "S3Prefix", "CompressionType": "None"}
        container = {
            "ModelDataSource": {"S3DataSource": fast},
            "AdditionalModelDataSources": [{"ChannelName": "slow", **slow}],
        }
    names = {60: f"Short{where}", 3600: f"Long{where}"}
    try:
        for timeout_s, name in names.items():
            env.sm.create_model(ModelName=name, PrimaryContainer={"Image": env.image, **container})
            env.sm.create_endpoint_config(
                EndpointConfigName=name,
                ProductionVariants=_variant(name, ModelDataDownloadTimeoutInSeconds=timeout_s),
            )
            env.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
            described = env.wait(name)
            if timeout_s == 60:
                assert described["EndpointStatus"] == "Failed"
                assert described["FailureReason"] == timeout_message(f"s3://{bucket}/slow/", 60)
            else:
                assert described["EndpointStatus"] == "InService", described.get("FailureReason")
    finally:
        for name in names.values():
            env.cleanup(name)
        for key in ("fast/model.bin", "slow/weights.bin"):
            s3.delete_object(Bucket=bucket, Key=key)
        s3.delete_bucket(Bucket=bucket)
