"""Multi-model endpoints through unchanged boto3 against real containers of the MME test image
(tests/fixtures/images/mme) and moto's S3 server as the prefix: models loaded on demand, each answering
as itself; concurrent first calls sharing one load; a model uploaded after InService served at once;
507 evicting the least recently used; ModelCacheSetting Disabled; ModelNotReadyException while a slow
load goes on, then the retry served; the label; the TargetModel errors."""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from emulator.hosting.multi_model.cache import model_name
from emulator.model_data.budget import tree_bytes
from tests.fixtures.mme import mme_artifact
from tests.fixtures.scaling import TIME_SCALE, wait_for
from tests.fixtures.slow_s3 import slow_s3_proxy
from tests.fixtures.smlocal_server import CREDENTIALS, Smlocal, error_of, start_smlocal

pytestmark = pytest.mark.docker

#: boto3 without retries: a 429 or an error is the test's finding, not something to hide
NO_RETRY = Config(retries={"mode": "standard", "max_attempts": 1}, read_timeout=120)


@pytest.fixture(scope="module")
def smlocal(
    tmp_path_factory: pytest.TempPathFactory, mme_image: str, s3_server: str, aws_credentials: None
) -> Iterator[Smlocal]:
    env = start_smlocal(
        tmp_path_factory.mktemp("smlocal"),
        mme_image,
        s3_endpoint_url=s3_server,
        model_load_window_s=3.0,
        time_scale=TIME_SCALE,  # metric periods of a second (the sampler's LoadedModelCount too)
    )
    try:
        yield env
    finally:
        env.server.stop()


@pytest.fixture(scope="module")
def roomy(
    tmp_path_factory: pytest.TempPathFactory, mme_image: str, s3_server: str, aws_credentials: None
) -> Iterator[Smlocal]:
    """A server with SageMaker's 60 s load window, for the workloads that must fit in it even on a
    loaded machine (the shared fixture's 3 s window is for the slow-load test)."""
    env = start_smlocal(tmp_path_factory.mktemp("roomy"), mme_image, s3_endpoint_url=s3_server)
    try:
        yield env
    finally:
        env.server.stop()


@pytest.fixture(scope="module")
def roomy_rt(roomy: Smlocal) -> Any:
    return boto3.client("sagemaker-runtime", endpoint_url=roomy.server.url, config=NO_RETRY, **CREDENTIALS)


@pytest.fixture(scope="module")
def rt(smlocal: Smlocal) -> Any:
    return boto3.client("sagemaker-runtime", endpoint_url=smlocal.server.url, config=NO_RETRY, **CREDENTIALS)


def upload(s3_client: Any, bucket: str, tmp_path: Path, key: str, answer: str) -> None:
    artifact = mme_artifact(tmp_path / key, answer)
    s3_client.upload_file(str(artifact), bucket, key)


