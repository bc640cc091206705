"""The write probe's mount (emulator.runtime.docker_run): /opt/ml/model as an overlay whose lower layer is
the model dir (never written) and whose upper layer is the probe's own folder; nothing else changes."""

from __future__ import annotations

from pathlib import Path

from emulator.runtime.base import ContainerSpec
from emulator.runtime.docker_run import create_options


def spec(**fields: object) -> ContainerSpec:
    return ContainerSpec(image="img", name="n", labels={}, **fields)  # type: ignore[arg-type]


def test_the_overlay_replaces_the_bind_mount_of_the_model_dir(tmp_path: Path) -> None:
    model, probe = tmp_path / "model", tmp_path / "probe"
    (mount,) = create_options(spec(model_dir=model, model_dir_overlay=probe))["mounts"]
    assert mount["Target"] == "/opt/ml/model" and mount["Type"] == "volume"
    assert mount["ReadOnly"] is False and mount.get("Source") is None
    assert mount["VolumeOptions"]["DriverConfig"] == {
        "Name": "local",
        "Options": {
            "type": "overlay",
            "device": "overlay",
            "o": f"lowerdir={model},upperdir={probe}/upper,workdir={probe}/work",
        },
    }


def test_without_it_the_model_dir_is_bound_read_only(tmp_path: Path) -> None:
    (mount,) = create_options(spec(model_dir=tmp_path))["mounts"]
    assert (mount["Type"], mount["Source"], mount["ReadOnly"]) == ("bind", str(tmp_path), True)
