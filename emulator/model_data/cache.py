"""The digest-addressed cache of model directories, shared by every endpoint using the same data.

Layout under `root`::

    models/<sha256>/   finished model directories, immutable, published by an atomic rename.
                       Gzip: sha256 of the archive bytes. Uncompressed: sha256 of a manifest of
                       (name, ETag, size) of the objects, so a listing identifies its directory.
    tmp/               extractions and layouts in progress; removed when they fail.
    partial/           S3 objects downloaded (or part-way), kept until their directory is published,
                       so that a failed attempt resumes (partial.py).
    index.json         source fingerprint -> archive digest (index.py: a journal of changes).

A model directory is built in a fresh temp dir (an archive extracted, or files laid out by a fetcher)
within the size cap, and published only before the download deadline.

With a byte budget (the multi-model cache, whose directories are never mounted: instances link
their files), every directory handed out is pinned until the calling thread's work is done
(`release_held`), then the least recently used unpinned directories are evicted until the cache fits
the budget; at start, leftovers in tmp/ go and the cache is brought within the budget. Without one
(the single-model cache, whose directories are mounted into containers) nothing is evicted.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from emulator.config import ArchiveLimits
from emulator.model.resources import ModelDataSource
from emulator.model_data import timings
from emulator.model_data.budget import CacheBudget, tree_bytes
from emulator.model_data.extract import DIR_MODE, ArchiveRejected, ArchiveTooLarge, extract_archive
from emulator.model_data.index import ModelIndex
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
    resumed_bytes: int = 0  # bytes of S3 objects an interrupted attempt left on disk, not fetched again
    kept_objects: int = 0  # S3 objects an interrupted attempt completed, not fetched again


class ModelCache:
    """Model directories under `root`, their index, the locks that build each once, and counters.

    `check_deadline` raises once the running materialize call (its thread's) is past its deadline."""

    def __init__(
        self,
        root: Path,
        limits: ArchiveLimits,
        check_deadline: Callable[[], None],
        budget_bytes: float | None = None,
    ) -> None:
        self.root = root
        self.models_dir = root / "models"
        self.tmp_dir = root / "tmp"
        self.index_file = root / "index.json"
        self.limits = limits
        self.max_extracted_bytes = limits.max_extracted_bytes
        self._check_deadline = check_deadline
        self._guard = threading.Lock()  # protects the fields below
        self._locks: dict[str, tuple[threading.Lock, list[int]]] = {}  # key -> (lock, [holders])
        self._stats = ArtifactStats()
        self._budget = CacheBudget(budget_bytes) if budget_bytes is not None else None
        self._held = threading.local()  # the digests the current thread's work was handed
        self.models_dir.mkdir(parents=True, exist_ok=True)
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        self._index = ModelIndex(self.index_file, self.tmp_dir)
        if self._budget is not None:
            self._start_budget(self._budget)

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
            started = time.monotonic()
            try:
                result = extract_archive(archive, tmp, self.limits, self._check_deadline)
            except ArchiveTooLarge as exc:
                raise ModelDataFailure(too_large_message(source.uri), exc.detail) from exc
            except ArchiveRejected as exc:
                raise ModelDataFailure(extract_failed_message(source.uri), exc.detail) from exc
            timings.current().add_extraction(result.total_bytes, time.monotonic() - started)
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
            self._hand_out(digest)
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
            self._hand_out(digest)
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
                self._hand_out(digest)
                return target
            raise ModelDataFailure(
                extract_failed_message(source.uri), f"could not publish {target}: {exc}"
            ) from exc
        self.count(extractions=1)
        if self._budget is not None:
            size = tree_bytes(target)
            with self._guard:
                self._budget.add(digest, size)
        self._hand_out(digest)
        log.info("model data %s: built %s", source.uri, target)
        return target

    # -- index, locks, counters ---------------------------------------------------------------------

    def lookup(self, fingerprint: str) -> Path | None:
        with self._guard:
            digest = self._index.get(fingerprint)
            if digest is None:
                return None
            target = self.models_dir / digest
            if not target.is_dir():  # checked under the guard: an eviction renames under it too
                return None
            self._hand_out_locked(digest)
        self.count(reuses=1)
        log.info("model data index hit: %s", target)
        return target

    def remember(self, fingerprint: str, digest: str) -> None:
        with self._guard:
            self._index.put(fingerprint, digest)

    # -- the budget -----------------------------------------------------------------------------------

    def _hand_out(self, digest: str) -> None:
        with self._guard:
            self._hand_out_locked(digest)

    def _hand_out_locked(self, digest: str) -> None:
        """`digest`'s directory goes to the current thread's work: pinned until `release_held`."""
        if self._budget is None:
            return
        self._budget.pin(digest)
        self._budget.touch(digest)
        held: list[str] = getattr(self._held, "digests", [])
        self._held.digests = [*held, digest]

    def release_held(self) -> None:
        """The current thread's work is done with what it was handed: unpin, then evict to the budget."""
        if self._budget is None:
            return
        held: list[str] = getattr(self._held, "digests", [])
        self._held.digests = []
        with self._guard:
            for digest in held:
                self._budget.unpin(digest)
        self.evict()

    def evict(self) -> list[str]:
        """Remove least recently used unpinned directories until the cache fits its budget."""
        if self._budget is None:
            return []
        with self._guard:
            victims = self._budget.victims()
        evicted: list[str] = []
        for digest in victims:
            with self.locked("digest:" + digest), self._guard:
                if self._budget.pinned(digest):
                    continue  # handed out meanwhile
                target = self.models_dir / digest
                doomed = self.tmp_dir / f"evict-{digest}"
                try:
                    os.rename(target, doomed)  # gone for lookups at once; deleted below
                except OSError:
                    pass
                self._budget.remove(digest)
                self._index.drop_digest(digest)
            shutil.rmtree(doomed, ignore_errors=True)
            evicted.append(digest)
        if evicted:
            log.info("model data cache over its budget: evicted %d director(ies)", len(evicted))
        return evicted

    def _start_budget(self, budget: CacheBudget) -> None:
        """At start: leftovers of interrupted work go; the directories present are counted (last
        used: their modification time) and the cache brought within its budget."""
        for leftover in self.tmp_dir.iterdir():
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)
        now_wall, now = time.time(), time.monotonic()
        for path in self.models_dir.iterdir():
            if path.is_dir() and not path.is_symlink():
                budget.add(path.name, tree_bytes(path), now - (now_wall - path.stat().st_mtime))
        self.evict()

    @property
    def budgeted(self) -> bool:
        """The multi-model cache: its directories are evicted to a budget."""
        return self._budget is not None

    @property
    def cached_bytes(self) -> int | None:
        """Bytes of the directories the budget counts (None without a budget)."""
        with self._guard:
            return None if self._budget is None else self._budget.total_bytes

    # -- locks, counters ------------------------------------------------------------------------------

    @contextmanager
    def locked(self, key: str) -> Iterator[None]:
        """One holder of `key` at a time; the lock is dropped once nobody holds or waits for it
        (a lock kept per key ever seen grew with every model)."""
        with self._guard:
            lock, holders = self._locks.setdefault(key, (threading.Lock(), [0]))
            holders[0] += 1
        try:
            with lock:
                yield
        finally:
            with self._guard:
                holders[0] -= 1
                if not holders[0]:
                    del self._locks[key]

    @property
    def lock_count(self) -> int:
        with self._guard:
            return len(self._locks)

    def count(self, **increments: int) -> None:
        if increments.get("reuses"):  # the model directory existed: the call's data was cached
            timings.current().cached = True
        with self._guard:
            current = self._stats
            self._stats = replace(
                current, **{name: getattr(current, name) + n for name, n in increments.items()}
            )
