"""Hostile model archives are refused with bounded memory, SageMaker's FailureReason, the reason for
the endpoint log, and nothing left in the artifact cache.

Each bomb is generated on the fly (streamed to tmp_path) and extracted by ArtifactStore.materialize in
a fresh interpreter, whose peak RSS during the extraction is the figure asserted (and printed: run
with -s to see them). Before the limits, the PAX bomb took 768 MiB and extracted, the GNU long-name
bomb 1.5 GiB, and the ratio, trailing-data and entry-count bombs were extracted.
"""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Any

import pytest

from emulator.config import ArchiveLimits
from emulator.model.resources import ModelDataSource
from emulator.model_data.sources import ModelDataFailure, extract_failed_message
from emulator.model_data.store import ArtifactStore
from tests.fixtures import archive_bombs as bombs

#: The stated bound on the server's extra memory while it refuses any archive.
MEMORY_BOUND_MIB = 64


def _refused(result: dict[str, Any], archive: Path, reason: str) -> None:
    print(
        f"\n{archive.name}: rss +{result['rss_delta_mib']} MiB, tracemalloc peak "
        f"{result['tracemalloc_peak_mib']} MiB, {result['seconds']} s: {result['detail']}"
    )
    assert result["rejected"], result
    assert result["message"] == extract_failed_message(archive.as_uri())
    assert reason in result["detail"]
    assert result["rss_delta_mib"] < MEMORY_BOUND_MIB
    assert result["leftover"] == []


def test_pax_header_bomb_is_refused_before_it_is_read(tmp_path: Path) -> None:
    archive = bombs.pax_bomb(tmp_path / "pax.tar.gz", 256 * bombs.MIB)
    result = bombs.run_probe(archive)
    _refused(result, archive, "PAX extended header of 268435456 bytes, over the limit of 1048576 bytes")


def test_gnu_long_name_bomb_is_refused_before_it_is_read(tmp_path: Path) -> None:
    archive = bombs.gnu_longname_bomb(tmp_path / "gnu.tar.gz", 256 * bombs.MIB)
    result = bombs.run_probe(archive)
    _refused(result, archive, "GNU long-name record of 268435456 bytes, over the limit of 1048576 bytes")


def test_entry_count_bomb_is_refused(tmp_path: Path) -> None:
    archive = bombs.entry_bomb(tmp_path / "entries.tar.gz", 20_000)
    result = bombs.run_probe(archive, max_entries=10_000)
    _refused(result, archive, "more than 10000 members, the limit")


def test_gzip_ratio_bomb_is_refused_while_streaming(tmp_path: Path) -> None:
    archive = bombs.ratio_bomb(tmp_path / "zeros.tar.gz", 256 * bombs.MIB)
    result = bombs.run_probe(archive)
    _refused(result, archive, "over the compression ratio limit of 200")
    decompressed = int(result["detail"].split()[1])
    assert decompressed < 64 * bombs.MIB  # stopped soon after the 32 MiB grace, not at 256 MiB


def test_trailing_garbage_after_the_end_marker_is_bounded(tmp_path: Path) -> None:
    archive = bombs.trailing_garbage(tmp_path / "trailing.tar.gz", 8 * bombs.MIB)
    result = bombs.run_probe(archive)
    _refused(
        result, archive, "more than 1048576 bytes of data after the end-of-archive marker at offset 1024"
    )


# -- in-process: the smaller rules and the limits' edges ---------------------------------------------


def _no_s3() -> Any:
    raise AssertionError("these tests must not touch S3")


def _store(tmp_path: Path, **limits: Any) -> ArtifactStore:
    return ArtifactStore(tmp_path / "store", _no_s3, limits=ArchiveLimits(**limits))


def _reason(store: ArtifactStore, archive: Path) -> str:
    with pytest.raises(ModelDataFailure) as caught:
        store.materialize(ModelDataSource(uri=str(archive)))
    assert caught.value.message == extract_failed_message(str(archive))
    assert list(store.tmp_dir.iterdir()) == [] and list(store.models_dir.iterdir()) == []
    return caught.value.detail


def test_a_header_at_the_limit_passes_and_one_byte_more_is_refused(tmp_path: Path) -> None:
    ok = bombs.pax_bomb(tmp_path / "ok.tar.gz", 4096)
    model = _store(tmp_path, max_header_bytes=4096).materialize(ModelDataSource(uri=str(ok)))
    assert (model / "model.bin").read_bytes() == b"weights"
    over = bombs.pax_bomb(tmp_path / "over.tar.gz", 4097)
    detail = _reason(_store(tmp_path / "2", max_header_bytes=4096), over)
    assert "PAX extended header of 4097 bytes, over the limit of 4096 bytes" in detail


def test_entries_at_the_limit_pass(tmp_path: Path) -> None:
    archive = bombs.entry_bomb(tmp_path / "e.tar.gz", 50)
    model = _store(tmp_path, max_entries=50).materialize(ModelDataSource(uri=str(archive)))
    assert len(list(model.iterdir())) == 50
    detail = _reason(_store(tmp_path / "2", max_entries=49), archive)
    assert "more than 49 members" in detail


