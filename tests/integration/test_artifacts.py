"""Model data against a real S3 API (moto's server) through real boto3; no Docker needed."""

from __future__ import annotations

import gzip
import io
import stat
import tarfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from emulator.config import ArchiveLimits
from emulator.errors import ModelDataError, ModelDataNotFound, ValidationFailed
from emulator.model.resources import ModelDataSource
from emulator.model_data.sources import ModelDataFailure
from emulator.model_data.store import ArtifactStore


def _targz(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o600
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(buf.getvalue(), mtime=0)  # same files, same bytes


MODEL = {"model.bin": b"\x01" * 4096, "code/inference.py": b"def model_fn(d): ...\n"}


@pytest.fixture
def store(tmp_path: Path, s3_client_factory: Callable[[], Any]) -> ArtifactStore:
    return ArtifactStore(tmp_path / "artifacts", s3_client_factory)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _assert_no_leftovers(store: ArtifactStore) -> None:
    assert list(store.models_dir.iterdir()) == []
    assert list(store.tmp_dir.iterdir()) == []
    assert list((store.root / "partial").iterdir()) == []


# -- Gzip archives from S3 ------------------------------------------------------------------------


def test_s3_archive_downloads_once_and_extracts_once(
    store: ArtifactStore, s3_client: Any, s3_bucket: str, s3_client_factory: Callable[[], Any]
) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="m/model.tar.gz", Body=_targz(MODEL))
    source = ModelDataSource(f"s3://{s3_bucket}/m/model.tar.gz")
    store.check_exists(source)

    model = store.materialize(source)
    assert _files(model) == MODEL
    assert stat.S_IMODE((model / "model.bin").stat().st_mode) == 0o644
    assert (store.stats.downloads, store.stats.extractions) == (1, 1)

    assert store.materialize(source) == model  # a second endpoint on the same data
    assert (store.stats.downloads, store.stats.extractions, store.stats.reuses) == (1, 1, 1)

    # The same bytes under another key: downloaded (to learn the digest), never extracted again.
    s3_client.put_object(Bucket=s3_bucket, Key="other/model.tar.gz", Body=_targz(MODEL))
    assert store.materialize(ModelDataSource(f"s3://{s3_bucket}/other/model.tar.gz")) == model
    assert (store.stats.downloads, store.stats.extractions) == (2, 1)

    # After a restart the persisted index answers without a download.
    later = ArtifactStore(store.root, s3_client_factory)
    assert later.materialize(source) == model
    assert (later.stats.downloads, later.stats.extractions) == (0, 0)
    assert list(store.tmp_dir.iterdir()) == []


def test_replaced_object_is_fetched_again(store: ArtifactStore, s3_client: Any, s3_bucket: str) -> None:
    source = ModelDataSource(f"s3://{s3_bucket}/model.tar.gz")
    s3_client.put_object(Bucket=s3_bucket, Key="model.tar.gz", Body=_targz({"v": b"1"}))
    first = store.materialize(source)
    s3_client.put_object(Bucket=s3_bucket, Key="model.tar.gz", Body=_targz({"v": b"2"}))
    second = store.materialize(source)
    assert first != second and _files(second) == {"v": b"2"} and _files(first) == {"v": b"1"}


def test_concurrent_materialize_extracts_once(store: ArtifactStore, s3_client: Any, s3_bucket: str) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="model.tar.gz", Body=_targz(MODEL))
    source = ModelDataSource(f"s3://{s3_bucket}/model.tar.gz")
    start = threading.Barrier(4)

    def run() -> Path:
        start.wait()
        return store.materialize(source)

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: run(), range(4)))
    assert len(set(results)) == 1 and _files(results[0]) == MODEL
    assert (store.stats.downloads, store.stats.extractions, store.stats.reuses) == (1, 1, 3)
    assert list(store.tmp_dir.iterdir()) == []


