"""Safe extraction of a model data archive (a gzip-compressed tar) into a fresh directory.

SageMaker decompresses `model.tar.gz` into /opt/ml/model before the container starts. smlocal does
the same on the host, and the archive is untrusted input, so extraction here is defensive:

* one streaming pass (gzip -> tar), nothing held in memory; the gzip trailer (CRC, length) is checked;
* refused: absolute member names, `..` components, device files, FIFOs and any other type that is not
  a regular file, a directory, a symbolic link or a hard link; hard links must name an earlier regular
  file of the archive; symbolic links must be relative and stay inside the tree (a chain of links is
  resolved on the finished tree, so `a -> sub/lnk/..` with `sub/lnk -> ..` is caught);
* symbolic links are created last, after every file and directory, and parent directories are walked
  with lstat, so no write ever passes through a link;
* modes are normalised so the container can read everything whatever user it runs as: directories
  0755, files 0644 (0755 if any execute bit was set); set-id and sticky bits are dropped;
* bounded whatever the archive (`ArchiveLimits`, emulator/config.py): each PAX extended header and
  GNU long-name/long-link record is refused above `max_header_bytes` *before* tarfile reads it (tarfile
  reads such records whole into memory); the records before one member share that budget, all global
  PAX headers of the archive share `MAX_GLOBAL_HEADER_BYTES` (64 KiB), and at most
  `MAX_EXTENSION_CHAIN` records may precede a member; GNU sparse members (old and PAX forms, whose
  maps tarfile also reads whole) are refused; the number of members is capped (`max_entries`); the
  total size of the files is capped (`max_extracted_bytes`); the ratio of decompressed to compressed
  bytes is checked as the stream is read (`max_ratio`, past `ratio_grace_bytes`); after the
  end-of-archive marker at most `max_trailing_bytes` are read (enough to check the gzip trailer);
* tarfile's list of members is emptied as the archive is walked, so memory does not grow with it.

The header checks hook tarfile's documented extension point (a TarInfo subclass passed as `tarinfo`,
whose `_proc_member` "can be overridden in a subclass", Lib/tarfile.py).

`extract_archive` raises `ArchiveRejected` (with the reason: which member and why) or `ArchiveTooLarge`;
the caller turns them into SageMaker's FailureReason texts. A `check` callback given to it is called on
every read (the download deadline) and may raise anything. On any failure the destination directory is
left to the caller to delete (it is a temporary directory that never becomes visible in the cache).
"""

from __future__ import annotations

import gzip
import os
import stat
import tarfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

from emulator.config import ArchiveLimits

CHUNK_BYTES = 1 << 20
GZIP_MAGIC = b"\x1f\x8b"
DIR_MODE = 0o755
FILE_MODE = 0o644
EXEC_FILE_MODE = 0o755
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


@dataclass(frozen=True)
class ExtractResult:
    files: int
    directories: int
    links: int
    total_bytes: int


def _member_parts(name: str) -> tuple[str, ...]:
    """Split a member name into path segments; refuse absolute names and `..` segments."""
    if name.startswith("/"):
        raise ArchiveRejected(f"member {name!r}: absolute path")
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    if ".." in parts:
        raise ArchiveRejected(f"member {name!r}: path contains a '..' component")
    return parts


def _inside(root: str, path: str) -> bool:
    return path == root or path.startswith(root + os.sep)


