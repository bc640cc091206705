"""The instance quota: its rule (model/quota.py), its text (SageMaker's), and `smlocal serve
--instance-quota` reaching the config."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from emulator.cli import build_parser, main
from emulator.config import DEFAULT_INSTANCE_QUOTA, ServerConfig
from emulator.errors import ResourceLimitExceeded
from emulator.model.quota import InstanceQuota, instances
from emulator.model.resources import ProductionVariant, ServerlessConfig
from tests.fixtures.no_engine import engine_free_server

TEXT = (
    "The account-level service limit 'ml.g5.xlarge for endpoint usage' is 2 Instances, with current "
    "utilization of 1 Instances and a request delta of 2 Instances. Please use AWS Service Quotas to request "
    "an increase for this quota. If AWS Service Quotas is not available, contact AWS support to request an "
    "increase for this quota."
)


def test_a_change_past_a_types_limit_is_refused_in_sagemakers_words() -> None:
    quota = InstanceQuota(10, (("ml.g5.xlarge", 2),))
    with pytest.raises(ResourceLimitExceeded) as info:
        quota.check({"ml.g5.xlarge": 1, "ml.m5.large": 9}, {"ml.g5.xlarge": 2, "ml.m5.large": 1})
    assert info.value.message == TEXT


@pytest.mark.parametrize(
    ("utilization", "delta"),
    [
        ({"ml.m5.large": 9}, {"ml.m5.large": 1}),  # exactly at the limit
        ({"ml.m5.large": 12}, {"ml.m5.large": 0}),  # over it already (a lowered quota): no new instance
        ({"ml.m5.large": 12}, {"ml.m5.large": -3}),  # scaling in is always allowed
        ({}, {"ml.g5.xlarge": 2}),
    ],
)
def test_within_the_limits_nothing_is_refused(utilization: dict[str, int], delta: dict[str, int]) -> None:
    InstanceQuota(10, (("ml.g5.xlarge", 2),)).check(utilization, delta)


def test_serverless_variants_hold_no_instances() -> None:
    variants = [
        ProductionVariant("a", "m", 3, "ml.m5.large"),
        ProductionVariant("b", "m", 2, "ml.m5.large"),
        ProductionVariant("c", "m", 1, None, serverless=ServerlessConfig(2048, 5)),
    ]
    assert instances(variants) == {"ml.m5.large": 5}


def test_the_option_reaches_the_config(served: list[ServerConfig], tmp_path: Path) -> None:
    argv = ["serve", "--state-dir", str(tmp_path), "--instance-quota", "5"]
    assert main([*argv, "--instance-quota", "ml.g5.xlarge=1", "--instance-quota", "ml.p4d.24xlarge=0"]) == 0
    (config,) = served
    assert config.instance_quota == 5
    assert config.instance_quota_by_type == (("ml.g5.xlarge", 1), ("ml.p4d.24xlarge", 0))


def test_the_default_quota(served: list[ServerConfig], tmp_path: Path) -> None:
    assert main(["serve", "--state-dir", str(tmp_path)]) == 0
    assert (served[0].instance_quota, served[0].instance_quota_by_type) == (DEFAULT_INSTANCE_QUOTA, ())
    assert DEFAULT_INSTANCE_QUOTA == 20


@pytest.mark.parametrize(
    ("value", "says"),
    [("-1", "cannot be negative"), ("many", "expected N or TYPE=N"), ("=3", "instance type must come")],
)
def test_a_bad_quota_is_refused(value: str, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["serve", "--instance-quota", value])
    assert exc.value.code == 2
    assert "--instance-quota" in (err := capsys.readouterr().err) and says in err


def test_a_server_refuses_100_instances_with_its_default_quota(tmp_path: Path) -> None:
    """A real server on 127.0.0.1 (no container engine: nothing could start anyway) with the default
    config: CreateEndpoint with InitialInstanceCount 100 is ResourceLimitExceeded at once (it was
    accepted, and a real engine then started 100 containers)."""
    server = engine_free_server(tmp_path / "state", known_images=frozenset({"quota-image:1"}))
    try:
        sm = boto3.client(
            "sagemaker",
            endpoint_url=server.url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=Config(retries={"mode": "standard", "max_attempts": 3}),
        )
        sm.create_model(ModelName="m", PrimaryContainer={"Image": "quota-image:1"})
        variant = {
            "VariantName": "v",
            "ModelName": "m",
            "InitialInstanceCount": 100,
            "InstanceType": "ml.m5.large",
        }
        sm.create_endpoint_config(EndpointConfigName="c", ProductionVariants=[variant])
        with pytest.raises(ClientError) as info:
            sm.create_endpoint(EndpointName="e", EndpointConfigName="c")
        error = info.value.response["Error"]
        assert (
            info.value.response["ResponseMetadata"]["HTTPStatusCode"],
            error["Code"],
            error["Message"],
        ) == (
            400,
            "ResourceLimitExceeded",
            "The account-level service limit 'ml.m5.large for endpoint usage' is 20 Instances, with current "
            "utilization of 0 Instances and a request delta of 100 Instances. Please use AWS Service Quotas to "
            "request an increase for this quota. If AWS Service Quotas is not available, contact AWS support "
            "to request an increase for this quota.",
        )
        assert info.value.response["ResponseMetadata"]["RetryAttempts"] == 0
        assert sm.list_endpoints()["Endpoints"] == []
    finally:
        server.stop()