def test_corrupt_s3_archive_fails_with_the_extract_reason(
    store: ArtifactStore, s3_client: Any, s3_bucket: str
) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="model.tar.gz", Body=b"this is not gzip")
    uri = f"s3://{s3_bucket}/model.tar.gz"
    with pytest.raises(ModelDataFailure) as caught:
        store.materialize(ModelDataSource(uri))
    assert caught.value.message == (
        f'Failed to extract model data archive from URL "{uri}". '
        "Please ensure that the object located at the URL is a valid tar.gz archive."
    )
    assert "not a gzip file" in caught.value.detail
    _assert_no_leftovers(store)


def test_endpoint_comes_from_aws_endpoint_url_s3(
    tmp_path: Path, s3_server: str, s3_client: Any, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_server)
    s3_client.put_object(Bucket=s3_bucket, Key="model.tar.gz", Body=_targz(MODEL))

    def factory() -> Any:
        return boto3.session.Session().client(
            "s3", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
        )

    store = ArtifactStore(tmp_path / "artifacts", factory)
    assert _files(store.materialize(ModelDataSource(f"s3://{s3_bucket}/model.tar.gz"))) == MODEL


# -- missing data and failed downloads ------------------------------------------------------------


def test_missing_object_is_reported_with_sagemakers_text(store: ArtifactStore, s3_bucket: str) -> None:
    uri = f"s3://{s3_bucket}/missing/model.tar.gz"
    with pytest.raises(ModelDataNotFound) as caught:
        store.check_exists(ModelDataSource(uri))
    assert caught.value.message == f"Could not find model data at s3://{s3_bucket}/missing/model.tar.gz."

    with pytest.raises(ModelDataNotFound) as caught:
        store.check_exists(ModelDataSource("s3://no-such-bucket-smlocal/model.tar.gz"))
    assert caught.value.message == "Could not find model data at s3://no-such-bucket-smlocal/model.tar.gz."

    prefix = f"s3://{s3_bucket}/empty/"
    with pytest.raises(ModelDataNotFound) as caught:
        store.check_exists(ModelDataSource(prefix, compression="None", data_type="S3Prefix"))
    assert caught.value.message == f"Could not find model data at {prefix}."

    with pytest.raises(ModelDataFailure) as failed:
        store.materialize(ModelDataSource(uri))
    assert failed.value.message.startswith(
        f'Failed to download model data for container from URL "{uri}". Please ensure that there is an '
        "object located at the URL"
    )
    _assert_no_leftovers(store)


def test_missing_local_paths(store: ArtifactStore, tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "model.tar.gz"
    for uri in (str(missing), f"file://{missing}"):
        with pytest.raises(ModelDataNotFound) as caught:
            store.check_exists(ModelDataSource(uri))
        assert caught.value.message == f"Could not find model data at {uri}."


def test_unreachable_s3_is_a_download_failure(tmp_path: Path) -> None:
    def factory() -> Any:
        return boto3.session.Session().client(
            "s3",
            endpoint_url="http://127.0.0.1:9",
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=2),
        )

    store = ArtifactStore(tmp_path / "artifacts", factory)
    uri = "s3://bucket/model.tar.gz"
    with pytest.raises(ModelDataFailure) as caught:
        store.materialize(ModelDataSource(uri))
    assert caught.value.message.startswith(f'Failed to download model data for container from URL "{uri}".')
    assert "127.0.0.1:9" in caught.value.detail
    with pytest.raises(ValidationFailed, match="Could not access model data at s3://bucket/model.tar.gz"):
        store.check_exists(ModelDataSource(uri))


def test_malformed_sources_are_validation_errors(store: ArtifactStore, s3_bucket: str) -> None:
    bad = [
        ModelDataSource(f"s3://{s3_bucket}/prefix", compression="None", data_type="S3Prefix"),
        ModelDataSource(f"s3://{s3_bucket}/prefix/", compression="Gzip", data_type="S3Prefix"),
        ModelDataSource(f"s3://{s3_bucket}/dir/"),
        ModelDataSource(f"s3://{s3_bucket}/m.tar.gz", compression="Zstd"),
        ModelDataSource("https://example.com/model.tar.gz"),
    ]
    for source in bad:
        with pytest.raises(ValidationFailed):
            store.check_exists(source)
        with pytest.raises(ModelDataError):
            store.materialize(source)