def deploy_mme(
    env: Smlocal,
    name: str,
    prefix: str,
    env_vars: dict[str, str] | None = None,
    cache: str | None = None,
    image: str | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "Image": image or env.image,
        "Mode": "MultiModel",
        "ModelDataUrl": prefix,
        "Environment": env_vars or {},
    }
    if cache:
        container["MultiModelConfig"] = {"ModelCacheSetting": cache}
    env.sm.create_model(ModelName=name, PrimaryContainer=container)
    env.sm.create_endpoint_config(
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
    env.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    return env.wait(name)


def call(rt: Any, endpoint: str, target: str, body: bytes = b"q") -> str:
    got = rt.invoke_endpoint(EndpointName=endpoint, Body=body, ContentType="text/plain", TargetModel=target)
    text: str = got["Body"].read().decode()
    return text


def parts(answer: str) -> dict[str, str]:
    """The test image's answer `{body}|{answer}|target={t}|loads={n}` as a dict."""
    body, model, target, loads = answer.split("|")
    return {"body": body, "answer": model, "target": target.removeprefix("target="), "loads": loads[6:]}


def test_models_load_on_demand_and_answer_as_themselves(
    smlocal: Smlocal, rt: Any, s3_client: Any, s3_bucket: str, tmp_path: Path
) -> None:
    for name in ("a", "b", "c"):
        upload(s3_client, s3_bucket, tmp_path, f"models/{name}.tar.gz", f"model-{name}")
    described = deploy_mme(smlocal, "mme", f"s3://{s3_bucket}/models/")
    assert described["EndpointStatus"] == "InService", described.get("FailureReason")
    model = smlocal.sm.describe_model(ModelName="mme")["PrimaryContainer"]
    assert model["Mode"] == "MultiModel" and model["MultiModelConfig"] == {"ModelCacheSetting": "Enabled"}
    try:
        for name in ("a", "b", "c", "a", "b"):
            got = parts(call(rt, "mme", f"{name}.tar.gz", name.encode()))
            assert got == {"body": name, "answer": f"model-{name}", "target": f"{name}.tar.gz", "loads": "1"}

        # 20 concurrent first calls of a new model (uploaded after InService): one download, one load
        upload(s3_client, s3_bucket, tmp_path, "models/late/d.tar.gz", "model-d")
        with concurrent.futures.ThreadPoolExecutor(20) as pool:
            answers = list(pool.map(lambda _: parts(call(rt, "mme", "late/d.tar.gz")), range(20)))
        assert {a["answer"] for a in answers} == {"model-d"} and {a["loads"] for a in answers} == {"1"}
        report = httpx.get(f"{smlocal.server.url}/_smlocal/endpoints/mme/metrics", timeout=10).json()
        downloads = sum(
            p["Metrics"].get("ModelDownloadingTime", {}).get("SampleCount", 0) for p in report["Periods"]
        )
        assert downloads == 4  # a, b, c and d: once each, the 20 concurrent first calls of d included

        # TargetModel errors: missing on an MME, an artifact that is not there, outside the prefix
        cases = [
            ({}, "Endpoint mme is a multi-model endpoint: specify the TargetModel to invoke."),
            (
                {"TargetModel": "nope.tar.gz"},
                f"Failed to download model data (bucket: {s3_bucket}, key: models/nope.tar.gz). Please "
                "ensure that there is an object located at the URL and that the role passed to CreateModel "
                "has permissions to download the model.",
            ),
            (
                {"TargetModel": "../a.tar.gz"},
                "TargetModel ../a.tar.gz must be a path relative to the model's ModelDataUrl.",
            ),
        ]
        for extra, message in cases:
            with pytest.raises(ClientError) as caught:
                rt.invoke_endpoint(EndpointName="mme", Body=b"x", **extra)
            assert error_of(caught.value) == ("ValidationError", 400, message)
        with pytest.raises(ClientError) as streamed:  # the stream operation has no TargetModel
            rt.invoke_endpoint_with_response_stream(EndpointName="mme", Body=b"x")
        assert error_of(streamed.value) == (
            "ValidationError",
            400,
            "Endpoint mme is a multi-model endpoint: InvokeEndpointWithResponseStream cannot name a "
            "TargetModel. Use InvokeEndpoint.",
        )
        assert parts(call(rt, "mme", "a.tar.gz"))["loads"] == "1"  # still served, still loaded once
    finally:
        smlocal.cleanup("mme")


def test_target_model_on_another_endpoint_kind_is_refused(smlocal: Smlocal, rt: Any, echo_image: str) -> None:
    smlocal.deploy("single", image=echo_image)
    try:
        with pytest.raises(ClientError) as caught:
            rt.invoke_endpoint(EndpointName="single", Body=b"x", TargetModel="a.tar.gz")
        assert error_of(caught.value) == (
            "ValidationError",
            400,
            "TargetModel is only allowed for multi-model endpoints; endpoint single is not one.",
        )
    finally:
        smlocal.cleanup("single")


def test_a_507_evicts_the_least_recently_used(
    smlocal: Smlocal, rt: Any, s3_client: Any, s3_bucket: str, tmp_path: Path
) -> None:
    for name in ("a", "b", "c"):
        upload(s3_client, s3_bucket, tmp_path, f"few/{name}.tar.gz", f"model-{name}")
    described = deploy_mme(smlocal, "mme-507", f"s3://{s3_bucket}/few/", {"MAX_LOADED": "2"})
    assert described["EndpointStatus"] == "InService", described.get("FailureReason")
    try:
        assert parts(call(rt, "mme-507", "a.tar.gz"))["loads"] == "1"
        assert parts(call(rt, "mme-507", "b.tar.gz"))["loads"] == "1"
        assert parts(call(rt, "mme-507", "a.tar.gz"))["loads"] == "1"  # a is now the more recent
        # c's load gets 507 (two loaded): b, the least recently used, is unloaded and c loaded
        assert parts(call(rt, "mme-507", "c.tar.gz"))["answer"] == "model-c"
        assert parts(call(rt, "mme-507", "a.tar.gz"))["loads"] == "1"  # a stayed loaded
        # b comes back: a 507 again; c (used before a's last call) is the least recently used and goes
        assert parts(call(rt, "mme-507", "b.tar.gz")) == {
            "body": "q",
            "answer": "model-b",
            "target": "b.tar.gz",
            "loads": "2",
        }
        assert parts(call(rt, "mme-507", "a.tar.gz"))["loads"] == "1"  # a was never unloaded
        assert parts(call(rt, "mme-507", "c.tar.gz"))["loads"] == "2"  # c was, and came back
    finally:
        smlocal.cleanup("mme-507")


def test_cache_disabled_loads_for_every_call(
    smlocal: Smlocal, rt: Any, s3_client: Any, s3_bucket: str, tmp_path: Path
) -> None:
    upload(s3_client, s3_bucket, tmp_path, "off/a.tar.gz", "model-a")
    described = deploy_mme(smlocal, "mme-off", f"s3://{s3_bucket}/off/", cache="Disabled")
    assert described["EndpointStatus"] == "InService", described.get("FailureReason")
    assert smlocal.sm.describe_model(ModelName="mme-off")["PrimaryContainer"]["MultiModelConfig"] == {
        "ModelCacheSetting": "Disabled"
    }
    try:
        loads = [parts(call(rt, "mme-off", "a.tar.gz"))["loads"] for _ in range(3)]
        assert loads == ["1", "2", "3"]  # unloaded (and deleted) after each call, loaded for the next
    finally:
        smlocal.cleanup("mme-off")


def counting_client(url: str, mode: str) -> tuple[Any, list[str]]:
    """A runtime client retrying in `mode` (up to 5 attempts), and the list its attempts go into
    (botocore's before-send event fires once per attempt sent)."""
    client = boto3.client(
        "sagemaker-runtime",
        endpoint_url=url,
        config=Config(retries={"mode": mode, "max_attempts": 5}, read_timeout=120),
        **CREDENTIALS,
    )
    attempts: list[str] = []
    client.meta.events.register(
        "before-send.sagemaker-runtime.InvokeEndpoint", lambda request, **_: attempts.append(request.url)
    )
    return client, attempts


def test_a_slow_load_is_model_not_ready_then_served(
    smlocal: Smlocal, rt: Any, s3_client: Any, s3_bucket: str, tmp_path: Path
) -> None:
    """A load longer than the window is a 429 ModelNotReadyException while it goes on. botocore 1.44
    retries it in legacy mode (a 429) but not in standard mode (a modeled error not marked
    retryable): the attempts are counted, not inferred (docs/multi-model.md)."""
    for name in ("a", "b", "c"):
        upload(s3_client, s3_bucket, tmp_path, f"slow/{name}.tar.gz", f"model-{name}")
    described = deploy_mme(smlocal, "mme-slow", f"s3://{s3_bucket}/slow/", {"LOAD_SLEEP_S": "5"})
    assert described["EndpointStatus"] == "InService", described.get("FailureReason")
    try:
        with pytest.raises(ClientError) as caught:  # the window is 3 s here; the load takes 5
            call(rt, "mme-slow", "a.tar.gz")
        code, status, message = error_of(caught.value)
        assert (code, status) == ("ModelNotReadyException", 429)
        assert message.startswith("Model a.tar.gz is not ready yet")
        assert parts(call(rt, "mme-slow", "a.tar.gz"))["loads"] == "1"  # the load went on: served

        standard, sent = counting_client(smlocal.server.url, "standard")
        with pytest.raises(ClientError) as not_retried:
            standard.invoke_endpoint(EndpointName="mme-slow", Body=b"q", TargetModel="b.tar.gz")
        assert error_of(not_retried.value)[:2] == ("ModelNotReadyException", 429)
        assert len(sent) == 1  # standard mode: one attempt of the 5 allowed

        legacy, sent = counting_client(smlocal.server.url, "legacy")
        got = legacy.invoke_endpoint(EndpointName="mme-slow", Body=b"q", TargetModel="c.tar.gz")
        assert parts(got["Body"].read().decode())["loads"] == "1"  # the first attempt's load
        assert len(sent) >= 2  # legacy mode: a 429, then retries until the load's end serves one
    finally:
        smlocal.cleanup("mme-slow")


def test_an_image_without_the_label_fails_the_endpoint(
    smlocal: Smlocal, echo_image: str, s3_bucket: str
) -> None:
    described = deploy_mme(smlocal, "mme-nolabel", f"s3://{s3_bucket}/none/", image=echo_image)
    try:
        assert described["EndpointStatus"] == "Failed"
        assert described["FailureReason"] == (
            f"Your Ecr Image {echo_image} does not contain required "
            "com.amazonaws.sagemaker.capabilities.multi-models=true Docker label(s)."
        )
    finally:
        smlocal.cleanup("mme-nolabel")


def test_a_restart_of_smlocal_keeps_serving(
    tmp_path: Path, mme_image: str, s3_server: str, s3_client: Any, s3_bucket: str, aws_credentials: None
) -> None:
    """The container is adopted with its models still loaded: the new server's load of `a` gets 409
    (loaded: no second load), `b` is loaded on demand, and the instance's folder is reused."""
    for name in ("a", "b"):
        upload(s3_client, s3_bucket, tmp_path, f"kept/{name}.tar.gz", f"model-{name}")
    state = tmp_path / "state"
    first = start_smlocal(state, mme_image, s3_endpoint_url=s3_server, stop_containers=False)
    try:
        assert deploy_mme(first, "mme-kept", f"s3://{s3_bucket}/kept/")["EndpointStatus"] == "InService"
        assert parts(call(first.rt, "mme-kept", "a.tar.gz"))["loads"] == "1"
    finally:
        first.server.stop()  # the container stays, with `a` loaded
    again = start_smlocal(state, mme_image, s3_endpoint_url=s3_server)
    try:
        assert again.wait("mme-kept")["EndpointStatus"] == "InService"
        assert parts(call(again.rt, "mme-kept", "a.tar.gz")) == {
            "body": "q",
            "answer": "model-a",
            "target": "a.tar.gz",
            "loads": "1",
        }
        assert parts(call(again.rt, "mme-kept", "b.tar.gz"))["answer"] == "model-b"
        again.cleanup("mme-kept")
        assert not (state / "multi-model" / "mme-kept").exists() or not any(
            (state / "multi-model" / "mme-kept").iterdir()
        )  # the instance's models went with it
    finally:
        again.server.stop()


def test_smlocal_deploy_multi_model_and_invoke_target_model(
    smlocal: Smlocal, s3_client: Any, s3_bucket: str, tmp_path: Path
) -> None:
    upload(s3_client, s3_bucket, tmp_path, "cli/a.tar.gz", "model-a")
    env = {**os.environ, "SMLOCAL_ENDPOINT_URL": smlocal.server.url}

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "emulator.cli", *argv],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )

    deployed = cli("deploy", smlocal.image, "--multi-model", f"s3://{s3_bucket}/cli/", "--name", "mme-cli")
    try:
        assert deployed.returncode == 0, deployed.stderr
        invoked = cli("invoke", "mme-cli", "--body", "hi", "--target-model", "a.tar.gz")
        assert invoked.returncode == 0, invoked.stderr
        assert invoked.stdout.strip() == "hi|model-a|target=a.tar.gz|loads=1"
    finally:
        smlocal.cleanup("mme-cli")


