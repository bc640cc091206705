"""ensure_engine's decisions, with the engine and the machine faked."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from emulator.errors import SetupError
from emulator.runtime import engine


@pytest.fixture
def no_engine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setattr(engine, "engine_answers", lambda timeout_s=5.0: False)
    monkeypatch.setattr(engine, "DOCKERD_PIDFILE", tmp_path / "docker.pid")
    monkeypatch.setattr(engine, "DOCKERD_LOG", tmp_path / "dockerd.log")
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/sbin/{name}")
    return tmp_path


def test_answering_engine_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "engine_answers", lambda timeout_s=5.0: True)
    monkeypatch.setattr(engine, "_start_dockerd", lambda log: pytest.fail("must not start dockerd"))
    engine.ensure_engine(log=lambda _: None)


def test_elsewhere_it_says_what_to_install(no_engine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "_is_debian_root", lambda: False)
    with pytest.raises(SetupError, match="Install Docker"):
        engine.ensure_engine(log=lambda _: None)


def test_stale_pid_file_is_removed(no_engine: Path) -> None:
    pidfile = no_engine / "docker.pid"
    pidfile.write_text(str(os.getpid()))  # a live process, but not dockerd
    assert engine._running_dockerd_pid() is None
    assert not pidfile.exists()


def test_dockerd_dying_early_reports_its_log(no_engine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "_is_debian_root", lambda: True)
    (no_engine / "dockerd.log").write_text("failed to start daemon: boom\n")
    monkeypatch.setattr(engine, "_start_dockerd", lambda log: subprocess.Popen(["false"]))
    with pytest.raises(SetupError, match="(?s)exited with status 1.*boom"):
        engine.ensure_engine(log=lambda _: None, timeout_s=10)


def test_timeout_reports_the_log_tail(no_engine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "_is_debian_root", lambda: True)
    (no_engine / "dockerd.log").write_text("still thinking\n")
    started: list[subprocess.Popen[bytes]] = []

    def fake_dockerd(log: object) -> subprocess.Popen[bytes]:
        started.append(subprocess.Popen(["sleep", "5"]))
        return started[-1]

    monkeypatch.setattr(engine, "_start_dockerd", fake_dockerd)
    try:
        with pytest.raises(SetupError, match="(?s)did not answer within 0 s.*still thinking"):
            engine.ensure_engine(log=lambda _: None, timeout_s=0.3)
    finally:
        for proc in started:  # the stand-in dockerd: stopped and reaped, no ResourceWarning
            proc.kill()
            proc.wait()
