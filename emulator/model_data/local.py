"""Model data on this host: `file:///abs/path` or a plain path to a tar.gz (hashed, then extracted into
the cache), one file with CompressionType None (copied), or — an smlocal extension — a directory,
returned as-is without a copy, if it lies in the directories the server may mount.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

from emulator.model.resources import ModelDataSource
from emulator.model_data import timings
from emulator.model_data.cache import ModelCache
from emulator.model_data.extract import CHUNK_BYTES, FILE_MODE
from emulator.model_data.sources import (
    ModelDataFailure,
    digest_of,
    download_failed_message,
    invalid_object,
    name_problem,
    outside_allowed_message,
)


class LocalFetcher:
    """`local_dirs`: the directories a local model data directory must lie in (None: any)."""

    def __init__(
        self, cache: ModelCache, local_dirs: tuple[Path, ...] | None, check_deadline: Callable[[], None]
    ) -> None:
        self.cache = cache
        self.local_dirs = local_dirs
        self._check_deadline = check_deadline

    def dir_problem(self, path: Path) -> str | None:
        """Why the local directory `path` may not be model data, or None (files are copied, so free)."""
        if self.local_dirs is None or not path.is_dir():
            return None
        real = Path(os.path.realpath(path))
        if any(real == root or root in real.parents for root in self.local_dirs):
            return None
        return outside_allowed_message(str(path), real, self.local_dirs)

    def fetch(self, source: ModelDataSource, path: Path) -> Path:
        try:
            st = path.stat()
        except OSError as exc:
            raise ModelDataFailure(download_failed_message(source.uri), f"{path}: {exc.strerror}") from exc
        if stat.S_ISDIR(st.st_mode):
            problem = self.dir_problem(path)
            if problem:
                raise ModelDataFailure(download_failed_message(source.uri), problem)
            timings.current().mounted = True
            return path.resolve()  # smlocal extension: a directory is mounted as it is
        if not stat.S_ISREG(st.st_mode):
            raise ModelDataFailure(download_failed_message(source.uri), f"{path}: not a file or directory")
        real = os.path.realpath(path)
        fingerprint = json.dumps(["file", source.compression, real, st.st_size, st.st_mtime_ns])
        with self.cache.locked(fingerprint):
            known = self.cache.lookup(fingerprint)
            if known is not None:
                return known
            if source.compression == "None":
                digest, model = self.cache.build(source, lambda tmp: self._copy_single(source, path, tmp))
            else:
                digest = self._hash_file(source, path)
                model = self.cache.extract(source, path, digest)
            self.cache.remember(fingerprint, digest)
            return model

    def _hash_file(self, source: ModelDataSource, path: Path) -> str:
        sha = hashlib.sha256()
        try:
            with open(path, "rb") as f:
                while chunk := f.read(CHUNK_BYTES):
                    self._check_deadline()
                    sha.update(chunk)
        except OSError as exc:
            raise ModelDataFailure(download_failed_message(source.uri), f"{path}: {exc}") from exc
        self.cache.count(hashes=1)
        return sha.hexdigest()

    def _copy_single(self, source: ModelDataSource, path: Path, tmp: Path) -> str:
        problem = name_problem(path.name)
        if problem:
            raise invalid_object(source.uri, str(path), problem)
        self.cache.check_size(source, path.stat().st_size)
        sha = hashlib.sha256()
        try:
            with open(path, "rb") as src, open(tmp / path.name, "wb") as out:
                while chunk := src.read(CHUNK_BYTES):
                    self._check_deadline()
                    sha.update(chunk)
                    out.write(chunk)
        except OSError as exc:
            raise ModelDataFailure(download_failed_message(source.uri), f"{path}: {exc}") from exc
        os.chmod(tmp / path.name, FILE_MODE)
        self.cache.count(hashes=1)
        return digest_of("file-v1", path.name, sha.hexdigest())
