"""smlocal's local base image without an engine (issue 24 item 12): an engine holding a base of an
older revision (before pip) gets it rebuilt once, a current one is reused, and the rootfs loses
Debian's PEP 668 marker so that `pip install` works as in python:3.11-slim."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from docker.errors import ImageNotFound

from emulator.runtime import base_image, images


class FakeImage:
    def __init__(self, labels: dict[str, str] | None) -> None:
        self.labels = labels


class FakeImages:
    def __init__(self, held: dict[str, dict[str, str] | None]) -> None:
        self.held = held

    def get(self, name: str) -> FakeImage:
        if name not in self.held:
            raise ImageNotFound(name)
        return FakeImage(self.held[name])


class FakeClient:
    def __init__(self, held: dict[str, dict[str, str] | None]) -> None:
        self.images = FakeImages(held)


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names build_local_base_image was asked for (no pull succeeds: no registry)."""
    built: list[str] = []

    def build(client: Any, log: Any, name: str) -> str:
        built.append(name)
        return name

    monkeypatch.setattr(base_image, "_try_pull", lambda image, log: False)
    monkeypatch.setattr(base_image, "build_local_base_image", build)
    return built


CURRENT = {"smlocal.managed": "true", base_image.REVISION_LABEL: base_image.BASE_REVISION}


@pytest.mark.parametrize(
    ("held", "rebuilt"),
    [
        ({}, True),  # none yet
        ({"smlocal-base:py3.11-bookworm": {"smlocal.managed": "true"}}, True),  # revision 1: no pip
        ({"smlocal-base:py3.11-bookworm": {**CURRENT, base_image.REVISION_LABEL: "1"}}, True),
        ({"smlocal-base:py3.11-bookworm": None}, True),  # no labels at all
        ({"smlocal-base:py3.11-bookworm": CURRENT}, False),
    ],
)
def test_a_local_base_of_another_revision_is_rebuilt(
    builds: list[str], held: dict[str, dict[str, str] | None], rebuilt: bool
) -> None:
    lines: list[str] = []
    client: Any = FakeClient(held)
    assert base_image.ensure_base_image(client, lines.append) == "smlocal-base:py3.11-bookworm"
    assert builds == (["smlocal-base:py3.11-bookworm"] if rebuilt else [])
    if held and rebuilt:
        assert lines == [
            f"smlocal-base:py3.11-bookworm is revision {(held['smlocal-base:py3.11-bookworm'] or {}).get(base_image.REVISION_LABEL) or '1'} "
            f"of smlocal's base, this smlocal builds {base_image.BASE_REVISION}"
        ]


def test_python_slim_when_the_engine_has_it_and_another_name_when_asked(builds: list[str]) -> None:
    client: Any = FakeClient({"python:3.11-slim": {}})
    assert base_image.ensure_base_image(client, print) == "python:3.11-slim"
    client = FakeClient({"other-base:1": CURRENT})
    assert base_image.ensure_base_image(client, print, name="other-base:1") == "other-base:1"
    assert base_image.ensure_base_image(FakeClient({}), print, name="mine:2") == "mine:2"  # type: ignore[arg-type]
    assert builds == ["mine:2"]


def test_the_rootfs_loses_the_pep_668_marker_and_apts_lists(tmp_path: Path) -> None:
    marker = tmp_path / "usr/lib/python3.11/EXTERNALLY-MANAGED"
    stdlib = tmp_path / "usr/lib/python3.11/os.py"
    lists = tmp_path / "var/lib/apt/lists/deb.debian.org_dists_bookworm_InRelease"
    for path in (marker, stdlib, lists):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    base_image.clean_rootfs(tmp_path)
    assert not marker.exists() and not lists.exists() and stdlib.exists()


def test_the_base_has_pip_and_python_on_path() -> None:
    assert {"python3-pip", "python-is-python3", "python3-venv"} <= set(base_image.PACKAGES)


class FakeBuildApi:
    def __init__(self) -> None:
        self.buildargs: list[dict[str, str]] = []

    def build(self, **kwargs: Any) -> list[dict[str, Any]]:
        self.buildargs.append(kwargs["buildargs"])
        return [{"aux": {"ID": "sha256:built"}}]


def test_build_image_asks_for_the_base_only_when_the_dockerfile_uses_it(
    builds: list[str], tmp_path: Path
) -> None:
    """A Dockerfile FROM another test image (a twin FROM echo) does not make build_image check, or
    rebuild, the base image; one with `ARG BASE_IMAGE` gets it."""
    client: Any = FakeClient({})
    client.api = FakeBuildApi()
    (tmp_path / "Dockerfile").write_text("ARG ECHO_IMAGE\nFROM ${ECHO_IMAGE}\n")
    assert images.build_image(tmp_path, "t:1", {"ECHO_IMAGE": "e"}, client, log=print) == "sha256:built"
    (tmp_path / "Dockerfile").write_text("ARG BASE_IMAGE=python:3.11-slim\nFROM ${BASE_IMAGE}\n")
    images.build_image(tmp_path, "t:2", {}, client, log=print)
    assert client.api.buildargs == [{"ECHO_IMAGE": "e"}, {"BASE_IMAGE": "smlocal-base:py3.11-bookworm"}]
    assert builds == ["smlocal-base:py3.11-bookworm"]
