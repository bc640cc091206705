"""The cold start, measured (issue 25 item 5), through unchanged boto3 and the real server: a deploy
whose model data (32 MB of random bytes in a tar.gz, so gzip cannot shrink it) comes from moto's S3
through a throttled proxy (tests/fixtures/slow_s3.py: ~6.5 MB/s) so that the download dominates.

The profile is read from the admin route and `smlocal profile`; its measured phases must cover the
wall time (what is left, `other`, under 5 % of it), the log stream must hold a line per phase, a
second endpoint of the same model data must say `cached`, and `smlocal check` must print the same
profile for its first container.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.s3server import ACCESS_KEY, REGION, SECRET_KEY
from tests.fixtures.slow_s3 import slow_s3_proxy
from tests.fixtures.smlocal_server import TEST_LIMITS, Smlocal, start_smlocal

pytestmark = pytest.mark.docker

MODEL_BYTES = 32 * 1024 * 1024
#: 128 kB every 20 ms: ~6.5 MB/s, ~5 s for the archive (the echo container is ready in well under that)
PIECE_BYTES, INTERVAL_S = 128 * 1024, 0.02


@pytest.fixture(scope="module")
def big_model(s3_server: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """s3://.../slow/.../model.tar.gz: random weights (the proxy throttles keys holding `slow/`)."""
    import boto3

    s3 = boto3.session.Session().client(
        "s3",
        endpoint_url=s3_server,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
    )
    bucket = f"cold-start-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    archive = tmp_path_factory.mktemp("big") / "model.tar.gz"
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        info = tarfile.TarInfo("weights.bin")
        info.size = MODEL_BYTES
        tar.addfile(info, io.BytesIO(os.urandom(MODEL_BYTES)))
    key = f"slow/{uuid.uuid4().hex[:8]}/model.tar.gz"
    s3.upload_file(str(archive), bucket, key)
    return f"s3://{bucket}/{key}"


@pytest.fixture(scope="module")
def proxy(s3_server: str) -> Iterator[str]:
    with slow_s3_proxy(s3_server, piece_bytes=PIECE_BYTES, interval_s=INTERVAL_S) as url:
        yield url


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, echo_image: str, proxy: str, aws_credentials: None
) -> Iterator[Smlocal]:
    env = start_smlocal(tmp_path_factory.mktemp("cold"), echo_image, s3_endpoint_url=proxy)
    try:
        yield env
    finally:
        env.server.stop()


def _profiles(env: Smlocal, name: str) -> dict[str, Any]:
    resp = httpx.get(f"{env.server.url}/_smlocal/endpoints/{name}/cold-starts", timeout=10)
    assert resp.status_code == 200, resp.text
    document: dict[str, Any] = resp.json()
    return document


def _settled(env: Smlocal, name: str, timeout_s: float = 60.0) -> dict[str, Any]:
    """DescribeEndpoint polled (as a client waits) until the endpoint is no longer Updating."""
    deadline = time.monotonic() + timeout_s
    while True:
        described: dict[str, Any] = env.sm.describe_endpoint(EndpointName=name)
        if described["EndpointStatus"] != "Updating" or time.monotonic() > deadline:
            return described
        time.sleep(0.05)


