"""Model data: from a model's data source to a host directory mounted read-only at /opt/ml/model.

`ArtifactStore.check_exists` is the synchronous check CreateModel makes; `materialize` (blocking, run
via asyncio.to_thread) fetches and unpacks the data before the container starts (contract §3.2).

Sources: `s3://bucket/key` (boto3 clients from the factory, so the endpoint is the caller's choice),
`file:///abs/path` or a plain path to a tar.gz, and — an smlocal extension — a local directory, which
is returned as-is without a copy. CompressionType "None" lays out S3 objects as files: S3Object gives
one file named after the key's last segment, S3Prefix gives every object under the prefix.

Layout under `root` (content-addressed, shared by every endpoint using the same data)::

    models/<sha256>/   finished model directories, immutable, published by an atomic rename.
                       Gzip: sha256 of the archive bytes. Uncompressed: sha256 of a manifest of
                       (name, ETag, size) of the objects, so a listing identifies its directory.
    tmp/               downloads and extractions in progress; removed when they fail.
    index.json         source fingerprint -> archive digest: [s3, bucket, key, ETag, size] and
                       [file, real path, size, mtime_ns], so a repeat needs no download or hash.

Failure texts: extraction and "too large" follow the FailureReasons observed from SageMaker (§3.2);
the download text follows SageMaker's observed "Failed to download model data for container" form.
SageMaker's texts for rejected uncompressed object names, folder objects and name clashes are not
known: the `Invalid model data at URL ...` messages here are smlocal's own, in the same style, as
are the ValidationFailed texts for malformed sources. Every ModelDataError raised by `materialize` is
a `ModelDataFailure` whose `detail` names the object or member at fault and why (for the endpoint log).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from emulator.config import ArchiveLimits, ServerConfig
from emulator.errors import ModelDataNotFound, ValidationFailed
from emulator.model.resources import ModelDataSource  # re-exported: one class for model and hosting
from emulator.model_data.extract import (
    CHUNK_BYTES,
    DIR_MODE,
    FILE_MODE,
    ArchiveRejected,
    ArchiveTooLarge,
    extract_archive,
)
from emulator.model_data.sources import (
    NO_DEADLINE,
    NOT_FOUND_CODES,
    Deadline,
    ModelDataFailure,
    S3Location,
    default_local_dirs,
    digest_of,
    download_failed_message,
    error_code,
    extract_failed_message,
    invalid_object,
    locate,
    name_problem,
    not_found_message,
    outside_allowed_message,
    too_large_message,
)

__all__ = [
    "ArtifactStats",
    "ArtifactStore",
    "ModelDataFailure",
    "ModelDataSource",
]

log = logging.getLogger(__name__)

#: S3 bodies are read in pieces this size, so the download deadline is checked often even when the
#: source trickles (a read returns only once it has the whole piece).
S3_READ_BYTES = 64 * 1024


def _shut_down_stream(body: Any) -> None:
    """Shut down the socket of a botocore StreamingBody (urllib3 response), if it can be found."""
    raw = getattr(body, "_raw_stream", None)
    connection = getattr(raw, "connection", None) or getattr(raw, "_connection", None)
    sock = getattr(connection, "sock", None)
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


@dataclass(frozen=True)
class ArtifactStats:
    """Counters a test (or a log line) can read to prove what materialize did."""

    downloads: int = 0  # S3 objects fetched
    hashes: int = 0  # local files hashed
    extractions: int = 0  # model directories built (archive extracted or objects laid out)
    reuses: int = 0  # materialize answered by a model directory that already existed


class ArtifactStore:
    """Fetches, verifies and unpacks model data into a content-addressed cache under `root`."""

    def __init__(
        self,
        root: Path,
        s3_client_factory: Callable[[], Any],
        *,
        limits: ArchiveLimits | None = None,
        local_dirs: tuple[Path, ...] | None = None,
    ) -> None:
        """`local_dirs`: the directories a local model data directory must lie in (None: any)."""
        self.root = root
        self.models_dir = root / "models"
        self.tmp_dir = root / "tmp"
        self.index_file = root / "index.json"
        self.limits = limits or ArchiveLimits()
        self.max_extracted_bytes = self.limits.max_extracted_bytes
        self.local_dirs = None if local_dirs is None else tuple(Path(os.path.realpath(d)) for d in local_dirs)
        self._deadline = threading.local()
        self._factory = s3_client_factory
        self._client: Any = None
        self._guard = threading.Lock()  # protects the fields below
        self._locks: dict[str, threading.Lock] = {}
        self._stats = ArtifactStats()
        self.models_dir.mkdir(parents=True, exist_ok=True)
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        self._index: dict[str, str] = self._load_index()

    @classmethod
    def for_server(cls, config: ServerConfig, s3_client_factory: Callable[[], Any]) -> ArtifactStore:
        """The server's store: its archive limits and the local directories it may mount."""
        local_dirs = config.local_model_dirs
        if local_dirs is None:
            local_dirs = default_local_dirs()
        return cls(
            config.artifacts_dir, s3_client_factory, limits=config.archive_limits, local_dirs=local_dirs
        )

    # -- public -------------------------------------------------------------------------------------

    @property
    def stats(self) -> ArtifactStats:
        with self._guard:
            return self._stats

    def check_exists(self, source: ModelDataSource) -> None:
        """CreateModel's synchronous check: raise ModelDataNotFound when there is nothing at the URL."""
        where = locate(source)
        if isinstance(where, Path):
            if not where.exists():
                raise ModelDataNotFound(not_found_message(source.uri))
            problem = self._local_dir_problem(where)
            if problem:
                raise ValidationFailed(problem)
            return
        client = self._s3()
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
        self, source: ModelDataSource, timeout_s: float | None = None, shown_timeout_s: float | None = None
    ) -> Path:
        """Return a host directory holding the model files (blocking; run it in a worker thread).

        `timeout_s` bounds download plus extraction (ModelDataDownloadTimeoutInSeconds): past it the
        work stops at the next chunk, nothing is published and the temporary files are removed.
        `shown_timeout_s` is the API value named in the failure (when a test scales `timeout_s`).
        """
        self._deadline.current = Deadline(source.uri, timeout_s, shown_timeout_s)
        try:
            try:
                where = locate(source)
            except ValidationFailed as exc:
                raise ModelDataFailure(exc.message, exc.message) from exc
            if isinstance(where, Path):
                return self._local(source, where)
            if source.compression == "Gzip":
                return self._s3_archive(source, where)
            if source.data_type == "S3Prefix":
                return self._s3_prefix(source, where)
            return self._s3_object(source, where)
        finally:
            self._deadline.current = NO_DEADLINE

    def _check_deadline(self) -> None:
        deadline: Deadline = getattr(self._deadline, "current", NO_DEADLINE)
        deadline.check()

    def _local_dir_problem(self, path: Path) -> str | None:
        """Why the local directory `path` may not be model data, or None (files are copied, so free)."""
        if self.local_dirs is None or not path.is_dir():
            return None
        real = Path(os.path.realpath(path))
        if any(real == root or root in real.parents for root in self.local_dirs):
            return None
        return outside_allowed_message(str(path), real, self.local_dirs)

    # -- sources ------------------------------------------------------------------------------------

    def _local(self, source: ModelDataSource, path: Path) -> Path:
        try:
            st = path.stat()
        except OSError as exc:
            raise ModelDataFailure(download_failed_message(source.uri), f"{path}: {exc.strerror}") from exc
        if stat.S_ISDIR(st.st_mode):
            problem = self._local_dir_problem(path)
            if problem:
                raise ModelDataFailure(download_failed_message(source.uri), problem)
            return path.resolve()  # smlocal extension: a directory is mounted as it is
        if not stat.S_ISREG(st.st_mode):
            raise ModelDataFailure(download_failed_message(source.uri), f"{path}: not a file or directory")
        real = os.path.realpath(path)
        fingerprint = json.dumps(["file", source.compression, real, st.st_size, st.st_mtime_ns])
        with self._locked(fingerprint):
            known = self._lookup(fingerprint)
            if known is not None:
                return known
            if source.compression == "None":
                digest, model = self._build(source, lambda tmp: self._copy_single(source, path, tmp))
            else:
                digest = self._hash_file(source, path)
                model = self._extract(source, path, digest)
            self._remember(fingerprint, digest)
            return model

    def _s3_archive(self, source: ModelDataSource, where: S3Location) -> Path:
        client = self._s3()
        head = self._s3_call(source, lambda: client.head_object(Bucket=where.bucket, Key=where.key))
        fingerprint = self._s3_fingerprint(where, head["ETag"], head["ContentLength"])
        with self._locked(fingerprint):
            known = self._lookup(fingerprint)
            if known is not None:
                return known
            fd, name = tempfile.mkstemp(prefix="download-", suffix=".tar.gz", dir=self.tmp_dir)
            os.close(fd)
            archive = Path(name)
            try:
                digest, etag, size = self._fetch(source, where.bucket, where.key, archive, None)
                model = self._extract(source, archive, digest)
            finally:
                archive.unlink(missing_ok=True)
            self._remember(self._s3_fingerprint(where, etag, size), digest)
            return model

    def _s3_object(self, source: ModelDataSource, where: S3Location) -> Path:
        client = self._s3()
        head = self._s3_call(source, lambda: client.head_object(Bucket=where.bucket, Key=where.key))
        name = where.key.rsplit("/", 1)[-1]
        problem = name_problem(name)
        if problem:
            raise invalid_object(source.uri, source.uri, problem)
        etag, size = head["ETag"], int(head["ContentLength"])
        self._check_size(source, size)
        digest = digest_of("s3object-v1", name, etag, size)

        def lay_out(tmp: Path) -> str:
            self._fetch(source, where.bucket, where.key, tmp / name, etag)
            return digest

        return self._build(source, lay_out, digest)[1]

    def _s3_prefix(self, source: ModelDataSource, where: S3Location) -> Path:
        client = self._s3()
        objects: list[tuple[str, str, str, int]] = []  # (relative name, key, ETag, size)
        paginator = client.get_paginator("list_objects_v2")
        pages = iter(paginator.paginate(Bucket=where.bucket, Prefix=where.key))
        while (page := self._s3_call(source, lambda: next(pages, None))) is not None:
            self._check_deadline()
            for obj in page.get("Contents", []):
                objects.append((obj["Key"][len(where.key) :], obj["Key"], obj["ETag"], int(obj["Size"])))
            if len(objects) > self.limits.max_entries:
                raise ModelDataFailure(
                    f'Invalid model data at URL "{source.uri}": there are more than '
                    f"{self.limits.max_entries} objects under the prefix.",
                    f"more than {self.limits.max_entries} objects under {source.uri}, the limit",
                )
        if not objects:
            raise ModelDataFailure(download_failed_message(source.uri), f"no objects under {source.uri}")
        files: set[str] = set()
        dirs: dict[str, str] = {}  # directory path -> the first key that needs it
        for rel, key, _etag, size in objects:
            key_uri = f"s3://{where.bucket}/{key}"
            if key.endswith("/") and size == 0:
                raise invalid_object(
                    source.uri, key_uri, "is a folder object (a zero-byte key ending in '/')"
                )
            for segment in rel.split("/"):
                problem = name_problem(segment)
                if problem:
                    raise invalid_object(source.uri, key_uri, problem)
            files.add(rel)
            parts = rel.split("/")
            for i in range(1, len(parts)):
                dirs.setdefault("/".join(parts[:i]), key_uri)
        for rel, key, _etag, _size in objects:
            if rel in dirs:
                raise invalid_object(
                    source.uri,
                    f"s3://{where.bucket}/{key}",
                    f'is a file, but "{dirs[rel]}" needs that name as a directory',
                )
        self._check_size(source, sum(size for *_, size in objects))
        digest = digest_of("s3prefix-v1", sorted((rel, etag, size) for rel, _k, etag, size in objects))

        def lay_out(tmp: Path) -> str:
            for rel, key, etag, _size in objects:
                target = tmp.joinpath(*rel.split("/"))
                target.parent.mkdir(parents=True, exist_ok=True)
                self._fetch(source, where.bucket, key, target, etag)
            return digest

        return self._build(source, lay_out, digest)[1]

    # -- building blocks ----------------------------------------------------------------------------

    def _s3(self) -> Any:
        with self._guard:
            if self._client is None:
                self._client = self._factory()
            return self._client

    def _s3_call(self, source: ModelDataSource, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except (ClientError, BotoCoreError) as exc:
            raise ModelDataFailure(download_failed_message(source.uri), f"{source.uri}: {exc}") from exc

    @staticmethod
    def _s3_fingerprint(where: S3Location, etag: str, size: int) -> str:
        return json.dumps(["s3", where.bucket, where.key, etag, int(size)])

    def _fetch(
        self, source: ModelDataSource, bucket: str, key: str, dest: Path, if_match: str | None
    ) -> tuple[str, str, int]:
        """Stream one object into `dest` (created), hashing as it goes: (sha256, ETag, size)."""
        key_uri = f"s3://{bucket}/{key}"
        sha = hashlib.sha256()
        written = 0
        extra = {"IfMatch": if_match} if if_match else {}
        watchdog: threading.Timer | None = None
        try:
            response = self._s3().get_object(Bucket=bucket, Key=key, **extra)
            body = response["Body"]
            watchdog = self._watchdog(body)
            with open(dest, "wb") as out:
                for chunk in body.iter_chunks(S3_READ_BYTES):
                    self._check_deadline()
                    sha.update(chunk)
                    written += len(chunk)
                    out.write(chunk)
            body.close()
        except (ClientError, BotoCoreError, OSError) as exc:
            self._check_deadline()  # a read cut off by the watchdog is the timeout
            raise ModelDataFailure(download_failed_message(source.uri), f"{key_uri}: {exc}") from exc
        except ModelDataFailure:
            raise
        except Exception:
            self._check_deadline()  # urllib3 may raise its own errors on a socket shut down under it
            raise
        finally:
            if watchdog is not None:
                watchdog.cancel()
        expected = int(response.get("ContentLength", written))
        self._check_deadline()
        if written != expected:
            raise ModelDataFailure(
                download_failed_message(source.uri), f"{key_uri}: got {written} of {expected} bytes"
            )
        os.chmod(dest, FILE_MODE)
        self._count(downloads=1)
        return sha.hexdigest(), str(response.get("ETag", if_match or "")), written

    def _watchdog(self, body: Any) -> threading.Timer | None:
        """At the deadline, shut down the socket under an S3 body, so a read that waits on a stalled
        source returns at once (the chunk loop only runs between reads)."""
        deadline: Deadline = getattr(self._deadline, "current", NO_DEADLINE)
        if deadline.at is None:
            return None
        timer = threading.Timer(max(0.0, deadline.at - time.monotonic()), _shut_down_stream, (body,))
        timer.daemon = True
        timer.start()
        return timer

    def _hash_file(self, source: ModelDataSource, path: Path) -> str:
        sha = hashlib.sha256()
        try:
            with open(path, "rb") as f:
                while chunk := f.read(CHUNK_BYTES):
                    self._check_deadline()
                    sha.update(chunk)
        except OSError as exc:
            raise ModelDataFailure(download_failed_message(source.uri), f"{path}: {exc}") from exc
        self._count(hashes=1)
        return sha.hexdigest()

    def _copy_single(self, source: ModelDataSource, path: Path, tmp: Path) -> str:
        problem = name_problem(path.name)
        if problem:
            raise invalid_object(source.uri, str(path), problem)
        self._check_size(source, path.stat().st_size)
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
        self._count(hashes=1)
        return digest_of("file-v1", path.name, sha.hexdigest())

    def _check_size(self, source: ModelDataSource, total: int) -> None:
        if total > self.max_extracted_bytes:
            raise ModelDataFailure(
                f'Invalid model data at URL "{source.uri}": the model data is too large. Please reduce its '
                "size or move to an instance type with more memory.",
                f"{total} bytes, over the cap of {self.max_extracted_bytes} bytes",
            )

    def _extract(self, source: ModelDataSource, archive: Path, digest: str) -> Path:
        def unpack(tmp: Path) -> str:
            try:
                result = extract_archive(archive, tmp, self.limits, self._check_deadline)
            except ArchiveTooLarge as exc:
                raise ModelDataFailure(too_large_message(source.uri), exc.detail) from exc
            except ArchiveRejected as exc:
                raise ModelDataFailure(extract_failed_message(source.uri), exc.detail) from exc
            log.info("extracted %s: %d files, %d bytes", source.uri, result.files, result.total_bytes)
            return digest

        return self._build(source, unpack, digest)[1]

    def _build(
        self, source: ModelDataSource, lay_out: Callable[[Path], str], digest: str | None = None
    ) -> tuple[str, Path]:
        """Fill a fresh temp dir with `lay_out` (which returns the digest) and publish it atomically.

        With the digest known up front, an existing model directory is reused without any work.
        """
        if digest is not None:
            with self._locked("digest:" + digest):
                return digest, self._build_locked(source, lay_out, digest)
        tmp = Path(tempfile.mkdtemp(prefix="build-", dir=self.tmp_dir))
        try:
            digest = lay_out(tmp)
            with self._locked("digest:" + digest):
                return digest, self._publish(source, tmp, digest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _build_locked(self, source: ModelDataSource, lay_out: Callable[[Path], str], digest: str) -> Path:
        target = self.models_dir / digest
        if target.is_dir():
            self._count(reuses=1)
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
            self._count(reuses=1)
            return target
        self._check_deadline()  # a model directory finished too late is not published
        try:
            os.chmod(tmp, DIR_MODE)
            for dirpath, _dirs, _files in os.walk(tmp):
                os.chmod(dirpath, DIR_MODE)
            os.rename(tmp, target)
        except OSError as exc:
            if target.is_dir():  # another process published the same content first
                self._count(reuses=1)
                return target
            raise ModelDataFailure(
                extract_failed_message(source.uri), f"could not publish {target}: {exc}"
            ) from exc
        self._count(extractions=1)
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

    def _lookup(self, fingerprint: str) -> Path | None:
        with self._guard:
            digest = self._index.get(fingerprint)
        if digest is None:
            return None
        target = self.models_dir / digest
        if not target.is_dir():
            return None
        self._count(reuses=1)
        log.info("model data index hit: %s", target)
        return target

    def _remember(self, fingerprint: str, digest: str) -> None:
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
    def _locked(self, key: str) -> Iterator[None]:
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            yield

    def _count(self, **increments: int) -> None:
        with self._guard:
            current = self._stats
            self._stats = replace(
                current, **{name: getattr(current, name) + n for name, n in increments.items()}
            )
