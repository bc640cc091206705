"""The pytest fixtures for a user's own tests (contract_tests.pytest_fixtures), used as a user does:
a test file with no conftest, run by a pytest subprocess that loads the installed `smlocal` plugin,
against real servers, real containers of the echo image and unchanged boto3.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import docker
import pytest

from emulator.runtime.labels import MANAGED, OWNER, owner_id
from tests.fixtures.docker_env import track_owner
from tests.fixtures.mme import mme_artifact
from tests.fixtures.smlocal_server import start_smlocal

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.docker

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "pytest_quickstart" / "test_example.py"

FAILING_TEST = """
import json, os

def test_fails(sagemaker_endpoint, sagemaker_clients, smlocal_server):
    name = sagemaker_endpoint(os.environ["MODEL_IMAGE"])
    record = {"state_dir": str(smlocal_server.state_dir), "owner": smlocal_server.owner,
              "pid": smlocal_server.pid, "url": smlocal_server.url, "endpoint": name}
    with open(os.environ["RECORD"], "w") as f:
        json.dump(record, f)
    sagemaker_clients.runtime.invoke_endpoint(EndpointName=name, Body=b"{}", ContentType="application/json")
    assert False, "the user's own assertion"
"""

REUSE_MODULE = """
import json, os
import pytest

pytestmark = pytest.mark.smlocal_reuse_endpoints

def _record(name, clients):
    count = len(clients.sagemaker.list_endpoints()["Endpoints"])
    with open(os.environ["RECORD"], "a") as f:
        f.write(json.dumps({"endpoint": name, "endpoints": count}) + "\\n")

def test_one(sagemaker_endpoint, sagemaker_clients):
    _record(sagemaker_endpoint(os.environ["MODEL_IMAGE"], env={"A": "1"}), sagemaker_clients)

def test_two(sagemaker_endpoint, sagemaker_clients):
    name = sagemaker_endpoint(os.environ["MODEL_IMAGE"], env={"A": "1"})
    _record(name, sagemaker_clients)
    out = sagemaker_clients.runtime.invoke_endpoint(EndpointName=name, Body=b"{}", ContentType="application/json")
    assert out["Body"].read() == b"{}"
"""

AFTER_MODULE = """
import os

def test_external_and_gone(smlocal_server, sagemaker_clients):
    assert smlocal_server.url == os.environ["EXPECTED_URL"]
    assert smlocal_server.state_dir is None and smlocal_server.pid is None
    assert sagemaker_clients.sagemaker.list_endpoints()["Endpoints"] == []
"""

CRASHING_MODULE = """
import os

def test_crash(sagemaker_endpoint):
    sagemaker_endpoint(os.environ["MODEL_IMAGE"], env={"EXIT_AT_START": "3"})
"""


def _owned(client: docker.DockerClient, owner: str) -> list[str]:
    found = client.api.containers(all=True, filters={"label": [f"{MANAGED}=true", f"{OWNER}={owner}"]})
    return [str(c["Id"]) for c in found]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text()


@pytest.mark.slow
def test_users_suite_runs_the_quick_start_and_cleans_up(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    echo_image: str,
    docker_engine: docker.DockerClient,
) -> None:
    """The docs' example passes as a user runs it; a failing test shows its container logs; at the
    end the started server is gone with its state dir, and no container of its owner is left."""
    shutil.copy(EXAMPLE, pytester.path / "test_example.py")
    pytester.makepyfile(test_failing=FAILING_TEST)
    record = pytester.path / "record.json"
    pytester.makeini("[pytest]\n")  # the user's project: no conftest, no options of ours
    monkeypatch.setenv("MODEL_IMAGE", echo_image)
    monkeypatch.setenv("RECORD", str(record))
    run = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--strict-markers", timeout=300)
    seen = json.loads(record.read_text())
    track_owner(seen["owner"])  # the leak check at session end covers the inner server's containers

    run.assert_outcomes(passed=3, failed=1)
    out = run.stdout.str()
    name = seen["endpoint"]
    assert f"smlocal container logs: {name}" in out
    section = out.split(f"smlocal container logs: {name}", 1)[1]
    assert "echo: listening on 8080" in section
    assert '"POST /invocations HTTP/1.1" 200' in section
    assert "the user's own assertion" in out
    assert out.count("smlocal container logs:") == 1  # the passing tests' endpoints are not reported
    assert seen["owner"] == owner_id(Path(seen["state_dir"]))
    assert not Path(seen["state_dir"]).exists()
    assert not _alive(seen["pid"])
    assert _owned(docker_engine, seen["owner"]) == []


@pytest.mark.slow
def test_external_server_module_reuse_and_failed_deployment(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    echo_image: str,
    docker_engine: docker.DockerClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """--smlocal-url: the tests use that server and leave it running, with nothing of theirs on it; a
    `smlocal_reuse_endpoints` module's identical calls share one endpoint, deleted at the module's end;
    a container that crashes fails its test with the FailureReason and the container's log."""
    state_dir = tmp_path_factory.mktemp("external")
    env = start_smlocal(state_dir, echo_image)
    try:
        pytester.makepyfile(
            test_a_reuse=REUSE_MODULE, test_b_after=AFTER_MODULE, test_c_crash=CRASHING_MODULE
        )
        record = pytester.path / "record.jsonl"
        monkeypatch.setenv("MODEL_IMAGE", echo_image)
        monkeypatch.setenv("RECORD", str(record))
        monkeypatch.setenv("EXPECTED_URL", env.server.url)
        run = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "--strict-markers", "--smlocal-url", env.server.url, timeout=300
        )

        run.assert_outcomes(passed=3, failed=1)
        calls = [json.loads(line) for line in record.read_text().splitlines()]
        assert len(calls) == 2 and calls[0]["endpoint"] == calls[1]["endpoint"]
        assert [c["endpoints"] for c in calls] == [1, 1]  # still there for test_two: made once
        out = run.stdout.str()
        assert "FailureReason: CannotStartContainerError" in out
        assert "echo: exiting at start with 3" in out  # the container's own log line
        assert "test_c_crash.py::test_crash - Failed: endpoint test-crash-" in out
        sm: Any = env.sm
        assert sm.list_endpoints()["Endpoints"] == []
        assert sm.list_endpoint_configs()["EndpointConfigs"] == []
        assert sm.list_models()["Models"] == []
        owner = owner_id(state_dir)
        deadline = time.monotonic() + 30
        while _owned(docker_engine, owner) and time.monotonic() < deadline:
            time.sleep(0.2)  # DeleteEndpoint answers before the containers are removed
        assert _owned(docker_engine, owner) == []
        assert env.sm.list_endpoints()["ResponseMetadata"]["HTTPStatusCode"] == 200  # still serving
    finally:
        env.server.stop()