def test_multi_model_metrics(
    smlocal: Smlocal, rt: Any, s3_client: Any, s3_bucket: str, tmp_path: Path
) -> None:
    """SageMaker's MME metrics through boto3's cloudwatch client and /metrics: hits and misses,
    download, load, wait and unload times, the loaded model count."""
    for name in ("a", "b"):
        upload(s3_client, s3_bucket, tmp_path, f"metered/{name}.tar.gz", f"model-{name}")
    since = datetime.now(UTC) - timedelta(seconds=2)
    described = deploy_mme(smlocal, "mme-metrics", f"s3://{s3_bucket}/metered/", {"MAX_LOADED": "1"})
    assert described["EndpointStatus"] == "InService", described.get("FailureReason")
    cw = boto3.client("cloudwatch", endpoint_url=smlocal.server.url, config=NO_RETRY, **CREDENTIALS)
    dims = [{"Name": "EndpointName", "Value": "mme-metrics"}, {"Name": "VariantName", "Value": "AllTraffic"}]

    def totals(namespace: str, name: str) -> tuple[float, float]:
        points = cw.get_metric_statistics(
            Namespace=namespace,
            MetricName=name,
            Dimensions=dims,
            StartTime=since,
            EndTime=datetime.now(UTC) + timedelta(seconds=5),
            Period=3600,
            Statistics=["Sum", "SampleCount"],
        )["Datapoints"]
        return sum(p["SampleCount"] for p in points), sum(p["Sum"] for p in points)

    try:
        for target in ("a", "a", "a", "b"):  # a: miss, hit, hit; b: miss, 507 -> a unloaded
            call(rt, "mme-metrics", f"{target}.tar.gz")
        assert totals("AWS/SageMaker", "ModelCacheHit") == (4, 2)  # Average: a hit ratio of 0.5
        for name in ("ModelDownloadingTime", "ModelLoadingTime", "ModelLoadingWaitTime"):
            count, total = totals("AWS/SageMaker", name)
            assert count == 2 and total > 0, name
        count, total = totals("AWS/SageMaker", "ModelUnloadingTime")
        assert count == 1 and total > 0

        # A gauge sampled on a timer: a sample taken while a swapped out and b loaded may say 0, so wait
        # for the sample of the settled state (one instance, one model (b) loaded), never more than 1.
        deadline = time.monotonic() + 30
        while True:
            points = cw.get_metric_statistics(
                Namespace="/aws/sagemaker/Endpoints",
                MetricName="LoadedModelCount",
                Dimensions=dims,
                StartTime=datetime.now(UTC) - timedelta(seconds=30),
                EndTime=datetime.now(UTC) + timedelta(seconds=5),
                Period=60,
                Statistics=["Maximum"],
            )["Datapoints"]
            if points and max(p["Maximum"] for p in points) == 1:
                break
            assert not points or max(p["Maximum"] for p in points) < 1, points  # MAX_LOADED=1: never 2
            assert time.monotonic() < deadline, f"no LoadedModelCount sample of 1: {points}"
            time.sleep(0.25)
        listed = cw.list_metrics(
            Namespace="AWS/SageMaker", Dimensions=[{"Name": "EndpointName", "Value": "mme-metrics"}]
        )
        assert {"ModelCacheHit", "ModelLoadingTime"} <= {m["MetricName"] for m in listed["Metrics"]}
        text = httpx.get(f"{smlocal.server.url}/metrics", timeout=10).text
        labels = 'endpoint_name="mme-metrics",variant_name="AllTraffic"'
        assert f"sagemaker_model_cache_hit_sum{{{labels}}} 2" in text.splitlines()
        assert f"sagemaker_model_cache_hit_count{{{labels}}} 4" in text.splitlines()
    finally:
        smlocal.cleanup("mme-metrics")


