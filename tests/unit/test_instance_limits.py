"""The instance a container gets (hosting/fleet/instance_limits.py): each container's memory limit,
CPU share and GPUs from the instance type table, capped at the host; off by option or model tag; the
deploy's warnings and the out-of-memory texts."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from emulator.config import ServerConfig
from emulator.hosting.fleet import instance_limits
from emulator.hosting.fleet.instance_limits import InstanceLimits, limits_for
from emulator.hosting.fleet.plan import VariantPlan
from emulator.model import instance_types, messages
from emulator.model.resources import ContainerDefinition, Model, ProductionVariant, ServerlessConfig
from emulator.runtime.base import HostResources, ResolvedImage

GIB = 2**30
BIG_HOST = HostResources(memory_bytes=2048 * GIB, cpus=256, nvidia_runtime=True)
SMALL_HOST = HostResources(memory_bytes=3 * GIB, cpus=2, nvidia_runtime=False)


def model(tags: tuple[tuple[str, str], ...] = ()) -> Model:
    return Model("m", "arn:m", ContainerDefinition("img"), datetime.now(UTC), tags=tags)


def plan(instance_type: str = "ml.m5.large", tags: tuple[tuple[str, str], ...] = ()) -> VariantPlan:
    variant = ProductionVariant("AllTraffic", "m", instance_type=instance_type)
    return VariantPlan("e", variant, model(tags), ResolvedImage("img", "img", "sha256:1"), None)


def test_a_cpu_type_gets_its_memory_and_vcpus() -> None:
    limits = limits_for("ml.m5.large", True, BIG_HOST)
    assert (limits.memory_limit_bytes, limits.cpus, limits.gpus, limits.gpu_count) == (
        8 * GIB,
        2.0,
        False,
        None,
    )
    assert limits.spec_fields() == {
        "memory_limit_bytes": 8 * GIB,
        "cpus": 2.0,
        "gpus": False,
        "gpu_count": None,
    }
    assert limits.out_of_memory() == "out of memory at 8 GiB (ml.m5.large has 8 GiB)"


def test_a_gpu_type_asks_for_its_gpu_count() -> None:
    limits = limits_for("ml.g5.12xlarge", True, BIG_HOST)
    assert (limits.memory_limit_bytes, limits.cpus, limits.gpus, limits.gpu_count) == (
        192 * GIB,
        48.0,
        True,
        4,
    )
    one = limits_for("ml.g5.xlarge", True, BIG_HOST)
    assert (one.gpus, one.gpu_count) == (True, 1)


def test_inferentia_and_trainium_get_no_nvidia_device_request() -> None:
    limits = limits_for("ml.inf2.xlarge", True, BIG_HOST)
    assert limits.gpus is False and limits.gpu_count is None


def test_a_small_host_caps_memory_and_cpus_and_the_deploy_says_so() -> None:
    limits = limits_for("ml.m5.large", True, SMALL_HOST)
    assert (limits.memory_limit_bytes, limits.cpus) == (3 * GIB, 2.0)
    assert limits.out_of_memory() == "out of memory at 3 GiB (ml.m5.large has 8 GiB)"
    assert instance_limits.deploy_warnings("ml.m5.large", True, SMALL_HOST) == [
        "warning: ml.m5.large has 8 GiB of memory, this machine 3 GiB: its containers run with 3 GiB"
    ]
    assert limits_for("ml.c5.4xlarge", True, SMALL_HOST).cpus == 2.0  # 16 vCPUs on 2 cores


def test_missing_gpus_are_said_once_and_still_asked_for() -> None:
    assert instance_limits.deploy_warnings("ml.g5.xlarge", True, SMALL_HOST) == [
        "warning: ml.g5.xlarge has 16 GiB of memory, this machine 3 GiB: its containers run with 3 GiB",
        "warning: ml.g5.xlarge has 1 NVIDIA A10G, but the Docker engine has no NVIDIA runtime: its "
        "containers run without GPUs",
    ]
    assert limits_for("ml.g5.xlarge", True, SMALL_HOST).gpus is True  # the runtime falls back, warning
    assert instance_limits.deploy_warnings("ml.g5.xlarge", True, BIG_HOST) == []


def test_a_type_the_table_does_not_know_runs_unlimited_with_a_warning() -> None:
    assert limits_for("ml.zz9.large", True, BIG_HOST) == InstanceLimits(None)
    assert instance_limits.deploy_warnings("ml.zz9.large", True, BIG_HOST) == [
        "warning: smlocal has no figures for ml.zz9.large: its containers run without memory, CPU or "
        "GPU limits"
    ]
    assert InstanceLimits(None).out_of_memory() is None


def test_off_means_no_limits_and_no_warnings() -> None:
    limits = limits_for("ml.g5.xlarge", False, SMALL_HOST)
    assert limits.spec_fields() == {
        "memory_limit_bytes": None,
        "cpus": None,
        "gpus": False,
        "gpu_count": None,
    }
    assert instance_limits.deploy_warnings("ml.g5.xlarge", False, SMALL_HOST) == []


def test_an_unknown_host_applies_the_type_uncapped() -> None:
    assert limits_for("ml.m5.4xlarge", True, None).spec_fields()["memory_limit_bytes"] == 64 * GIB


@pytest.mark.parametrize(
    ("tags", "setting"),
    [
        ((), None),
        ((("smlocal:instance-limits", "off"),), False),
        ((("smlocal:instance-limits", " OFF "),), False),
        ((("smlocal:instance-limits", "on"),), True),
        ((("smlocal:instance-limits", "maybe"),), None),
        ((("other", "off"),), None),
    ],
)
def test_the_model_tag(tags: tuple[tuple[str, str], ...], setting: bool | None) -> None:
    assert instance_limits.tag_setting(tags) is setting


def test_the_server_option_and_the_model_tag_turn_limits_off(tmp_path: Path) -> None:
    on, off = ServerConfig(state_dir=tmp_path), ServerConfig(state_dir=tmp_path, instance_limits=False)
    assert instance_limits.enabled(on, model()) is True
    assert instance_limits.enabled(off, model()) is False
    assert instance_limits.enabled(on, model((("smlocal:instance-limits", "off"),))) is False
    assert instance_limits.enabled(off, model((("smlocal:instance-limits", "on"),))) is False  # server wins


def test_a_tag_not_understood_is_warned_and_the_limits_stay_on(tmp_path: Path) -> None:
    config = ServerConfig(state_dir=tmp_path)
    odd = plan(tags=(("smlocal:instance-limits", "VariantA=off"),))
    assert instance_limits.plan_warnings(config, odd, BIG_HOST) == [
        "warning: tag smlocal:instance-limits='VariantA=off' is not understood (give 'off' or 'on'): "
        "instance limits stay on"
    ]
    assert (
        instance_limits.variant_limits(config, odd.variant, odd.model, BIG_HOST).memory_limit_bytes == 8 * GIB
    )


def test_a_serverless_variant_keeps_its_memory_size(tmp_path: Path) -> None:
    config = ServerConfig(state_dir=tmp_path, instance_limits=False)
    variant = ProductionVariant("v", "m", serverless=ServerlessConfig(2048, 5))
    limits = instance_limits.variant_limits(config, variant, model(), BIG_HOST)
    assert (limits.memory_limit_bytes, limits.cpus, limits.gpus) == (2048 * 2**20, 1.0, False)
    serverless_plan = VariantPlan("e", variant, model(), ResolvedImage("i", "i", "sha256:1"), None)
    assert instance_limits.plan_warnings(config, serverless_plan, SMALL_HOST) == []


def test_the_spec_digest_changes_only_when_limits_are_off(tmp_path: Path) -> None:
    on = ServerConfig(state_dir=tmp_path)
    off = ServerConfig(state_dir=tmp_path, instance_limits=False)
    p = plan()
    assert instance_limits.spec_digest(on, p) == p.spec_digest(on.limits.container_port)
    assert instance_limits.spec_digest(off, p) != instance_limits.spec_digest(on, p)
    tagged = plan(tags=(("smlocal:instance-limits", "off"),))
    assert instance_limits.spec_digest(on, tagged) == instance_limits.spec_digest(off, p)


def test_the_multi_model_memory_budget_comes_from_the_table(tmp_path: Path) -> None:
    config = ServerConfig(state_dir=tmp_path, instance_memory_gb=(("ml.m5.large", 0.5),))
    assert instance_limits.instance_memory_bytes(config, "ml.m5.large") == 0.5 * GIB
    assert instance_limits.instance_memory_bytes(config, "ml.c5.large") == 4 * GIB
    assert instance_limits.instance_memory_bytes(config, "ml.p4d.24xlarge") == 1152 * GIB
    assert instance_limits.instance_memory_bytes(config, "ml.zz9.large") == 8 * GIB  # [U] default
    assert instance_limits.instance_memory_bytes(config, None) == 8 * GIB


def test_every_table_type_gets_limits() -> None:
    for name, found in instance_types.INSTANCE_TYPES.items():
        limits = limits_for(name, True, None)
        assert limits.memory_limit_bytes == found.memory_bytes and limits.cpus == found.vcpus
        assert limits.gpu_count == (found.gpus or None)


def test_the_failure_reason_of_a_container_killed_at_start() -> None:
    line = messages.out_of_memory(4 * GIB, "ml.c5.large", 4.0)
    assert messages.out_of_memory_at_start("AllTraffic", line) == (
        "CannotStartContainerError. Please ensure the model container for variant AllTraffic starts "
        "correctly when invoked with 'docker run <image> serve'. The container was killed: out of memory "
        "at 4 GiB (ml.c5.large has 4 GiB)"
    )
    assert messages.out_of_memory(int(4.5 * GIB), "ml.c5.large", 4.0).startswith("out of memory at 4.5 GiB")