class _Extractor:
    def __init__(self, dest: Path, max_bytes: int) -> None:
        self.root = os.path.realpath(dest)
        self.max_bytes = max_bytes
        self.total_bytes = 0
        self.files = 0
        self.directories = 0
        # (parts, link target, member name) in archive order; created after everything else.
        self.symlinks: dict[tuple[str, ...], tuple[str, str]] = {}

    def path_of(self, parts: tuple[str, ...]) -> str:
        return os.path.join(self.root, *parts)

    def make_parents(self, parts: tuple[str, ...], name: str) -> None:
        """Create the parent directories of `parts`, refusing to pass through anything but a real dir."""
        current = self.root
        for segment in parts[:-1]:
            current = os.path.join(current, segment)
            try:
                st = os.lstat(current)
            except FileNotFoundError:
                os.mkdir(current, DIR_MODE)
                self.directories += 1
                continue
            if not stat.S_ISDIR(st.st_mode):
                raise ArchiveRejected(f"member {name!r}: a parent path is not a directory in the archive")

    def check_free(self, parts: tuple[str, ...], name: str) -> None:
        if parts in self.symlinks:
            raise ArchiveRejected(f"member {name!r}: clashes with an earlier symbolic link of that name")
        for i in range(1, len(parts)):
            if parts[:i] in self.symlinks:
                raise ArchiveRejected(f"member {name!r}: lies beneath a symbolic link of the archive")

    def add_dir(self, parts: tuple[str, ...], name: str) -> None:
        if not parts:
            return  # "." or "./": the model directory itself
        self.check_free(parts, name)
        self.make_parents(parts, name)
        path = self.path_of(parts)
        try:
            os.mkdir(path, DIR_MODE)
            self.directories += 1
        except FileExistsError:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                raise ArchiveRejected(f"member {name!r}: directory clashes with an earlier file") from None

    def add_file(self, parts: tuple[str, ...], member: tarfile.TarInfo, data: IO[bytes] | None) -> None:
        name = member.name
        if not parts:
            raise ArchiveRejected(f"member {name!r}: a file cannot replace the model directory")
        if self.total_bytes + member.size > self.max_bytes:
            raise ArchiveTooLarge(
                f"member {name!r}: extracting it would exceed the cap of {self.max_bytes} bytes"
            )
        self.check_free(parts, name)
        self.make_parents(parts, name)
        path = self.path_of(parts)
        mode = EXEC_FILE_MODE if member.mode & 0o111 else FILE_MODE
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(path, flags, mode)
        except FileExistsError:
            if not stat.S_ISREG(os.lstat(path).st_mode):
                raise ArchiveRejected(f"member {name!r}: file clashes with an earlier directory") from None
            os.unlink(path)  # a later member of the same name wins, as with tar(1)
            self.files -= 1
            fd = os.open(path, flags, mode)
        written = 0
        with os.fdopen(fd, "wb") as out:
            while data is not None:
                chunk = data.read(CHUNK_BYTES)
                if not chunk:
                    break
                written += len(chunk)
                if self.total_bytes + written > self.max_bytes:
                    raise ArchiveTooLarge(
                        f"member {name!r}: extracting it would exceed the cap of {self.max_bytes} bytes"
                    )
                out.write(chunk)
            os.fchmod(out.fileno(), mode)  # the umask may have narrowed it
        if written != member.size:
            raise ArchiveRejected(f"member {name!r}: truncated ({written} of {member.size} bytes)")
        try:
            os.utime(path, (member.mtime, member.mtime), follow_symlinks=False)
        except (OverflowError, ValueError, OSError):
            pass  # an out-of-range mtime is harmless; keep the extraction time
        self.total_bytes += written
        self.files += 1

    def add_hardlink(self, parts: tuple[str, ...], member: tarfile.TarInfo) -> None:
        name = member.name
        target = member.linkname
        if target.startswith("/"):
            raise ArchiveRejected(f"member {name!r}: hard link to absolute path {target!r}")
        if ".." in target.split("/"):
            raise ArchiveRejected(f"member {name!r}: hard link target {target!r} leaves the model directory")
        target_parts = tuple(p for p in target.split("/") if p not in ("", "."))
        if not parts:
            raise ArchiveRejected(f"member {name!r}: a hard link cannot replace the model directory")
        self.check_free(parts, name)
        target_path = self.path_of(target_parts)
        try:
            target_st = os.lstat(target_path)
        except FileNotFoundError:
            target_st = None
        if target_st is None or not stat.S_ISREG(target_st.st_mode) or target_parts in self.symlinks:
            raise ArchiveRejected(
                f"member {name!r}: hard link target {target!r} is not an earlier regular file of the archive"
            )
        self.make_parents(parts, name)
        path = self.path_of(parts)
        if os.path.lexists(path):
            raise ArchiveRejected(f"member {name!r}: hard link clashes with an earlier member")
        os.link(target_path, path, follow_symlinks=False)
        self.files += 1

    def add_symlink(self, parts: tuple[str, ...], member: tarfile.TarInfo) -> None:
        name = member.name
        target = member.linkname
        if not parts:
            raise ArchiveRejected(f"member {name!r}: a symbolic link cannot replace the model directory")
        if not target:
            raise ArchiveRejected(f"member {name!r}: symbolic link with an empty target")
        if target.startswith("/"):
            raise ArchiveRejected(f"member {name!r}: symbolic link to absolute path {target!r}")
        # Lexical check first; chains through other links are checked on the finished tree.
        resolved = os.path.normpath(os.path.join(self.root, *parts[:-1], target))
        if not _inside(self.root, resolved):
            raise ArchiveRejected(
                f"member {name!r}: symbolic link target {target!r} leaves the model directory"
            )
        if os.path.lexists(self.path_of(parts)):
            raise ArchiveRejected(f"member {name!r}: symbolic link clashes with an earlier member")
        self.symlinks[parts] = (target, name)

    def finish_symlinks(self) -> None:
        for parts, (target, name) in self.symlinks.items():
            self.make_parents(parts, name)
            path = self.path_of(parts)
            if os.path.lexists(path):
                raise ArchiveRejected(f"member {name!r}: symbolic link clashes with an earlier member")
            os.symlink(target, path)
        for parts, (target, name) in self.symlinks.items():
            real = os.path.realpath(self.path_of(parts))
            if not _inside(self.root, real):
                raise ArchiveRejected(
                    f"member {name!r}: symbolic link target {target!r} leaves the model directory "
                    "through another link"
                )