def test_a_local_folder_prefix(smlocal: Smlocal, rt: Any, tmp_path: Path) -> None:
    """smlocal's extension: ModelDataUrl a local folder of *.tar.gz (inside the allowed roots)."""
    prefix = tmp_path / "models"
    mme_artifact(prefix / "x.tar.gz", "model-x")
    mme_artifact(prefix / "deep" / "y.tar.gz", "model-y")
    assert deploy_mme(smlocal, "mme-local", str(prefix))["EndpointStatus"] == "InService"
    try:
        assert parts(call(rt, "mme-local", "x.tar.gz"))["answer"] == "model-x"
        assert parts(call(rt, "mme-local", "deep/y.tar.gz"))["answer"] == "model-y"
        with pytest.raises(ClientError) as caught:
            call(rt, "mme-local", "z.tar.gz")
        code, status, message = error_of(caught.value)
        assert (code, status) == ("ValidationError", 400)
        assert message.startswith(f"Failed to download model data (bucket: {prefix}, key: z.tar.gz).")
    finally:
        smlocal.cleanup("mme-local")


def test_memory_and_disk_budgets(
    tmp_path: Path, mme_image: str, s3_server: str, s3_client: Any, s3_bucket: str, aws_credentials: None
) -> None:
    """An instance whose memory holds one of these models and whose disk holds two: loading the second
    unloads the first (no 507 needed), and the third deletes the least recently used from disk."""
    pad = 60 << 10  # each model: ~60 KiB extracted; memory ~98 KiB, disk ~157 KiB
    for name in ("a", "b", "c"):
        artifact = mme_artifact(tmp_path / f"{name}.tar.gz", f"model-{name}", pad_bytes=pad)
        s3_client.upload_file(str(artifact), s3_bucket, f"budget/{name}.tar.gz")
    env = start_smlocal(
        tmp_path / "state",
        mme_image,
        s3_endpoint_url=s3_server,
        instance_memory_gb=(("ml.m5.large", 0.0001),),
        instance_volume_gb=(("ml.m5.large", 0.00015),),
    )
    try:
        assert deploy_mme(env, "mme-budget", f"s3://{s3_bucket}/budget/")["EndpointStatus"] == "InService"
        (instance,) = (env.state_dir / "multi-model" / "mme-budget").iterdir()
        on_disk = lambda: sorted(p.name for p in instance.iterdir())  # noqa: E731
        assert parts(call(env.rt, "mme-budget", "a.tar.gz"))["loads"] == "1"
        assert parts(call(env.rt, "mme-budget", "b.tar.gz"))["loads"] == "1"  # a unloaded to make room
        assert on_disk() == sorted([model_name("a.tar.gz"), model_name("b.tar.gz")])  # unloaded stays on disk
        assert parts(call(env.rt, "mme-budget", "a.tar.gz"))["loads"] == "2"  # from disk: loaded again
        assert parts(call(env.rt, "mme-budget", "c.tar.gz"))["answer"] == "model-c"
        # the disk holds two: b, not loaded and least recently used, was deleted for c
        assert on_disk() == sorted([model_name("a.tar.gz"), model_name("c.tar.gz")])
        env.cleanup("mme-budget")
    finally:
        env.server.stop()