# -- uncompressed model data ----------------------------------------------------------------------


def test_s3_prefix_uncompressed(store: ArtifactStore, s3_client: Any, s3_bucket: str) -> None:
    objects = {
        "llm/config.json": b"{}",
        "llm/weights/part1": b"a" * 100,
        "llm/weights/part2": b"b" * 100,
        "llm/tokenizer/vocab.txt": b"hello\n",
    }
    for key, body in objects.items():
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=body)
    s3_client.put_object(Bucket=s3_bucket, Key="llm-other/ignored", Body=b"no")
    source = ModelDataSource(f"s3://{s3_bucket}/llm/", compression="None", data_type="S3Prefix")
    store.check_exists(source)

    model = store.materialize(source)
    assert _files(model) == {key.removeprefix("llm/"): body for key, body in objects.items()}
    assert stat.S_IMODE((model / "weights").stat().st_mode) == 0o755
    assert stat.S_IMODE((model / "weights" / "part1").stat().st_mode) == 0o644
    assert (store.stats.downloads, store.stats.extractions) == (4, 1)

    assert store.materialize(source) == model  # cached by the listing's keys and ETags
    assert (store.stats.downloads, store.stats.extractions, store.stats.reuses) == (4, 1, 1)

    s3_client.put_object(Bucket=s3_bucket, Key="llm/config.json", Body=b'{"changed": true}')
    changed = store.materialize(source)
    assert changed != model and (changed / "config.json").read_bytes() == b'{"changed": true}'


def test_s3_object_uncompressed(store: ArtifactStore, s3_client: Any, s3_bucket: str) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="models/v1/model.safetensors", Body=b"tensors")
    source = ModelDataSource(f"s3://{s3_bucket}/models/v1/model.safetensors", compression="None")
    store.check_exists(source)
    model = store.materialize(source)
    assert _files(model) == {"model.safetensors": b"tensors"}
    assert store.materialize(source) == model
    assert (store.stats.downloads, store.stats.extractions) == (1, 1)


@pytest.mark.parametrize(
    ("keys", "reason"),
    [
        (["p/ok.bin", "p/sub/"], "is a folder object (a zero-byte key ending in '/')"),
        (["p/", "p/ok.bin"], "is a folder object"),
        (["p/weights", "p/weights/part1"], 'is a file, but "s3://{b}/p/weights/part1" needs that name'),
        (["p/a/./b"], "has a '.' path segment"),
        (["p/a/../b"], "has a '..' path segment"),
        (["p/a//b"], "has an empty or blank path segment"),
        (["p/ /b"], "has an empty or blank path segment"),
        (["p/" + "n" * 256], "longer than 255 bytes"),
    ],
    ids=["folder-object", "prefix-folder-object", "name-clash", "dot", "dotdot", "empty", "blank", "long"],
)
def test_s3_prefix_rejections(
    store: ArtifactStore, s3_client: Any, s3_bucket: str, keys: list[str], reason: str
) -> None:
    for key in keys:
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=b"" if key.endswith("/") else b"data")
    uri = f"s3://{s3_bucket}/p/"
    with pytest.raises(ModelDataFailure) as caught:
        store.materialize(ModelDataSource(uri, compression="None", data_type="S3Prefix"))
    assert caught.value.message.startswith(
        f'Invalid model data at URL "{uri}": the object "s3://{s3_bucket}/p/'
    )
    assert caught.value.message.endswith(
        ". With CompressionType None each object must map to a file path under /opt/ml/model."
    )
    assert reason.format(b=s3_bucket) in caught.value.message
    assert store.stats.downloads == 0
    _assert_no_leftovers(store)


