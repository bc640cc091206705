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
from typing import IO, cast

from emulator.config import ArchiveLimits
from emulator.model_data.limits import (
    CHUNK_BYTES,
    ArchiveRejected,
    ArchiveTooLarge,
    HeaderGuard,
    StreamMeter,
    guarded_tarinfo,
)

__all__ = ["CHUNK_BYTES", "ArchiveRejected", "ArchiveTooLarge", "ExtractResult", "extract_archive"]

GZIP_MAGIC = b"\x1f\x8b"
DIR_MODE = 0o755
FILE_MODE = 0o644
EXEC_FILE_MODE = 0o755


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
    guard = HeaderGuard(limits, check)
    with open(archive, "rb") as raw:
        magic = raw.read(2)
        if magic != GZIP_MAGIC:
            raise ArchiveRejected(f"not a gzip file (starts with {magic!r}, expected {GZIP_MAGIC!r})")
        raw.seek(0)
        ex = _Extractor(dest, limits.max_extracted_bytes)
        try:
            with gzip.GzipFile(fileobj=raw, mode="rb") as gz:
                meter = StreamMeter(gz, raw, guard)
                with tarfile.open(
                    None,
                    "r|",
                    fileobj=cast(IO[bytes], meter),  # tarfile only calls read()
                    bufsize=CHUNK_BYTES,
                    tarinfo=guarded_tarinfo(guard),
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
