"""The parts of emulator.runtime.images that need no engine: mirror parsing and wheelhouse stamps."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from emulator.errors import SetupError
from emulator.runtime import images

DEB822 = """\
Types: deb-src
URIs: http://src.example/debian
Suites: bookworm
Components: main

Types: deb
# http://snapshot.debian.org/archive/debian-security/20250520T000000Z
URIs: http://security.example/debian-security
Suites: bookworm-security
Components: main

Types: deb
URIs: http://disabled.example/debian
Suites: bookworm
Enabled: no

Types: deb
URIs: http://mirror.example/debian/
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def test_deb822_takes_the_first_enabled_binary_stanza_for_the_suite() -> None:
    assert images.mirror_from_deb822(DEB822) == "http://mirror.example/debian"


def test_deb822_without_the_suite_gives_nothing() -> None:
    assert images.mirror_from_deb822(DEB822, suite="trixie") is None


def test_one_line_sources_with_options_and_comments() -> None:
    text = """\
# deb http://commented.example/debian bookworm main
deb-src http://src.example/debian bookworm main
deb http://security.example/debian-security bookworm-security main
deb [arch=amd64 signed-by=/k.gpg] https://mirror.example/debian/ bookworm main contrib
"""
    assert images.mirror_from_one_line(text) == "https://mirror.example/debian"
    assert images.mirror_from_one_line("deb http://x/debian bullseye main\n") is None


def test_apt_mirror_reads_list_then_dir_and_falls_back(tmp_path: Path) -> None:
    sources_list = tmp_path / "sources.list"
    sources_dir = tmp_path / "sources.list.d"
    sources_dir.mkdir()
    assert images.apt_mirror(sources_list, sources_dir) == images.DEFAULT_MIRROR

    (sources_dir / "debian.sources").write_text(DEB822)
    (sources_dir / "other.sources.disabled").write_text("Types: deb\nURIs: http://no/\nSuites: bookworm\n")
    assert images.apt_mirror(sources_list, sources_dir) == "http://mirror.example/debian"

    sources_list.write_text("deb http://first.example/debian bookworm main\n")
    assert images.apt_mirror(sources_list, sources_dir) == "http://first.example/debian"


def test_wheelhouse_key_ignores_order_and_blank_entries() -> None:
    assert images.wheelhouse_key(["b==2", "a==1"]) == images.wheelhouse_key(["a==1", "", " b==2 "])
    assert images.wheelhouse_key(["a==1"]) != images.wheelhouse_key(["a==2"])


def test_pip_download_targets_the_image_platform(tmp_path: Path) -> None:
    cmd = images.pip_download_command(["numpy==2.0.0"], tmp_path)
    assert cmd[-1] == "numpy==2.0.0"
    assert "--only-binary=:all:" in cmd
    assert cmd[cmd.index("--python-version") + 1] == "3.11"
    assert cmd[cmd.index("--abi") + 1] == "cp311"
    platforms = [cmd[i + 1] for i, arg in enumerate(cmd) if arg == "--platform"]
    assert "manylinux2014_x86_64" in platforms and "manylinux_2_28_x86_64" in platforms


class FakePip:
    def __init__(self, returncode: int = 0) -> None:
        self.calls: list[list[str]] = []
        self.returncode = returncode

    def __call__(self, cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(cmd)
        dest = Path(cmd[cmd.index("--dest") + 1])
        (dest / "pkg-1.0-py3-none-any.whl").write_bytes(b"wheel")
        return subprocess.CompletedProcess(cmd, self.returncode, "", "ERROR: no matching distribution")


def test_wheelhouse_downloads_once_per_requirement_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pip = FakePip()
    monkeypatch.setattr(subprocess, "run", pip)
    dest = tmp_path / "wheels"
    logs: list[str] = []

    assert images.prepare_wheelhouse(["pkg==1.0"], dest, log=logs.append) == dest
    assert len(pip.calls) == 1
    assert images.wheelhouse_is_current(dest, ["pkg==1.0"])

    images.prepare_wheelhouse(["pkg==1.0"], dest, log=logs.append)
    assert len(pip.calls) == 1, "same requirements: the stamp makes it a no-op"
    assert "up to date" in logs[-1]

    images.prepare_wheelhouse(["pkg==1.0", "other==2"], dest, log=logs.append)
    assert len(pip.calls) == 2, "new requirements: download again"
    assert not images.wheelhouse_is_current(dest, ["pkg==1.0"])


def test_failed_download_leaves_no_stamp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subprocess, "run", FakePip(returncode=1))
    with pytest.raises(SetupError, match="no matching distribution"):
        images.prepare_wheelhouse(["pkg==1.0"], tmp_path, log=lambda _: None)
    assert not images.wheelhouse_is_current(tmp_path, ["pkg==1.0"])


def test_corrupt_stamp_is_not_current(tmp_path: Path) -> None:
    (tmp_path / images.WHEELHOUSE_STAMP).write_text("{not json")
    assert not images.wheelhouse_is_current(tmp_path, ["pkg==1.0"])