def _smlocal(env: Smlocal, *args: str) -> str:
    run = subprocess.run(
        [sys.executable, "-m", "emulator.cli", *args, "--endpoint-url", env.server.url],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "160"},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def test_download_dominates_and_the_phases_add_up(served: Smlocal, big_model: str) -> None:
    env, name, second = served, "ColdBig", "ColdBigAgain"
    try:
        asked = time.monotonic()
        described = env.deploy(name, model_data=big_model)
        seen = time.monotonic() - asked
        assert described["EndpointStatus"] == "InService", described.get("FailureReason")
        document = _profiles(env, name)
        assert document["WithoutProfile"] == []
        (profile,) = document["Profiles"]
        phases = {p["Name"]: p for p in profile["Phases"]}
        wall = profile["WallSeconds"]
        print(json.dumps(profile, indent=2))  # the measured example (pytest -s)

        # the download dominates: its bytes are the archive's, at the proxy's throttled rate
        assert profile["Dominant"] == "model data download", profile["Summary"]
        download = phases["model data download"]
        assert MODEL_BYTES < download["Bytes"] < MODEL_BYTES * 1.01
        assert download["BytesPerSecond"] < 2 * PIECE_BYTES / INTERVAL_S
        assert profile["Summary"].startswith("model data download ")
        assert "consider uncompressed model data or a smaller artifact" in profile["Summary"]
        assert phases["image resolution"]["Bytes"] > 0 and phases["model data extraction"]["Seconds"] > 0

        # the phases add up to the wall time, and the measured ones cover it within 5 %
        assert sum(p["Seconds"] for p in profile["Phases"]) == pytest.approx(wall, rel=1e-6)
        assert phases["other"]["Seconds"] <= 0.05 * wall, profile
        assert [p["Name"] for p in profile["Phases"]] == [
            "image resolution",
            "model data download",
            "model data extraction",
            "container start",
            "first TCP accept",
            "first /ping 200",
            "other",
        ]
        assert wall <= seen  # from the deploy's start to the first 200: within CreateEndpoint -> InService
        assert profile["HealthCheckBudgetSeconds"] == TEST_LIMITS.startup_timeout_s
        assert profile["FirstInvocationSeconds"] is None

        # the first invocation is recorded once it completes
        env.rt.invoke_endpoint(EndpointName=name, Body=b"{}", ContentType="application/json")
        (after,) = _profiles(env, name)["Profiles"]
        assert after["FirstInvocationSeconds"] is not None and after["FirstInvocationSeconds"] > 0

        # the instance's log stream: one line per phase and the summary
        logs = httpx.get(f"{env.server.url}/_smlocal/endpoints/{name}/logs", timeout=10).text
        stream = f"AllTraffic/{profile['InstanceId']}/_cold-start"
        lines = [line for line in logs.splitlines() if line.startswith(stream + " ")]
        assert len(lines) == len(phases) + 1, logs
        assert "cold start: model data download" in lines[1]
        assert "cold start: ready after" in lines[-1] and "health check budget" in lines[-1]

        # `smlocal profile` (a table, the dominance and the budget) and its --json; `smlocal metrics`
        out = _smlocal(env, "profile", name)
        assert "model data download" in out and "health check budget:" in out and "first invocation" in out
        assert json.loads(_smlocal(env, "profile", name, "--json"))["Profiles"][0]["Dominant"] == (
            "model data download"
        )
        assert f"cold start AllTraffic/{profile['InstanceId']}: ready after" in _smlocal(env, "metrics", name)

        # a second instance of the variant (a scale-out) starts from the plan: its model data is cached
        env.sm.update_endpoint_weights_and_capacities(
            EndpointName=name,
            DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": 2}],
        )
        assert _settled(env, name)["EndpointStatus"] == "InService"
        first, scaled = _profiles(env, name)["Profiles"]
        assert first["InstanceId"] == profile["InstanceId"] and scaled["ModelDataCached"] is True
        notes = {p["Name"]: p.get("Note") for p in scaled["Phases"]}
        assert (
            notes["model data download"] == "cached" and notes["image resolution"] == "resolved at the deploy"
        )
        assert scaled["WallSeconds"] < wall

        # a second endpoint of the same model data: the digest cache has it
        again = env.deploy(second, model_data=big_model)
        assert again["EndpointStatus"] == "InService", again.get("FailureReason")
        (cached,) = _profiles(env, second)["Profiles"]
        assert cached["ModelDataCached"] is True
        download = next(p for p in cached["Phases"] if p["Name"] == "model data download")
        assert download["Note"] == "cached" and "Bytes" not in download
        assert cached["Dominant"] != "model data download"
        assert "cached" in _smlocal(env, "profile", second)
    finally:
        env.cleanup(name)
        env.cleanup(second)


def test_an_unknown_endpoint_has_no_profile(served: Smlocal) -> None:
    resp = httpx.get(f"{served.server.url}/_smlocal/endpoints/NoSuchEndpoint/cold-starts", timeout=10)
    assert resp.status_code == 404
    assert resp.json()["__type"].endswith("ResourceNotFoundException")


def test_smlocal_check_prints_the_profile(
    echo_image: str, big_model: str, proxy: str, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "COLUMNS": "200",
        "AWS_ENDPOINT_URL_S3": proxy,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": REGION,
        "TMPDIR": str(tmp_path),  # the checker caches model data under the temp dir: a fresh one
    }
    run = subprocess.run(
        [sys.executable, "-m", "emulator.cli", "check", echo_image, "--model-data", big_model]
        + ["--check", "start.healthy", "--startup-timeout", "30", "--json", "out.json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    lines = [line for line in run.stdout.splitlines() if line.startswith("cold start: ")]
    assert len(lines) == 3, run.stdout
    assert lines[0].startswith("cold start: ready after ") and "model data download" in lines[0]
    assert lines[1].startswith("cold start: model data download "), run.stdout
    assert lines[2].startswith("cold start: health check budget: ") and "of 30 s used" in lines[2]
    profile = json.loads((tmp_path / "out.json").read_text())["cold_start"]
    assert profile["Dominant"] == "model data download"
    assert profile["HealthCheckBudgetSeconds"] == 30.0
    phases = {p["Name"]: p for p in profile["Phases"]}
    assert MODEL_BYTES < phases["model data download"]["Bytes"] < MODEL_BYTES * 1.01
    assert sum(p["Seconds"] for p in profile["Phases"]) == pytest.approx(profile["WallSeconds"], rel=1e-6)
    assert phases["other"]["Seconds"] <= 0.05 * profile["WallSeconds"], profile


def test_an_adopted_instance_has_no_profile_and_says_why(
    tmp_path: Path, echo_image: str, aws_credentials: None
) -> None:
    """After a restart the server adopts the running container: its start was never measured here."""
    crashed = start_smlocal(tmp_path, echo_image, stop_containers=False)  # like a killed server
    try:
        assert crashed.deploy("ColdAdopted")["EndpointStatus"] == "InService"
        (measured,) = _profiles(crashed, "ColdAdopted")["Profiles"]
    finally:
        crashed.server.stop()
    restarted = start_smlocal(tmp_path, echo_image)
    try:
        assert restarted.wait("ColdAdopted")["EndpointStatus"] == "InService"
        document = _profiles(restarted, "ColdAdopted")
        assert document["Profiles"] == []
        (missing,) = document["WithoutProfile"]
        assert missing["InstanceId"] == measured["InstanceId"]
        assert missing["Reason"].startswith("adopted after a restart of smlocal")
        out = _smlocal(restarted, "profile", "ColdAdopted")
        assert "No instance start of ColdAdopted was measured by this server." in out
        assert f"AllTraffic/{measured['InstanceId']}: no profile (adopted after a restart" in out
    finally:
        restarted.cleanup("ColdAdopted")
        restarted.server.stop()
