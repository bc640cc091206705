"""`smlocal serve` builds its ServerConfig from the command line (here: --time-scale)."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulator.cli import build_parser, main
from emulator.config import ServerConfig


def test_time_scale_reaches_the_config(served: list[ServerConfig], tmp_path: Path) -> None:
    assert main(["serve", "--state-dir", str(tmp_path), "--time-scale", "60"]) == 0
    (config,) = served
    assert config.time_scale == 60.0
    assert config.metrics_period_real_s == 1.0
    assert config.real_seconds(300) == 5.0
    assert config.limits.startup_timeout_s == 480.0  # contract timeouts are not scaled
    assert config.limits.invocation_timeout_s == 60.0


def test_time_scale_defaults_to_one(served: list[ServerConfig], tmp_path: Path) -> None:
    assert main(["serve", "--state-dir", str(tmp_path)]) == 0
    assert served[0].time_scale == 1.0 and served[0].metrics_period_real_s == 60.0


@pytest.mark.parametrize("value", ["0", "-2", "nan", "inf", "fast"])
def test_time_scale_must_be_a_positive_number(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["serve", "--time-scale", value])
    assert exc.value.code == 2
    assert "--time-scale" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("options", "rule"),
    [([], "local-warns"), (["--strict-images"], "strict"), (["--any-registry"], "any")],
)
def test_the_registry_rule_reaches_the_config(
    served: list[ServerConfig], tmp_path: Path, options: list[str], rule: str
) -> None:
    assert main(["serve", "--state-dir", str(tmp_path), *options]) == 0
    assert served[0].registry_rule == rule


def test_strict_images_and_any_registry_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["serve", "--strict-images", "--any-registry"])
    assert exc.value.code == 2
    assert "argument --any-registry: not allowed with argument --strict-images" in capsys.readouterr().err


@pytest.mark.parametrize(("options", "on"), [([], True), (["--no-instance-limits"], False)])
def test_no_instance_limits_reaches_the_config(
    served: list[ServerConfig], tmp_path: Path, options: list[str], on: bool
) -> None:
    assert main(["serve", "--state-dir", str(tmp_path), *options]) == 0
    assert served[0].instance_limits is on