def test_target_tracking_scales_a_multi_model_variant_out(
    smlocal: Smlocal, rt: Any, s3_client: Any, s3_bucket: str, tmp_path: Path
) -> None:
    """InvocationsPerInstance drives a multi-model variant as any other: under load it scales out,
    and every call is served meanwhile (the new instance loads models on demand)."""
    upload(s3_client, s3_bucket, tmp_path, "scaled/a.tar.gz", "model-a")
    assert deploy_mme(smlocal, "mme-scaled", f"s3://{s3_bucket}/scaled/")["EndpointStatus"] == "InService"
    aas = boto3.client(
        "application-autoscaling", endpoint_url=smlocal.server.url, config=NO_RETRY, **CREDENTIALS
    )
    target = {
        "ServiceNamespace": "sagemaker",
        "ResourceId": "endpoint/mme-scaled/variant/AllTraffic",
        "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
    }
    try:
        aas.register_scalable_target(**target, MinCapacity=1, MaxCapacity=2)
        aas.put_scaling_policy(
            PolicyName="per-instance",
            **target,
            PolicyType="TargetTrackingScaling",
            TargetTrackingScalingPolicyConfiguration={
                "TargetValue": 5.0,
                "PredefinedMetricSpecification": {
                    "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"
                },
                "ScaleOutCooldown": 60,
                "ScaleInCooldown": 3600,
                "DisableScaleIn": True,
            },
        )
        deadline = time.monotonic() + 60
        served = 0
        while True:  # ~50 calls per policy minute (a second here): 10x the target on one instance
            assert parts(call(rt, "mme-scaled", "a.tar.gz"))["answer"] == "model-a"
            served += 1
            variant = smlocal.sm.describe_endpoint(EndpointName="mme-scaled")["ProductionVariants"][0]
            if variant["CurrentInstanceCount"] == 2:
                break
            assert time.monotonic() < deadline, "no scale-out"
            time.sleep(0.02)
        assert smlocal.wait("mme-scaled")["EndpointStatus"] == "InService"
        for _ in range(5):
            assert parts(call(rt, "mme-scaled", "a.tar.gz"))["answer"] == "model-a"
        assert served > 10
    finally:
        aas.deregister_scalable_target(**target)
        smlocal.cleanup("mme-scaled")