def test_a_long_chain_of_extension_headers_is_refused(tmp_path: Path) -> None:
    four = bombs.extension_chain(tmp_path / "four.tar.gz", 4)
    assert (_store(tmp_path).materialize(ModelDataSource(uri=str(four))) / "model.bin").exists()
    detail = _reason(_store(tmp_path / "2"), bombs.extension_chain(tmp_path / "five.tar.gz", 5))
    assert "more than 4 extension records before one member" in detail


def test_extension_records_before_one_member_share_the_header_budget(tmp_path: Path) -> None:
    three = bombs.extension_chain(tmp_path / "three.tar.gz", 3, record_bytes=1000)
    assert (
        _store(tmp_path, max_header_bytes=3000).materialize(ModelDataSource(uri=str(three))) / "model.bin"
    ).exists()
    detail = _reason(_store(tmp_path / "2", max_header_bytes=2999), three)
    assert "extension records before one member add up to 3000 bytes, over the limit of 2999 bytes" in detail


def test_global_pax_headers_have_a_small_budget(tmp_path: Path) -> None:
    ok = bombs.extension_chain(tmp_path / "ok.tar.gz", 1, record_bytes=64 * 1024, kind=tarfile.XGLTYPE)
    assert (_store(tmp_path).materialize(ModelDataSource(uri=str(ok))) / "model.bin").exists()
    two = bombs.extension_chain(tmp_path / "two.tar.gz", 2, record_bytes=40 * 1024, kind=tarfile.XGLTYPE)
    detail = _reason(_store(tmp_path / "2"), two)
    assert "PAX global headers add up to 81920 bytes, over the limit of 65536 bytes" in detail


def test_sparse_members_are_refused(tmp_path: Path) -> None:
    assert "GNU sparse member not allowed" in _reason(_store(tmp_path), bombs.gnu_sparse(tmp_path / "s.tgz"))
    detail = _reason(_store(tmp_path / "2"), bombs.pax_sparse(tmp_path / "p.tgz"))
    assert "PAX (GNU) sparse member not allowed" in detail


def test_trailing_data_within_the_bound_is_read_and_accepted(tmp_path: Path) -> None:
    archive = bombs.trailing_garbage(tmp_path / "t.tar.gz", 4096)
    model = _store(tmp_path, max_trailing_bytes=8192).materialize(ModelDataSource(uri=str(archive)))
    assert (model / "model.bin").read_bytes() == b"weights"
    detail = _reason(_store(tmp_path / "2", max_trailing_bytes=4096), archive)
    assert "more than 4096 bytes of data after the end-of-archive marker" in detail


def test_the_ratio_is_not_checked_within_the_grace(tmp_path: Path) -> None:
    archive = bombs.ratio_bomb(tmp_path / "z.tar.gz", 4 * bombs.MIB)
    store = _store(tmp_path, ratio_grace_bytes=8 * bombs.MIB)
    assert (
        store.materialize(ModelDataSource(uri=str(archive))) / "zeros.bin"
    ).stat().st_size == 4 * bombs.MIB
    detail = _reason(_store(tmp_path / "2", ratio_grace_bytes=bombs.MIB), archive)
    assert "over the compression ratio limit of 200" in detail


def test_a_past_deadline_stops_the_work_and_leaves_nothing(tmp_path: Path) -> None:
    from emulator.model_data.sources import timeout_message

    archive = bombs.ratio_bomb(tmp_path / "z.tar.gz", 4 * bombs.MIB)
    store = _store(tmp_path)
    with pytest.raises(ModelDataFailure) as caught:
        store.materialize(ModelDataSource(uri=str(archive)), timeout_s=0.0, shown_timeout_s=60)
    assert caught.value.message == timeout_message(str(archive), 60)
    assert "(ModelDataDownloadTimeoutInSeconds 60)" in caught.value.detail
    assert list(store.tmp_dir.iterdir()) == [] and list(store.models_dir.iterdir()) == []


def test_the_deadline_is_checked_on_every_read_of_the_extraction(tmp_path: Path) -> None:
    from emulator.model_data.extract import extract_archive

    archive = bombs.ratio_bomb(tmp_path / "z.tar.gz", 8 * bombs.MIB)
    calls = 0

    class Late(Exception):
        pass

    def check() -> None:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise Late

    (tmp_path / "out").mkdir()
    with pytest.raises(Late):
        extract_archive(archive, tmp_path / "out", ArchiveLimits(), check)


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
def test_ordinary_long_names_links_and_a_global_header_pass(tmp_path: Path, fmt: int) -> None:
    import gzip
    import io

    long_dir, long_file = "d" * 120, "f" * 150
    buf = io.BytesIO()
    globals_ = {"comment": "0123456789abcdef0123456789abcdef01234567"} if fmt == tarfile.PAX_FORMAT else None
    with tarfile.open(fileobj=buf, mode="w", format=fmt, pax_headers=globals_) as tar:
        info = tarfile.TarInfo(long_dir)
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
        info = tarfile.TarInfo(f"{long_dir}/{long_file}")
        info.size = 7
        tar.addfile(info, io.BytesIO(b"weights"))
        info = tarfile.TarInfo("link")
        info.type = tarfile.SYMTYPE
        info.linkname = f"{long_dir}/{long_file}"
        tar.addfile(info)
    archive = tmp_path / "ok.tar.gz"
    archive.write_bytes(gzip.compress(buf.getvalue()))
    model = _store(tmp_path).materialize(ModelDataSource(uri=str(archive)))
    assert (model / "link").read_bytes() == b"weights"