#: What a damaged gzip or tar stream raises while it is read (BadGzipFile is also an OSError).
#: tarfile lets ValueError (and UnicodeDecodeError) escape on some malformed headers.
_READ_ERRORS = (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, ValueError, OverflowError)


def _record_kind(type_: bytes) -> str:
    if type_ == tarfile.GNUTYPE_LONGNAME:
        return "GNU long-name record"
    if type_ == tarfile.GNUTYPE_LONGLINK:
        return "GNU long-link record"
    if type_ == tarfile.XGLTYPE:
        return "PAX global header"
    return "PAX extended header"


class _Guard:
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


def _guarded_tarinfo(guard: _Guard) -> type[tarfile.TarInfo]:
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


class _Meter:
    """The decompressed stream as tarfile reads it: counts bytes, checks the ratio and the trailer."""

    def __init__(self, gz: gzip.GzipFile, raw: IO[bytes], guard: _Guard) -> None:
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


def extract_archive(
    archive: Path,
    dest: Path,
    limits: ArchiveLimits | None = None,
    check: Callable[[], None] | None = None,
) -> ExtractResult:
    """Extract the gzip tar `archive` into the existing, empty directory `dest`.

    Raises ArchiveRejected / ArchiveTooLarge; OSError only for failures of the host file system;
    whatever `check` raises.
    """
    limits = limits or ArchiveLimits()
    guard = _Guard(limits, check)
    with open(archive, "rb") as raw:
        magic = raw.read(2)
        if magic != GZIP_MAGIC:
            raise ArchiveRejected(f"not a gzip file (starts with {magic!r}, expected {GZIP_MAGIC!r})")
        raw.seek(0)
        ex = _Extractor(dest, limits.max_extracted_bytes)
        try:
            with gzip.GzipFile(fileobj=raw, mode="rb") as gz:
                meter = _Meter(gz, raw, guard)
                with tarfile.open(
                    None,
                    "r|",
                    fileobj=cast(IO[bytes], meter),  # tarfile only calls read()
                    bufsize=CHUNK_BYTES,
                    tarinfo=_guarded_tarinfo(guard),
                ) as tar:
                    while (member := tar.next()) is not None:
                        tar.members.clear()  # type: ignore[attr-defined]  # stream mode keeps every TarInfo
                        try:
                            _extract_member(ex, tar, member)
                        except _READ_ERRORS:
                            raise
                        except OSError as exc:
                            detail = f"member {member.name!r}: could not be written: {exc}"
                            raise ArchiveRejected(detail) from exc
                    meter.drain(tar.offset)  # the marker's offset; reads the gzip trailer(s)
        except _READ_ERRORS as exc:
            raise ArchiveRejected(f"corrupt archive: {type(exc).__name__}: {exc}") from exc
        except RecursionError as exc:
            raise ArchiveRejected("corrupt archive: headers nested too deeply") from exc
        try:
            ex.finish_symlinks()
        except OSError as exc:
            raise ArchiveRejected(f"symbolic links could not be created: {exc}") from exc
    for dirpath, _dirnames, _files in os.walk(ex.root):
        os.chmod(dirpath, DIR_MODE)
    return ExtractResult(ex.files, ex.directories, len(ex.symlinks), ex.total_bytes)


def _extract_member(ex: _Extractor, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
    parts = _member_parts(member.name)
    if member.sparse is not None:
        raise ArchiveRejected(f"member {member.name!r}: sparse file not allowed")
    if member.isreg():
        ex.add_file(parts, member, tar.extractfile(member))
    elif member.isdir():
        ex.add_dir(parts, member.name)
    elif member.issym():
        ex.add_symlink(parts, member)
    elif member.islnk():
        ex.add_hardlink(parts, member)
    else:
        raise ArchiveRejected(f"member {member.name!r}: {_kind(member)} not allowed")


def _kind(member: tarfile.TarInfo) -> str:
    if member.ischr():
        return "character device"
    if member.isblk():
        return "block device"
    if member.isfifo():
        return "FIFO"
    return f"member type {member.type!r}"
