"""The instance quota: its rule (model/quota.py), its text (SageMaker's), and `smlocal serve
--instance-quota` reaching the config."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulator.cli import build_parser, main
from emulator.config import DEFAULT_INSTANCE_QUOTA, ServerConfig
from emulator.errors import ResourceLimitExceeded
from emulator.model.quota import InstanceQuota, instances
from emulator.model.resources import ProductionVariant, ServerlessConfig

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
