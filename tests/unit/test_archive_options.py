"""`smlocal serve` passes the archive limits and the allowed model directories into ServerConfig."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from emulator.cli import build_parser, main
from emulator.config import ArchiveLimits, ServerConfig
from emulator.model_data.store import ArtifactStore


def test_defaults_are_the_named_ones(served: list[ServerConfig], tmp_path: Path) -> None:
    assert main(["serve", "--state-dir", str(tmp_path)]) == 0
    (config,) = served
    assert config.archive_limits == ArchiveLimits()
    assert config.local_model_dirs is None
    store = ArtifactStore.for_server(config, lambda: None)
    assert store.local_dirs == (Path.cwd().resolve(), Path(tempfile.gettempdir()).resolve())


def test_each_limit_has_an_option(served: list[ServerConfig], tmp_path: Path) -> None:
    args = ["serve", "--state-dir", str(tmp_path), "--archive-max-header-bytes", "4096"]
    args += ["--archive-max-entries", "10", "--archive-max-bytes", "1000", "--archive-max-ratio", "50"]
    args += ["--archive-max-trailing-bytes", "2048"]
    args += ["--allow-local-model-dir", str(tmp_path), "--allow-local-model-dir", "/srv/models"]
    assert main(args) == 0
    (config,) = served
    assert config.archive_limits == ArchiveLimits(
        max_header_bytes=4096, max_entries=10, max_extracted_bytes=1000, max_ratio=50, max_trailing_bytes=2048
    )
    assert config.local_model_dirs == (tmp_path.resolve(), Path("/srv/models"))
    store = ArtifactStore.for_server(config, lambda: None)
    assert store.local_dirs == (tmp_path.resolve(), Path("/srv/models"))


def test_bad_values_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        build_parser().parse_args(["serve", "--archive-max-entries", "0"])
    assert caught.value.code == 2
    assert "must be 1 or more: '0'" in capsys.readouterr().err


def test_help_shows_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "over N bytes (default: 1048576)" in out
    assert "more than N members (default: 100000)" in out
    assert "(default: 107374182400)" in out
    assert "(default: 200.0)" in out
    assert "--allow-local-model-dir DIR" in out


def test_a_local_directory_outside_the_roots_is_refused(tmp_path: Path) -> None:
    from emulator.errors import ValidationFailed
    from emulator.model.resources import ModelDataSource
    from emulator.model_data.sources import ModelDataFailure

    allowed = tmp_path / "allowed"
    (allowed / "model").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    (allowed / "escape").symlink_to(tmp_path / "other")
    store = ArtifactStore(tmp_path / "store", lambda: None, local_dirs=(allowed,))
    store.check_exists(ModelDataSource(uri=str(allowed / "model")))
    assert store.materialize(ModelDataSource(uri=str(allowed / "model"))) == (allowed / "model").resolve()
    for refused in ("/etc", str(tmp_path / "other"), str(allowed / "escape")):
        with pytest.raises(ValidationFailed, match="outside the directories smlocal may mount"):
            store.check_exists(ModelDataSource(uri=refused))
        with pytest.raises(ModelDataFailure) as caught:
            store.materialize(ModelDataSource(uri=refused))
        assert "outside the directories smlocal may mount" in caught.value.detail
