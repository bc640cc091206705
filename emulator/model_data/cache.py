"""The digest-addressed cache of model directories, shared by every endpoint using the same data.

Layout under `root`::

    models/<sha256>/   finished model directories, immutable, published by an atomic rename.
                       Gzip: sha256 of the archive bytes. Uncompressed: sha256 of a manifest of
                       (name, ETag, size) of the objects, so a listing identifies its directory.
    tmp/               downloads and extractions in progress; removed when they fail.
    index.json         source fingerprint -> archive digest: [s3, bucket, key, ETag, size] and
                       [file, real path, size, mtime_ns], so a repeat needs no download or hash.

A model directory is built in a fresh temp dir (an archive extracted, or files laid out by a fetcher)
within the size cap, and published only before the download deadline.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from emulator.config import ArchiveLimits
from emulator.model.resources import ModelDataSource
from emulator.model_data.extract import DIR_MODE, ArchiveRejected, ArchiveTooLarge, extract_archive
from emulator.model_data.sources import (
    ModelDataFailure,
    extract_failed_message,
    too_large_message,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ArtifactStats:
    """Counters a test (or a log line) can read to prove what materialize did."""

    downloads: int = 0  # S3 objects fetched
    hashes: int = 0  # local files hashed
    extractions: int = 0  # model directories built (archive extracted or objects laid out)
    reuses: int = 0  # materialize answered by a model directory that already existed


class ModelCache:
    """Model directories under `root`, their index, the locks that build each once, and counters.

    `check_deadline` raises once the running materialize call (its thread's) is past its deadline."""

    def __init__(self, root: Path, limits: ArchiveLimits, check_deadline: Callable[[], None]) -> None:
        self.models_dir = root / "models"
        self.tmp_dir = root / "tmp"
        self.index_file = root / "index.json"
        self.limits = limits
        self.max_extracted_bytes = limits.max_extracted_bytes
        self._check_deadline = check_deadline
        self._guard = threading.Lock()  # protects the fields below
        self._locks: dict[str, threading.Lock] = {}
        self._stats = ArtifactStats()
        self.models_dir.mkdir(parents=True, exist_ok=True)
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        self._index: dict[str, str] = self._load_index()

    @property
    def stats(self) -> ArtifactStats:
        with self._guard:
            return self._stats

    # -- building model directories -----------------------------------------------------------------

    def check_size(self, source: ModelDataSource, total: int) -> None:
        if total > self.max_extracted_bytes:
            raise ModelDataFailure(
                f'Invalid model data at URL "{source.uri}": the model data is too large. Please reduce its '
                "size or move to an instance type with more memory.",
                f"{total} bytes, over the cap of {self.max_extracted_bytes} bytes",
            )

    def extract(self, source: ModelDataSource, archive: Path, digest: str) -> Path:
        def unpack(tmp: Path) -> str:
            try:
                result = extract_archive(archive, tmp, self.limits, self._check_deadline)
            except ArchiveTooLarge as exc:
                raise ModelDataFailure(too_large_message(source.uri), exc.detail) from exc
            except ArchiveRejected as exc:
                raise ModelDataFailure(extract_failed_message(source.uri), exc.detail) from exc
            log.info("extracted %s: %d files, %d bytes", source.uri, result.files, result.total_bytes)
            return digest

        return self.build(source, unpack, digest)[1]

    def build(
        self, source: ModelDataSource, lay_out: Callable[[Path], str], digest: str | None = None
    ) -> tuple[str, Path]:
        """Fill a fresh temp dir with `lay_out` (which returns the digest) and publish it atomically.

        With the digest known up front, an existing model directory is reused without any work.
        """
        if digest is not None:
            with self.locked("digest:" + digest):
                return digest, self._build_locked(source, lay_out, digest)
        tmp = Path(tempfile.mkdtemp(prefix="build-", dir=self.tmp_dir))
        try:
            digest = lay_out(tmp)
            with self.locked("digest:" + digest):
                return digest, self._publish(source, tmp, digest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _build_locked(self, source: ModelDataSource, lay_out: Callable[[Path], str], digest: str) -> Path:
        target = self.models_dir / digest
        if target.is_dir():
            self.count(reuses=1)
            log.info("model data %s: reusing %s", source.uri, target)
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f"build-{digest[:12]}-", dir=self.tmp_dir))
        try:
            lay_out(tmp)
            return self._publish(source, tmp, digest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _publish(self, source: ModelDataSource, tmp: Path, digest: str) -> Path:
        target = self.models_dir / digest
        if target.is_dir():
            self.count(reuses=1)
            return target
        self._check_deadline()  # a model directory finished too late is not published
        try:
            os.chmod(tmp, DIR_MODE)
            for dirpath, _dirs, _files in os.walk(tmp):
                os.chmod(dirpath, DIR_MODE)
            os.rename(tmp, target)
        except OSError as exc:
            if target.is_dir():  # another process published the same content first
                self.count(reuses=1)
                return target
            raise ModelDataFailure(
                extract_failed_message(source.uri), f"could not publish {target}: {exc}"
            ) from exc
        self.count(extractions=1)
        log.info("model data %s: built %s", source.uri, target)
        return target

    # -- index, locks, counters ---------------------------------------------------------------------

    def _load_index(self) -> dict[str, str]:
        try:
            data = json.loads(self.index_file.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable model data index %s: %s", self.index_file, exc)
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def lookup(self, fingerprint: str) -> Path | None:
        with self._guard:
            digest = self._index.get(fingerprint)
        if digest is None:
            return None
        target = self.models_dir / digest
        if not target.is_dir():
            return None
        self.count(reuses=1)
        log.info("model data index hit: %s", target)
        return target

    def remember(self, fingerprint: str, digest: str) -> None:
        with self._guard:
            self._index[fingerprint] = digest
            snapshot = json.dumps(self._index, indent=0, sort_keys=True)
            # Written under the guard so two writers in this process cannot interleave.
            fd, name = tempfile.mkstemp(prefix="index-", dir=self.tmp_dir)
            try:
                with os.fdopen(fd, "w") as f:
                    f.write(snapshot)
                os.replace(name, self.index_file)
            except OSError as exc:
                Path(name).unlink(missing_ok=True)
                log.warning("could not write model data index %s: %s", self.index_file, exc)

    @contextmanager
    def locked(self, key: str) -> Iterator[None]:
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            yield

    def count(self, **increments: int) -> None:
        with self._guard:
            current = self._stats
            self._stats = replace(
                current, **{name: getattr(current, name) + n for name, n in increments.items()}
            )