# -- local sources --------------------------------------------------------------------------------


def test_local_archives_by_file_uri_and_plain_path(store: ArtifactStore, tmp_path: Path) -> None:
    archive = tmp_path / "model.tar.gz"
    archive.write_bytes(_targz(MODEL))
    for uri in (f"file://{archive}", str(archive)):
        store.check_exists(ModelDataSource(uri))
    model = store.materialize(ModelDataSource(f"file://{archive}"))
    assert _files(model) == MODEL
    assert store.materialize(ModelDataSource(str(archive))) == model
    assert (store.stats.hashes, store.stats.extractions, store.stats.downloads) == (1, 1, 0)


def test_local_directory_is_passed_through(store: ArtifactStore, tmp_path: Path) -> None:
    model_dir = tmp_path / "my-model"
    (model_dir / "sub").mkdir(parents=True)
    (model_dir / "sub" / "w.bin").write_bytes(b"w")
    for uri in (str(model_dir), f"file://{model_dir}"):
        store.check_exists(ModelDataSource(uri))
        assert store.materialize(ModelDataSource(uri)) == model_dir.resolve()
    assert store.stats == type(store.stats)()  # nothing copied, hashed or extracted
    _assert_no_leftovers(store)


def test_local_single_file_uncompressed(store: ArtifactStore, tmp_path: Path) -> None:
    weights = tmp_path / "model.onnx"
    weights.write_bytes(b"onnx")
    model = store.materialize(ModelDataSource(str(weights), compression="None"))
    assert _files(model) == {"model.onnx": b"onnx"}
    assert store.materialize(ModelDataSource(str(weights), compression="None")) == model
    assert store.stats.extractions == 1


def test_s3_limits_entries_and_size(
    s3_client: Any, s3_bucket: str, s3_client_factory: Callable[[], Any], tmp_path: Path
) -> None:
    for i in range(4):
        s3_client.put_object(Bucket=s3_bucket, Key=f"many/f{i}", Body=b"x" * 100)
    source = ModelDataSource(f"s3://{s3_bucket}/many/", compression="None", data_type="S3Prefix")
    few = ArtifactStore(tmp_path / "few", s3_client_factory, limits=ArchiveLimits(max_entries=3))
    with pytest.raises(ModelDataFailure) as caught:
        few.materialize(source)
    assert caught.value.message == (
        f'Invalid model data at URL "s3://{s3_bucket}/many/": there are more than 3 objects under the prefix.'
    )
    small = ArtifactStore(
        tmp_path / "small", s3_client_factory, limits=ArchiveLimits(max_extracted_bytes=399)
    )
    with pytest.raises(ModelDataFailure) as caught:
        small.materialize(source)
    assert caught.value.detail == "400 bytes, over the cap of 399 bytes"
    for store in (few, small):
        _assert_no_leftovers(store)
    assert (ArtifactStore(tmp_path / "ok", s3_client_factory).materialize(source) / "f3").exists()


def test_s3_archive_bomb_is_refused_and_leaves_nothing(
    store: ArtifactStore, s3_client: Any, s3_bucket: str, tmp_path: Path
) -> None:
    from tests.fixtures.archive_bombs import MIB, gnu_longname_bomb

    bomb = gnu_longname_bomb(tmp_path / "bomb.tar.gz", 64 * MIB)
    s3_client.upload_file(str(bomb), s3_bucket, "bomb/model.tar.gz")
    uri = f"s3://{s3_bucket}/bomb/model.tar.gz"
    with pytest.raises(ModelDataFailure) as caught:
        store.materialize(ModelDataSource(uri))
    assert caught.value.message == (
        f'Failed to extract model data archive from URL "{uri}". '
        "Please ensure that the object located at the URL is a valid tar.gz archive."
    )
    assert "GNU long-name record of 67108864 bytes, over the limit of 1048576 bytes" in caught.value.detail
    _assert_no_leftovers(store)
