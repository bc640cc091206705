"""The bounds on reading one model data archive: a header hook for tarfile and a stream meter.

tarfile reads PAX extended headers, GNU long-name/long-link records and GNU sparse maps whole into
memory, before the caller sees the member they belong to. `guarded_tarinfo` returns a TarInfo
subclass (tarfile's extension point: `TarFile(tarinfo=...)`, whose `_proc_member` "can be overridden
in a subclass", Lib/tarfile.py) that asks a `HeaderGuard` about every header block first, so an
oversized record is refused from its 512-byte header, and refuses sparse members outright.
`StreamMeter` sits between gzip and tarfile: it counts decompressed bytes, checks the compression
ratio against the compressed bytes read, bounds what follows the end-of-archive marker, and calls a
check (the download deadline) on every read. Limits: `ArchiveLimits` in emulator/config.py.
"""

from __future__ import annotations

import gzip
import tarfile
from collections.abc import Callable
from typing import IO, Any

from emulator.config import ArchiveLimits

CHUNK_BYTES = 1 << 20
#: Extension records (PAX x/g, GNU L/K) that may precede one member: GNU tar writes at most L + K,
#: pax-format writers one x; tarfile processes a chain by recursion, one frame per record.
MAX_EXTENSION_CHAIN = 4
#: Global PAX headers (git archive writes one `comment` record) are copied into every later member's
#: headers by tarfile, so their budget is small: a big one would cost a dict copy per member.
MAX_GLOBAL_HEADER_BYTES = 64 * 1024
_EXTENSION_TYPES = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE)
_LONG_TYPES = (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK)


class ArchiveRejected(Exception):
    """The archive is not a gzip tar, is corrupt, or holds a member that may not be extracted."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class ArchiveTooLarge(ArchiveRejected):
    """The files of the archive add up to more than the configured cap."""


def _record_kind(type_: bytes) -> str:
    if type_ == tarfile.GNUTYPE_LONGNAME:
        return "GNU long-name record"
    if type_ == tarfile.GNUTYPE_LONGLINK:
        return "GNU long-link record"
    if type_ == tarfile.XGLTYPE:
        return "PAX global header"
    return "PAX extended header"


class HeaderGuard:
    """The per-archive state behind the header hook and the stream meter."""

    def __init__(self, limits: ArchiveLimits, check: Callable[[], None] | None) -> None:
        self.limits = limits
        self.check = check
        self.entries = 0
        self.chain = 0
        self.chain_bytes = 0
        self.global_bytes = 0

    def header(self, info: tarfile.TarInfo) -> None:
        """Called by tarfile for every header block, before it reads any payload of that record."""
        limits = self.limits
        at = f"header at offset {info.offset}"
        if info.type in _EXTENSION_TYPES or info.type in _LONG_TYPES:
            kind = _record_kind(info.type)
            if info.size > limits.max_header_bytes:
                raise ArchiveRejected(
                    f"{at}: {kind} of {info.size} bytes, over the limit of {limits.max_header_bytes} bytes"
                )
            self.chain += 1
            self.chain_bytes += info.size
            if self.chain_bytes > limits.max_header_bytes:
                raise ArchiveRejected(
                    f"{at}: extension records before one member add up to {self.chain_bytes} bytes, "
                    f"over the limit of {limits.max_header_bytes} bytes"
                )
            if self.chain > MAX_EXTENSION_CHAIN:
                raise ArchiveRejected(
                    f"{at}: more than {MAX_EXTENSION_CHAIN} extension records before one member"
                )
            if info.type == tarfile.XGLTYPE:
                self.global_bytes += info.size
                budget = min(limits.max_header_bytes, MAX_GLOBAL_HEADER_BYTES)
                if self.global_bytes > budget:
                    raise ArchiveRejected(
                        f"{at}: PAX global headers add up to {self.global_bytes} bytes, over the limit "
                        f"of {budget} bytes"
                    )
            return
        if info.type == tarfile.GNUTYPE_SPARSE:
            raise ArchiveRejected(f"{at}: GNU sparse member not allowed")
        self.chain = self.chain_bytes = 0
        self.entries += 1
        if self.entries > limits.max_entries:
            raise ArchiveRejected(f"{at}: more than {limits.max_entries} members, the limit")


def guarded_tarinfo(guard: HeaderGuard) -> type[tarfile.TarInfo]:
    """A TarInfo class whose header processing asks `guard` first (one class per extraction)."""

    def _refuse_sparse(self: tarfile.TarInfo, *_args: Any) -> None:
        raise ArchiveRejected(f"header at offset {self.offset}: PAX (GNU) sparse member not allowed")

    def _proc_member(self: tarfile.TarInfo, tar: tarfile.TarFile) -> tarfile.TarInfo:
        guard.header(self)
        result: tarfile.TarInfo = tarfile.TarInfo._proc_member(self, tar)  # type: ignore[attr-defined]
        return result

    return type(
        "GuardedTarInfo",
        (tarfile.TarInfo,),
        {
            "_proc_member": _proc_member,
            "_proc_gnusparse_00": _refuse_sparse,
            "_proc_gnusparse_01": _refuse_sparse,
            "_proc_gnusparse_10": _refuse_sparse,
        },
    )


class StreamMeter:
    """The decompressed stream as tarfile reads it: counts bytes, checks the ratio and the trailer."""

    def __init__(self, gz: gzip.GzipFile, raw: IO[bytes], guard: HeaderGuard) -> None:
        self.gz = gz
        self.raw = raw
        self.guard = guard
        self.total = 0
        self.end_of_archive: int | None = None  # offset of the end-of-archive marker, once known

    def read(self, size: int = -1) -> bytes:
        if self.guard.check is not None:
            self.guard.check()
        limits = self.guard.limits
        if size is None or size < 0:
            size = CHUNK_BYTES
        data = self.gz.read(size)
        self.total += len(data)
        if self.total > limits.ratio_grace_bytes:
            compressed = max(self.raw.tell(), 1)
            if self.total > limits.max_ratio * compressed:
                raise ArchiveRejected(
                    f"decompressed {self.total} bytes from {compressed} compressed bytes, over the "
                    f"compression ratio limit of {limits.max_ratio:g}"
                )
        if self.end_of_archive is not None:
            trailing = self.total - self.end_of_archive
            if trailing > limits.max_trailing_bytes:
                raise ArchiveRejected(
                    f"more than {limits.max_trailing_bytes} bytes of data after the end-of-archive marker "
                    f"at offset {self.end_of_archive}"
                )
        return data

    def drain(self, end_of_archive: int) -> None:
        """Read what follows the end-of-archive marker (bounded), which checks the gzip trailer."""
        self.end_of_archive = end_of_archive
        while self.read(CHUNK_BYTES):
            pass