def test_concurrent_calls_over_more_models_than_fit_are_all_served(
    roomy: Smlocal, roomy_rt: Any, s3_client: Any, s3_bucket: str, tmp_path: Path
) -> None:
    """60 concurrent calls over 6 models on a container that holds 2 (it answers 507 beyond): a load
    that finds every loaded model busy waits for one to become idle instead of failing (issue 23)."""
    names = [f"m{i}" for i in range(6)]
    for name in names:
        upload(s3_client, s3_bucket, tmp_path, f"crowd/{name}.tar.gz", f"model-{name}")
    env = {"MAX_LOADED": "2", "LOAD_SLEEP_S": "0.1"}
    described = deploy_mme(roomy, "mme-crowd", f"s3://{s3_bucket}/crowd/", env)
    assert described["EndpointStatus"] == "InService", described.get("FailureReason")

    def one(i: int) -> str:
        name = names[i % len(names)]
        try:
            return parts(call(roomy_rt, "mme-crowd", f"{name}.tar.gz"))["answer"]
        except ClientError as exc:
            return "failed: {} {} {}".format(*error_of(exc))

    try:
        with concurrent.futures.ThreadPoolExecutor(60) as pool:
            answers = list(pool.map(one, range(60)))
        failed = [a for a in answers if a.startswith("failed")]
        assert not failed, f"{len(failed)} of 60 failed, e.g. {failed[0]}"
        assert answers == [f"model-{names[i % 6]}" for i in range(60)]
    finally:
        roomy.cleanup("mme-crowd")


