"""contract_tests.multi_model: finding a multi-model prefix's artifacts, laying them out as SageMaker does
(opaque names, {model_name}/model, safe extraction), and extra names for one artifact."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

import pytest

from contract_tests.multi_model import (
    MmeArtifacts,
    MmeDataProblem,
    find_artifacts,
    layout_copy,
    locate_model_data,
    model_name,
    prepare,
)
from emulator.errors import ValidationFailed
from tests.fixtures.mme import mme_artifact


class FakeS3:
    """list_objects_v2's paginator over fixed keys (what find_artifacts calls), recording the prefix."""

    def __init__(self, keys: list[str]) -> None:
        self.keys = keys
        self.prefixes: list[str] = []

    def get_paginator(self, name: str) -> Any:
        assert name == "list_objects_v2"
        return self

    def paginate(self, Bucket: str, Prefix: str) -> Any:  # noqa: N803 - boto3's names
        self.prefixes.append(Prefix)
        return [{"Contents": [{"Key": k} for k in self.keys if k.startswith(Prefix)]}]


def test_a_local_folder_lists_its_archives_by_relative_path(tmp_path: Path) -> None:
    mme_artifact(tmp_path / "z.tar.gz", "z")
    mme_artifact(tmp_path / "team" / "a.tar.gz", "a")
    (tmp_path / "notes.txt").write_text("x")
    assert find_artifacts(str(tmp_path), None) == [
        ("team/a.tar.gz", str(tmp_path / "team" / "a.tar.gz")),
        ("z.tar.gz", str(tmp_path / "z.tar.gz")),
    ]
    assert find_artifacts(f"file://{tmp_path}/z.tar.gz", None) == [("z.tar.gz", str(tmp_path / "z.tar.gz"))]
    with pytest.raises(MmeDataProblem, match="there is no such file or folder"):
        find_artifacts(str(tmp_path / "none"), None)


def test_an_s3_prefix_is_listed_with_a_trailing_slash_and_keys_made_relative() -> None:
    s3 = FakeS3(["models/b.tar.gz", "models/x/a.tar.gz", "models/readme", "models-old/c.tar.gz"])
    assert find_artifacts("s3://bkt/models", s3) == [
        ("b.tar.gz", "models/b.tar.gz"),
        ("x/a.tar.gz", "models/x/a.tar.gz"),
    ]
    assert s3.prefixes == ["models/"]  # not models-old/
    assert find_artifacts("s3://bkt/models/b.tar.gz", s3) == [("b.tar.gz", "models/b.tar.gz")]
    with pytest.raises(MmeDataProblem, match="names no bucket"):
        find_artifacts("s3:///models/", s3)


def test_model_names_are_opaque_and_differ_per_copy() -> None:
    name = model_name("team/a.tar.gz")
    assert len(name) == 32 and all(c in "0123456789abcdef" for c in name)
    assert name == model_name("team/a.tar.gz") != model_name("team/a.tar.gz", 1) != model_name("a.tar.gz")


def test_prepare_extracts_the_first_two_and_copies_share_the_files(tmp_path: Path) -> None:
    for letter in "abc":
        mme_artifact(tmp_path / "prefix" / f"{letter}.tar.gz", letter * 3, pad_bytes=10)
    got = prepare(str(tmp_path / "prefix"), tmp_path / "models", lambda: None)
    assert isinstance(got, MmeArtifacts) and got.found == 3
    assert [m.target_model for m in got.models] == ["a.tar.gz", "b.tar.gz"]
    first = got.models[0]
    assert first.host_dir == tmp_path / "models" / first.name / "model"
    assert first.url == f"/opt/ml/models/{first.name}/model"
    assert (first.host_dir / "answer.txt").read_text() == "aaa"
    assert (first.host_dir / "pad.bin").stat().st_size == 10
    copy = layout_copy(got, first, 1)
    assert copy.name == model_name("a.tar.gz", 1) and copy.target_model == "a.tar.gz"
    assert (copy.host_dir / "answer.txt").stat().st_ino == (first.host_dir / "answer.txt").stat().st_ino


def test_an_archive_the_safe_extraction_refuses_is_a_problem_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "prefix" / "evil.tar.gz"
    bad.parent.mkdir()
    with tarfile.open(bad, "w:gz") as tar:
        info = tarfile.TarInfo("../../escape.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(MmeDataProblem, match="the artifact evil.tar.gz cannot be extracted") as caught:
        prepare(str(tmp_path / "prefix"), tmp_path / "models", lambda: None)
    assert "escape.txt" in caught.value.message
    assert not (tmp_path / "escape.txt").exists()
    assert not (tmp_path / "models").exists()  # nothing of a failed preparation is left
    (tmp_path / "empty").mkdir()
    with pytest.raises(MmeDataProblem, match="holds no \\*.tar.gz artifact"):
        prepare(str(tmp_path / "empty"), tmp_path / "m2", lambda: None)


def test_model_data_urls_an_s3_prefix_counts() -> None:
    locate_model_data("s3://bkt/models/")
    locate_model_data("s3://bkt/models/a.tar.gz")
    locate_model_data("/some/folder")
    with pytest.raises(ValidationFailed, match="names no bucket"):
        locate_model_data("s3:///models/")
