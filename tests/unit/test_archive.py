"""Safe extraction of model.tar.gz: hostile archives are refused cleanly, good ones land right."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import stat
import tarfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from emulator.config import ArchiveLimits
from emulator.errors import ModelDataError
from emulator.model.resources import ModelDataSource
from emulator.model_data.sources import ModelDataFailure
from emulator.model_data.store import ArtifactStore


def _no_s3() -> Any:
    raise AssertionError("these tests must not touch S3")


Member = tuple[tarfile.TarInfo, bytes | None]


def _file(name: str, data: bytes = b"x", mode: int = 0o644) -> Member:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    return info, data


def _dir(name: str, mode: int = 0o755) -> Member:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = mode
    return info, None


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> Member:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info, None


def _special(name: str, kind: bytes) -> Member:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.devmajor, info.devminor = 1, 3
    return info, None


def _tar(members: Iterable[Member]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def _write(path: Path, members: Iterable[Member]) -> Path:
    path.write_bytes(gzip.compress(_tar(members)))
    return path


@pytest.fixture
def store(tmp_path: Path) -> ArtifactStore:
    return ArtifactStore(tmp_path / "store", _no_s3)


@pytest.fixture
def inbox(tmp_path: Path) -> Path:
    (tmp_path / "in").mkdir()
    return tmp_path / "in"


def _extract_message(uri: str) -> str:
    return (
        f'Failed to extract model data archive from URL "{uri}". '
        "Please ensure that the object located at the URL is a valid tar.gz archive."
    )


def _assert_store_empty(store: ArtifactStore) -> None:
    leftovers = [p for p in store.root.rglob("*") if not p.is_dir() or p.parent == store.models_dir]
    assert leftovers == []
    assert list(store.tmp_dir.iterdir()) == []


def _gz(members: list[Member]) -> Callable[[Path], object]:
    return lambda p: _write(p, members)


HOSTILE: list[tuple[str, Callable[[Path], object], str]] = [
    ("absolute", _gz([_file("/etc/evil")]), "member '/etc/evil': absolute path"),
    ("dotdot", _gz([_file("../x")]), "member '../x': path contains a '..' component"),
    ("inner-dotdot", _gz([_dir("a"), _file("a/../../x")]), "'..' component"),
    ("symlink-absolute", _gz([_link("etc", "/etc")]), "symbolic link to absolute path '/etc'"),
    ("symlink-up", _gz([_dir("d"), _link("d/up", "../../outside")]), "leaves the model directory"),
    ("hardlink-outside", _gz([_link("h", "../outside", tarfile.LNKTYPE)]), "hard link target '../outside'"),
    ("hardlink-absolute", _gz([_link("h", "/etc/passwd", tarfile.LNKTYPE)]), "hard link to absolute path"),
    ("hardlink-missing", _gz([_link("h", "nothing", tarfile.LNKTYPE)]), "not an earlier regular file"),
    (
        # sub/lnk -> .. is the model dir itself; esc -> sub/lnk/.. looks like "sub" but resolves above it.
        "link-chain",
        _gz([_dir("sub"), _link("sub/lnk", ".."), _link("esc", "sub/lnk/..")]),
        "member 'esc': symbolic link target 'sub/lnk/..' leaves the model directory through another link",
    ),
    (
        "write-through-link",
        _gz([_dir("real"), _link("lnk", "real"), _file("lnk/file")]),
        "member 'lnk/file': lies beneath a symbolic link",
    ),
    ("char-device", _gz([_special("dev/null", tarfile.CHRTYPE)]), "member 'dev/null': character device"),
    ("block-device", _gz([_special("sda", tarfile.BLKTYPE)]), "member 'sda': block device not allowed"),
    ("fifo", _gz([_special("pipe", tarfile.FIFOTYPE)]), "member 'pipe': FIFO not allowed"),
    ("not-gzip", lambda p: p.write_bytes(_tar([_file("a")])), "not a gzip file"),
    ("empty-file", lambda p: p.write_bytes(b""), "not a gzip file"),
    (
        "gzip-not-tar",
        lambda p: p.write_bytes(gzip.compress(b"hello world" * 100)),
        "corrupt archive: ReadError: invalid header",
    ),
    (
        "truncated",
        lambda p: p.write_bytes(gzip.compress(_tar([_file("big", os.urandom(200_000))]))[:50_000]),
        "corrupt archive: EOFError: Compressed file ended before the end-of-stream marker",
    ),
    (
        "bad-crc",
        lambda p: p.write_bytes(_flip(gzip.compress(_tar([_file("a", b"data")])), -8)),
        "corrupt archive: BadGzipFile: CRC check failed",
    ),
]


def _flip(data: bytes, index: int) -> bytes:
    b = bytearray(data)
    b[index] ^= 0xFF
    return bytes(b)


@pytest.mark.parametrize(("build", "detail"), [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_hostile_archive_is_refused_and_leaves_nothing(
    store: ArtifactStore, inbox: Path, tmp_path: Path, build: Callable[[Path], object], detail: str
) -> None:
    archive = inbox / "model.tar.gz"
    build(archive)
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ModelDataError) as caught:
        store.materialize(ModelDataSource(str(archive)))
    assert caught.value.message == _extract_message(str(archive))
    assert isinstance(caught.value, ModelDataFailure)
    assert detail in caught.value.detail
    _assert_store_empty(store)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written beside the store
    assert store.stats.extractions == 0


def test_too_large_archive_uses_the_size_failure_reason(tmp_path: Path, inbox: Path) -> None:
    store = ArtifactStore(tmp_path / "store", _no_s3, limits=ArchiveLimits(max_extracted_bytes=1000))
    archive = _write(inbox / "model.tar.gz", [_file("a", b"1" * 600), _file("b", b"2" * 600)])
    with pytest.raises(ModelDataFailure) as caught:
        store.materialize(ModelDataSource(f"file://{archive}"))
    assert caught.value.message == (
        f'Failed to extract model data archive from URL "file://{archive}". '
        "The model data archive is too large. Please reduce the size of the model data archive "
        "or move to an instance type with more memory."
    )
    assert "member 'b'" in caught.value.detail and "1000 bytes" in caught.value.detail
    _assert_store_empty(store)


def test_good_archive_extracts_with_readable_modes_and_in_tree_links(
    store: ArtifactStore, inbox: Path
) -> None:
    archive = _write(
        inbox / "model.tar.gz",
        [
            _dir("./", 0o700),
            _dir("./code", 0o700),
            _file("./code/inference.py", b"print('hi')\n", 0o600),
            _file("./code/run.sh", b"#!/bin/sh\n", 0o700),
            _file("weights/v1/model.bin", b"\x00" * 1024, 0o600),
            _file("weights/v1/setuid", b"s", 0o4755),
            _link("weights/latest", "v1"),
            _link("model.bin", "weights/latest/model.bin"),
            _link("code/self", "."),
            _link("hard.bin", "weights/v1/model.bin", tarfile.LNKTYPE),
            _file("dup.txt", b"first"),
            _file("dup.txt", b"second"),
        ],
    )
    model = store.materialize(ModelDataSource(str(archive)))

    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    assert model == store.models_dir / digest
    assert (model / "code" / "inference.py").read_text() == "print('hi')\n"
    assert (model / "model.bin").read_bytes() == b"\x00" * 1024  # through two in-tree links
    assert os.readlink(model / "weights" / "latest") == "v1"
    assert (model / "hard.bin").stat().st_ino == (model / "weights/v1/model.bin").stat().st_ino
    assert (model / "dup.txt").read_bytes() == b"second"

    def mode(rel: str) -> int:
        return stat.S_IMODE((model / rel).lstat().st_mode)

    assert mode("code/inference.py") == 0o644
    assert mode("weights/v1/model.bin") == 0o644
    assert mode("code/run.sh") == 0o755
    assert mode("weights/v1/setuid") == 0o755
    assert mode("code") == 0o755 and mode("weights/v1") == 0o755 and mode(".") == 0o755
    assert list(store.tmp_dir.iterdir()) == []
    assert store.stats.extractions == 1


def test_repeat_uses_the_index_and_a_copy_uses_the_digest(store: ArtifactStore, inbox: Path) -> None:
    archive = _write(inbox / "model.tar.gz", [_file("a.txt", b"alpha")])
    first = store.materialize(ModelDataSource(str(archive)))
    again = store.materialize(ModelDataSource(f"file://{archive}"))
    assert again == first
    assert store.stats.hashes == 1 and store.stats.extractions == 1 and store.stats.reuses == 1

    copy = inbox / "copy.tar.gz"
    copy.write_bytes(archive.read_bytes())
    assert store.materialize(ModelDataSource(str(copy))) == first
    assert store.stats.hashes == 2 and store.stats.extractions == 1  # hashed, not extracted

    # A store opened later on the same root reads the index: no hash at all.
    later = ArtifactStore(store.root, _no_s3)
    assert later.materialize(ModelDataSource(str(archive))) == first
    assert later.stats.hashes == 0 and later.stats.extractions == 0


def test_changed_file_is_hashed_again(store: ArtifactStore, inbox: Path) -> None:
    archive = _write(inbox / "model.tar.gz", [_file("a.txt", b"alpha")])
    first = store.materialize(ModelDataSource(str(archive)))
    _write(archive, [_file("a.txt", b"beta!")])
    os.utime(archive, ns=(1, 1))
    second = store.materialize(ModelDataSource(str(archive)))
    assert second != first
    assert (second / "a.txt").read_bytes() == b"beta!"
    assert (first / "a.txt").read_bytes() == b"alpha"  # a running endpoint's files never change