@pytest.mark.parametrize("how", ["slow", "stall"])
def test_a_delete_during_a_load_stops_the_download_and_leaves_nothing(
    how: str,
    tmp_path: Path,
    mme_image: str,
    s3_server: str,
    s3_client: Any,
    s3_bucket: str,
    aws_credentials: None,
) -> None:
    """DeleteEndpoint while a model downloads slowly (320 KiB/s, ~13 s for this one) or from a source
    that stalled (one piece, then nothing for 60 s): the stop cancels the load, its download stops at
    once (the next chunk, or its socket shut down) and its temporary files go, no model folder is
    left, and the waiting call is answered (issue 23: 1 of 3 deletions left 96 MiB behind)."""
    artifact = mme_artifact(tmp_path / "big.tar.gz", "model-big", pad_bytes=4 << 20)
    s3_client.upload_file(str(artifact), s3_bucket, f"deleted/{how}/big.tar.gz")
    with slow_s3_proxy(s3_server) as proxy:
        env = start_smlocal(tmp_path / "state", mme_image, s3_endpoint_url=proxy, model_load_window_s=60.0)
        try:
            assert (
                deploy_mme(env, "mme-deleted", f"s3://{s3_bucket}/deleted/")["EndpointStatus"] == "InService"
            )
            (instance,) = (env.state_dir / "multi-model" / "mme-deleted").iterdir()
            downloads = lambda: [p for p in env.state_dir.glob("artifacts/**/tmp/*")]  # noqa: E731
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                pending = pool.submit(call, env.rt, "mme-deleted", f"{how}/big.tar.gz")
                wait_for("the download to start", downloads, timeout_s=30)
                began = time.monotonic()
                env.cleanup("mme-deleted")  # DeleteEndpoint, then until the deletion is done
                assert time.monotonic() - began < 20  # the stall would hold it for 60 s
                assert downloads() == []  # stopped at once (it had seconds to go), its file removed
                assert not instance.exists()
                with pytest.raises(ClientError) as caught:
                    pending.result(timeout=30)
            assert error_of(caught.value)[:2] == ("ModelError", 424)
            assert "its instance was stopped while the model was being loaded" in error_of(caught.value)[2]
            assert not (env.state_dir / "multi-model" / "mme-deleted").exists() or not any(
                (env.state_dir / "multi-model" / "mme-deleted").iterdir()
            )
        finally:
            env.server.stop()


def test_names_that_are_not_there_leave_no_entry(
    smlocal: Smlocal, rt: Any, s3_client: Any, s3_bucket: str, tmp_path: Path
) -> None:
    """300 TargetModels that do not exist: each is the not-found 400, and the instance keeps no entry
    for any of them (issue 23: 3,000 bad names left 3,000 entries in memory)."""
    upload(s3_client, s3_bucket, tmp_path, "names/a.tar.gz", "model-a")
    assert deploy_mme(smlocal, "mme-names", f"s3://{s3_bucket}/names/")["EndpointStatus"] == "InService"
    assert smlocal.server.service is not None
    host = smlocal.server.service.multi_model

    def bad(i: int) -> tuple[str, int]:
        with pytest.raises(ClientError) as caught:
            call(rt, "mme-names", f"missing-{i}.tar.gz")
        code, status, _ = error_of(caught.value)
        return code, status

    try:
        assert parts(call(rt, "mme-names", "a.tar.gz"))["answer"] == "model-a"
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            assert set(pool.map(bad, range(300))) == {("ValidationError", 400)}
        assert host.tracked_models() == 1  # a, loaded; nothing for the 300 names
    finally:
        smlocal.cleanup("mme-names")


def test_the_host_cache_of_models_stays_within_its_budget(
    tmp_path: Path, mme_image: str, s3_server: str, s3_client: Any, s3_bucket: str, aws_credentials: None
) -> None:
    """12 models of ~100 KiB through an instance whose memory holds 2, whose disk holds 3, and a host
    cache that holds 4: the
    instance's folder and the cache both keep their budgets (issue 23: the cache grew 15x the
    instance's budget), and an evicted model is downloaded again when asked for."""
    for i in range(12):
        artifact = mme_artifact(tmp_path / f"c{i}.tar.gz", f"model-c{i}", pad_bytes=100 << 10)
        s3_client.upload_file(str(artifact), s3_bucket, f"cached/c{i}.tar.gz")
    budget = 450 << 10
    env = start_smlocal(
        tmp_path / "state",
        mme_image,
        s3_endpoint_url=s3_server,
        instance_memory_gb=(("ml.m5.large", (250 << 10) / 1024**3),),
        instance_volume_gb=(("ml.m5.large", (350 << 10) / 1024**3),),
        multi_model_cache_gb=budget / 1024**3,
    )
    cache = env.state_dir / "artifacts" / "multi-model" / "models"
    try:
        assert deploy_mme(env, "mme-cached", f"s3://{s3_bucket}/cached/")["EndpointStatus"] == "InService"
        (instance,) = (env.state_dir / "multi-model" / "mme-cached").iterdir()
        for i in [*range(12), 0]:
            assert parts(call(env.rt, "mme-cached", f"c{i}.tar.gz"))["answer"] == f"model-c{i}"
            assert tree_bytes(cache) <= budget and len(list(cache.iterdir())) <= 4
            assert tree_bytes(instance) <= 350 << 10
        assert len(list(cache.iterdir())) == 4
        env.cleanup("mme-cached")
    finally:
        env.server.stop()