KINDS_MODULE = """
import os, time
import boto3

BUCKET = os.environ["BUCKET"]

def invoke(clients, name, body=b"{}", **options):
    return clients.runtime.invoke_endpoint(EndpointName=name, Body=body, ContentType="application/json", **options)

def test_serial_pipeline(sagemaker_endpoint, sagemaker_clients):
    image = os.environ["BIND_IMAGE"]
    name = sagemaker_endpoint(
        containers=[{"image": image, "env": {"STAGE": "first"}}, {"image": image, "env": {"STAGE": "second"}}],
        inference_execution_mode="Serial",
    )
    body = invoke(sagemaker_clients, name, b"x")["Body"].read()
    assert body.startswith(b"x|first:") and b"|second:" in body

def test_direct_containers(sagemaker_endpoint, sagemaker_clients):
    image = os.environ["BIND_IMAGE"]
    name = sagemaker_endpoint(
        containers=[{"image": image, "env": {"STAGE": "a"}, "hostname": "one"},
                    {"image": image, "env": {"STAGE": "b"}, "hostname": "two"}],
        inference_execution_mode="Direct",
    )
    assert invoke(sagemaker_clients, name, b"x", TargetContainerHostname="two")["Body"].read().startswith(b"x|b:")

def test_multi_model(sagemaker_endpoint, sagemaker_clients):
    name = sagemaker_endpoint(os.environ["MME_IMAGE"], f"s3://{BUCKET}/models/", multi_model=True)
    assert b"|alpha|" in invoke(sagemaker_clients, name, TargetModel="a.tar.gz")["Body"].read()

def test_serverless(sagemaker_endpoint, sagemaker_clients):
    name = sagemaker_endpoint(os.environ["MODEL_IMAGE"], serverless={"MemorySizeInMB": 1024, "MaxConcurrency": 1})
    config = sagemaker_clients.sagemaker.describe_endpoint_config(EndpointConfigName=name.config_name)
    assert config["ProductionVariants"][0]["ServerlessConfig"]["MaxConcurrency"] == 1
    assert invoke(sagemaker_clients, name)["Body"].read() == b"{}"

def test_async(sagemaker_endpoint, sagemaker_clients):
    s3 = boto3.client("s3", endpoint_url=os.environ["S3_URL"], region_name="us-east-1")
    name = sagemaker_endpoint(os.environ["MODEL_IMAGE"], async_config={"OutputConfig": {"S3OutputPath": f"s3://{BUCKET}/out"}})
    s3.put_object(Bucket=BUCKET, Key="in.json", Body=b'{"q": 1}')
    answer = sagemaker_clients.runtime.invoke_endpoint_async(EndpointName=name, InputLocation=f"s3://{BUCKET}/in.json")
    key = answer["OutputLocation"].split("/", 3)[3]
    deadline = time.monotonic() + 30
    while True:
        try:
            assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b'{"q": 1}'
            break
        except s3.exceptions.NoSuchKey:
            assert time.monotonic() < deadline, "no async answer in 30 s"
            time.sleep(0.1)  # polling S3, as a user's test does
"""


@pytest.mark.slow
def test_every_endpoint_kind_through_the_factory(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    echo_image: str,
    echo_bind_image: str,
    mme_image: str,
    s3_server: str,
    s3_bucket: str,
    s3_client: Any,
    aws_credentials: None,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Multi-container (Serial and Direct), multi-model, serverless and async endpoints, each made by
    one factory call and invoked the way its kind is; everything deleted afterwards."""
    s3_client.upload_file(
        str(mme_artifact(tmp_path_factory.mktemp("mme"), "alpha")), s3_bucket, "models/a.tar.gz"
    )
    env = start_smlocal(tmp_path_factory.mktemp("kinds"), echo_image, s3_endpoint_url=s3_server)
    try:
        pytester.makepyfile(test_kinds=KINDS_MODULE)
        for key, value in (
            ("MODEL_IMAGE", echo_image),
            ("BIND_IMAGE", echo_bind_image),
            ("MME_IMAGE", mme_image),
            ("BUCKET", s3_bucket),
            ("S3_URL", s3_server),
        ):
            monkeypatch.setenv(key, value)
        run = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "--smlocal-url", env.server.url, timeout=300
        )

        run.assert_outcomes(passed=5)
        assert env.sm.list_endpoints()["Endpoints"] == []
        assert env.sm.list_models()["Models"] == []
    finally:
        env.server.stop()
