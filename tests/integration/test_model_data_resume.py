"""Downloads resume through the cache: a materialize stopped by its deadline part-way through the
model data keeps what came (partial/), and the next attempt fetches only the rest (a Range GET
with If-Match), with the same bytes as one uninterrupted download. Real boto3 against moto's S3
server behind the throttling proxy (objects under `slow/` come at ~320 KiB/s)."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from emulator.model.resources import ModelDataSource
from emulator.model_data.sources import ModelDataFailure, timeout_message
from emulator.model_data.store import ArtifactStore
from tests.fixtures.s3server import make_s3_client
from tests.fixtures.slow_s3 import slow_s3_proxy

SLOW_BYTES = 2 * 1024 * 1024  # ~6.4 s through the proxy
#: The first attempt's deadline: long enough for the listing, the HEADs and the fast object on a loaded
#: 2-core machine (0.6 s left little margin there), far short of SLOW_BYTES' time.
INTERRUPT_S = 2.0


@pytest.fixture
def proxy(s3_server: str) -> Iterator[str]:
    with slow_s3_proxy(s3_server, piece_bytes=16 * 1024, interval_s=0.05) as url:
        yield url


@pytest.fixture
def store(tmp_path: Path, proxy: str) -> ArtifactStore:
    factory: Callable[[], Any] = lambda: make_s3_client(proxy)  # noqa: E731
    return ArtifactStore(tmp_path / "artifacts", factory)


def _partial(store: ArtifactStore) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in (store.root / "partial").iterdir()}


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_an_interrupted_prefix_keeps_its_completed_objects_and_resumes_the_rest(
    store: ArtifactStore, s3_client: Any, s3_bucket: str
) -> None:
    fast, slow = os.urandom(100_000), os.urandom(SLOW_BYTES)
    s3_client.put_object(Bucket=s3_bucket, Key="m/a.bin", Body=fast)
    s3_client.put_object(Bucket=s3_bucket, Key="m/slow/b.bin", Body=slow)
    source = ModelDataSource(f"s3://{s3_bucket}/m/", compression="None", data_type="S3Prefix")

    with pytest.raises(ModelDataFailure) as caught:
        store.materialize(source, timeout_s=INTERRUPT_S, shown_timeout_s=60)
    assert caught.value.message == timeout_message(source.uri, 60)
    kept = _partial(store)
    complete = [size for name, size in kept.items() if not name.endswith(".part")]
    parts = [size for name, size in kept.items() if name.endswith(".part")]
    assert complete == [len(fast)]  # a.bin came whole
    assert len(parts) == 1 and 0 < parts[0] < len(slow), kept  # b.bin part-way
    assert list(store.models_dir.iterdir()) == [] and list(store.tmp_dir.iterdir()) == []
    assert store.stats.downloads == 1

    model = store.materialize(source, timeout_s=30)
    assert _files(model) == {"a.bin": fast, "slow/b.bin": slow}
    stats = store.stats
    assert stats.kept_objects == 1  # a.bin was not fetched again
    assert stats.resumed_bytes == parts[0]  # b.bin went on from where it stopped
    assert stats.downloads == 2
    assert _partial(store) == {} and list(store.tmp_dir.iterdir()) == []


def test_an_interrupted_archive_resumes_and_is_addressed_by_its_whole_bytes(
    store: ArtifactStore, s3_client: Any, s3_bucket: str
) -> None:
    weights = os.urandom(SLOW_BYTES)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("model.bin")
        info.size = len(weights)
        tar.addfile(info, io.BytesIO(weights))
    archive = buf.getvalue()
    s3_client.put_object(Bucket=s3_bucket, Key="slow/model.tar.gz", Body=archive)
    source = ModelDataSource(f"s3://{s3_bucket}/slow/model.tar.gz")

    with pytest.raises(ModelDataFailure):
        store.materialize(source, timeout_s=INTERRUPT_S, shown_timeout_s=60)
    (part,) = _partial(store).values()
    assert 0 < part < len(archive)

    model = store.materialize(source, timeout_s=30)
    assert _files(model) == {"model.bin": weights}
    assert model.name == hashlib.sha256(archive).hexdigest()  # the digest of all of it, resumed or not
    assert store.stats.resumed_bytes == part
    assert _partial(store) == {}


def test_a_changed_object_is_fetched_whole_not_resumed(
    store: ArtifactStore, s3_client: Any, s3_bucket: str
) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="slow/w.bin", Body=os.urandom(SLOW_BYTES))
    source = ModelDataSource(f"s3://{s3_bucket}/slow/w.bin", compression="None")
    with pytest.raises(ModelDataFailure):
        store.materialize(source, timeout_s=INTERRUPT_S, shown_timeout_s=60)
    assert len(_partial(store)) == 1
    changed = os.urandom(SLOW_BYTES)
    s3_client.put_object(Bucket=s3_bucket, Key="slow/w.bin", Body=changed)  # another ETag

    model = store.materialize(source, timeout_s=30)
    assert _files(model) == {"w.bin": changed}
    assert store.stats.resumed_bytes == 0
    assert len(_partial(store)) == 1  # the old object's part waits for STALE_AFTER_S (partial.py)
