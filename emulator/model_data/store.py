"""Model data: from a model's data source to a host directory mounted read-only at /opt/ml/model.

`ArtifactStore.check_exists` is the synchronous check CreateModel makes; `materialize` (blocking, run
via asyncio.to_thread) fetches and unpacks the data before the container starts (contract §3.2).

Sources: `s3://bucket/key` (s3.py), `file:///abs/path` or a plain path to a tar.gz, and — an smlocal
extension — a local directory, which is returned as-is without a copy (local.py). CompressionType
"None" lays out S3 objects as files: S3Object gives one file named after the key's last segment,
S3Prefix gives every object under the prefix. Everything lands in the content-addressed cache under
`root`, shared by every endpoint using the same data (cache.py); S3 objects come through partial/,
so that an attempt that failed part-way resumes (partial.py). `check_exists` also refuses a gated
model's data without ModelAccessConfig.AcceptEula=True (gate.py).

Failure texts: extraction and "too large" follow the FailureReasons observed from SageMaker (§3.2);
the download text follows SageMaker's observed "Failed to download model data for container" form.
SageMaker's texts for rejected uncompressed object names, folder objects and name clashes are not
known: the `Invalid model data at URL ...` messages here are smlocal's own, in the same style, as
are the ValidationFailed texts for malformed sources. Every ModelDataError raised by `materialize` is
a `ModelDataFailure` whose `detail` names the object or member at fault and why (for the endpoint log).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from emulator.config import ArchiveLimits, ServerConfig
from emulator.errors import ModelDataNotFound, ValidationFailed
from emulator.model.resources import ModelDataSource
from emulator.model_data.cache import ArtifactStats, ModelCache
from emulator.model_data.gate import check_eula
from emulator.model_data.local import LocalFetcher
from emulator.model_data.s3 import S3Fetcher
from emulator.model_data.sources import (
    NO_DEADLINE,
    NOT_FOUND_CODES,
    Deadline,
    ModelDataFailure,
    default_local_dirs,
    error_code,
    locate,
    not_found_message,
)
from emulator.model_data.timings import MaterializeTimings, recording

T = TypeVar("T")


class ArtifactStore:
    """Fetches, verifies and unpacks model data into a content-addressed cache under `root`."""

    def __init__(
        self,
        root: Path,
        s3_client_factory: Callable[[], Any],
        *,
        limits: ArchiveLimits | None = None,
        local_dirs: tuple[Path, ...] | None = None,
        budget_bytes: float | None = None,
    ) -> None:
        """`local_dirs`: the directories a local model data directory must lie in (None: any).
        `budget_bytes`: evict least recently used directories beyond it (cache.py); only for a
        store whose directories are never mounted (the multi-model one)."""
        self.root = root
        self.limits = limits or ArchiveLimits()
        self.local_dirs = None if local_dirs is None else tuple(Path(os.path.realpath(d)) for d in local_dirs)
        self._deadline = threading.local()
        self._cache = ModelCache(root, self.limits, self._check_deadline, budget_bytes)
        self.models_dir = self._cache.models_dir
        self.tmp_dir = self._cache.tmp_dir
        self.index_file = self._cache.index_file
        self.max_extracted_bytes = self._cache.max_extracted_bytes
        self._local = LocalFetcher(self._cache, self.local_dirs, self._check_deadline)
        self._s3 = S3Fetcher(self._cache, s3_client_factory, self._current_deadline)

    @classmethod
    def for_server(cls, config: ServerConfig, s3_client_factory: Callable[[], Any]) -> ArtifactStore:
        """The server's store: its archive limits and the local directories it may mount."""
        local_dirs = config.local_model_dirs
        if local_dirs is None:
            local_dirs = default_local_dirs()
        return cls(
            config.artifacts_dir, s3_client_factory, limits=config.archive_limits, local_dirs=local_dirs
        )

    @classmethod
    def for_multi_model(cls, config: ServerConfig, s3_client_factory: Callable[[], Any]) -> ArtifactStore:
        """The multi-model endpoints' store: under the server's, within `multi_model_cache_gb`."""
        local_dirs = config.local_model_dirs
        if local_dirs is None:
            local_dirs = default_local_dirs()
        return cls(
            config.artifacts_dir / "multi-model",
            s3_client_factory,
            limits=config.archive_limits,
            local_dirs=local_dirs,
            budget_bytes=config.multi_model_cache_gb * 1024**3,
        )

    # -- public -------------------------------------------------------------------------------------

    @property
    def stats(self) -> ArtifactStats:
        return self._cache.stats

    def close(self) -> None:
        """Close the store's S3 connections (the server's shutdown)."""
        self._s3.close()

    def check_exists(self, source: ModelDataSource) -> None:
        """CreateModel's synchronous check: raise ModelDataNotFound when there is nothing at the URL."""
        where = locate(source)
        if isinstance(where, Path):
            if not where.exists():
                raise ModelDataNotFound(not_found_message(source.uri))
            problem = self._local.dir_problem(where)
            if problem:
                raise ValidationFailed(problem)
            return
        client = self._s3.client()
        check_eula(client, source, where.bucket)
        try:
            if source.data_type == "S3Prefix":
                listed = client.list_objects_v2(Bucket=where.bucket, Prefix=where.key, MaxKeys=1)
                if not listed.get("KeyCount", len(listed.get("Contents", []))):
                    raise ModelDataNotFound(not_found_message(source.uri))
            else:
                client.head_object(Bucket=where.bucket, Key=where.key)
        except ClientError as exc:
            if error_code(exc) in NOT_FOUND_CODES:
                raise ModelDataNotFound(not_found_message(source.uri)) from exc
            raise ValidationFailed(f"Could not access model data at {source.uri}. ({exc})") from exc
        except BotoCoreError as exc:
            raise ValidationFailed(f"Could not access model data at {source.uri}. ({exc})") from exc

    def materialize(
        self,
        source: ModelDataSource,
        timeout_s: float | None = None,
        shown_timeout_s: float | None = None,
        cancel: threading.Event | None = None,
        timings: MaterializeTimings | None = None,
    ) -> Path:
        """Return a host directory holding the model files (blocking; run it in a worker thread).

        `timeout_s` bounds download plus extraction (ModelDataDownloadTimeoutInSeconds): past it the
        work stops at the next chunk, nothing is published and the temporary files are removed.
        `shown_timeout_s` is the API value named in the failure (when a test scales `timeout_s`).
        `cancel`: once set, the work stops the same way (the instance it was for stopped).
        `timings`: filled with what the call spent its time on (timings.py: the cold-start profile).
        """
        try:
            with recording(timings):
                return self._materialize(source, timeout_s, shown_timeout_s, cancel)
        finally:
            self._cache.release_held()

    def materialize_into(
        self, source: ModelDataSource, use: Callable[[Path], T], cancel: threading.Event | None = None
    ) -> T:
        """materialize, then `use` the directory while it is pinned (a budgeted cache evicts it only
        after); returns what `use` returns. Blocking, as materialize."""
        try:
            return use(self._materialize(source, None, None, cancel))
        finally:
            self._cache.release_held()

    @property
    def cached_bytes(self) -> int | None:
        """Bytes of the cache's model directories when it has a budget (else None)."""
        return self._cache.cached_bytes

    def _materialize(
        self,
        source: ModelDataSource,
        timeout_s: float | None,
        shown_timeout_s: float | None,
        cancel: threading.Event | None,
    ) -> Path:
        self._deadline.current = Deadline(source.uri, timeout_s, shown_timeout_s, cancel)
        try:
            try:
                where = locate(source)
            except ValidationFailed as exc:
                raise ModelDataFailure(exc.message, exc.message) from exc
            if isinstance(where, Path):
                return self._local.fetch(source, where)
            if source.compression == "Gzip":
                return self._s3.archive(source, where)
            if source.data_type == "S3Prefix":
                return self._s3.prefix(source, where)
            return self._s3.object(source, where)
        finally:
            self._deadline.current = NO_DEADLINE

    def _current_deadline(self) -> Deadline:
        deadline: Deadline = getattr(self._deadline, "current", NO_DEADLINE)
        return deadline

    def _check_deadline(self) -> None:
        self._current_deadline().check()