def test_a_call_whose_instance_is_retired_mid_load_is_served_by_the_new_one(
    tmp_path: Path, mme_image: str, s3_server: str, s3_client: Any, s3_bucket: str, aws_credentials: None
) -> None:
    """UpdateEndpoint (blue/green) while a call waits for a slow load on the old instance: the old
    instance's stop cancels the load and the call goes to the new fleet's instance, where it is
    served (not failed: SageMaker would have served it)."""
    upload(s3_client, s3_bucket, tmp_path, "retired/a.tar.gz", "model-a")
    env = start_smlocal(tmp_path / "state", mme_image, s3_endpoint_url=s3_server, model_load_window_s=60.0)
    try:
        slow = deploy_mme(env, "mme-retired", f"s3://{s3_bucket}/retired/", {"LOAD_SLEEP_S": "30"})
        assert slow["EndpointStatus"] == "InService"
        env.sm.create_model(
            ModelName="mme-retired-fast",
            PrimaryContainer={
                "Image": mme_image,
                "Mode": "MultiModel",
                "ModelDataUrl": f"s3://{s3_bucket}/retired/",
            },
        )
        variant = {
            "VariantName": "AllTraffic",
            "ModelName": "mme-retired-fast",
            "InitialInstanceCount": 1,
            "InstanceType": "ml.m5.large",
        }
        env.sm.create_endpoint_config(EndpointConfigName="mme-retired-fast", ProductionVariants=[variant])
        (instance,) = (env.state_dir / "multi-model" / "mme-retired").iterdir()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pending = pool.submit(call, env.rt, "mme-retired", "a.tar.gz")
            # linked into the old instance's folder: its 30 s load is under way
            wait_for("the slow load to start", lambda: (instance / model_name("a.tar.gz")).is_dir(), 30)
            env.sm.update_endpoint(EndpointName="mme-retired", EndpointConfigName="mme-retired-fast")
            answer = parts(pending.result(timeout=60))
        assert answer["answer"] == "model-a" and answer["loads"] == "1"  # loaded by the new container
        status = lambda: env.sm.describe_endpoint(EndpointName="mme-retired")["EndpointStatus"]  # noqa: E731
        wait_for("the update to end", lambda: status() != "Updating", 60)
        assert status() == "InService"
        assert not instance.exists()
        env.cleanup("mme-retired")
        env.sm.delete_endpoint_config(EndpointConfigName="mme-retired-fast")
        env.sm.delete_model(ModelName="mme-retired-fast")
    finally:
        env.server.stop()


def test_a_steady_load_over_more_models_than_fit_is_all_served(
    roomy: Smlocal, roomy_rt: Any, s3_client: Any, s3_bucket: str, tmp_path: Path
) -> None:
    """12 clients calling back to back (10 calls each) over 6 models on a container that holds 2: a
    loaded model is always wanted by some client, so a load waiting for room gets the next model to
    become idle handed over (it is not given to a new call first) and every call is served."""
    names = [f"s{i}" for i in range(6)]
    for name in names:
        upload(s3_client, s3_bucket, tmp_path, f"steady/{name}.tar.gz", f"model-{name}")
    described = deploy_mme(roomy, "mme-steady", f"s3://{s3_bucket}/steady/", {"MAX_LOADED": "2"})
    assert described["EndpointStatus"] == "InService", described.get("FailureReason")

    def client(k: int) -> list[str]:
        answers = []
        for j in range(10):
            name = names[(k + j) % len(names)]
            try:
                answers.append(parts(call(roomy_rt, "mme-steady", f"{name}.tar.gz"))["answer"])
            except ClientError as exc:
                answers.append("failed: {} {} {}".format(*error_of(exc)))
        return answers

    try:
        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            answers = [a for got in pool.map(client, range(12)) for a in got]
        failed = [a for a in answers if a.startswith("failed")]
        assert not failed, f"{len(failed)} of 120 failed, e.g. {failed[0]}"
    finally:
        roomy.cleanup("mme-steady")
