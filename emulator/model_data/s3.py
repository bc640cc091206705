"""Model data fetched from S3: a gzip archive (S3Object, Gzip), one object (S3Object, None) or every
object under a prefix (S3Prefix, None), each streamed, hashed and checked against its size as it comes,
into partial/ (partial.py): what an interrupted attempt completed is taken as it is, and an object
stopped part-way goes on with a Range GET from the bytes on disk.

boto3 clients come from the factory, so the endpoint is the caller's choice. A watchdog shuts down the
socket under a body at the download deadline, so a read stalled on a source that trickles returns.
SageMaker's texts for rejected uncompressed object names, folder objects and name clashes are not
known: the `Invalid model data at URL ...` messages here are smlocal's own, in SageMaker's style.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from emulator.model.resources import ModelDataSource
from emulator.model_data import timings
from emulator.model_data.cache import ModelCache
from emulator.model_data.extract import FILE_MODE
from emulator.model_data.partial import PartialDownloads
from emulator.model_data.sources import (
    Cancellation,
    Deadline,
    ModelDataFailure,
    S3Location,
    digest_of,
    download_failed_message,
    invalid_object,
    name_problem,
)

#: S3 bodies are read in pieces this size, so the download deadline is checked often even when the
#: source trickles (a read returns only once it has the whole piece).
S3_READ_BYTES = 64 * 1024

log = logging.getLogger(__name__)


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


def _nothing() -> None:
    pass


class S3Fetcher:
    """Fetches S3 model data into `cache`; `deadline` gives the running materialize call's deadline."""

    def __init__(
        self, cache: ModelCache, client_factory: Callable[[], Any], deadline: Callable[[], Deadline]
    ) -> None:
        self.cache = cache
        self.limits = cache.limits
        resume = not cache.budgeted
        self.partial = PartialDownloads(cache.root / "partial" if resume else cache.tmp_dir, resume)
        self._client: Any = None
        self._guard = threading.Lock()  # protects _client
        self._factory = client_factory
        self._deadline = deadline

    def _check_deadline(self) -> None:
        self._deadline().check()

    def client(self) -> Any:
        with self._guard:
            if self._client is None:
                self._client = self._factory()
            return self._client

    def close(self) -> None:
        """Close the S3 client's connections (a later call makes a new client)."""
        with self._guard:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    # -- sources ------------------------------------------------------------------------------------

    def archive(self, source: ModelDataSource, where: S3Location) -> Path:
        client = self.client()
        head = self._s3_call(source, lambda: client.head_object(Bucket=where.bucket, Key=where.key))
        etag, size = str(head["ETag"]), int(head["ContentLength"])
        fingerprint = self._s3_fingerprint(where, etag, size)
        with self.cache.locked(fingerprint):
            known = self.cache.lookup(fingerprint)
            if known is not None:
                return known
            object_id = self.partial.object_id(where.bucket, where.key, etag, size)
            # Lock order: fingerprint, partial, digest (extract's build); object and prefix take
            # digest then partial, but an archive's digest (its bytes) is never a manifest's.
            with self.cache.locked("partial:" + object_id):
                try:
                    archive, digest = self._obtain(source, where.bucket, where.key, etag, size, want_sha=True)
                except BaseException:
                    if not self.partial.resume:  # this cache keeps nothing of a failed attempt
                        self.partial.forget(object_id)
                    raise
                try:
                    model = self.cache.extract(source, archive, digest)
                except BaseException:
                    # kept to resume only when time ran out: else the archive itself is at fault
                    if not (self.partial.resume and self._deadline().passed()):
                        self.partial.forget(object_id)
                    raise
                self.partial.forget(object_id)
            self.cache.remember(fingerprint, digest)
            return model

    def object(self, source: ModelDataSource, where: S3Location) -> Path:
        client = self.client()
        head = self._s3_call(source, lambda: client.head_object(Bucket=where.bucket, Key=where.key))
        name = where.key.rsplit("/", 1)[-1]
        problem = name_problem(name)
        if problem:
            raise invalid_object(source.uri, source.uri, problem)
        etag, size = str(head["ETag"]), int(head["ContentLength"])
        self.cache.check_size(source, size)
        digest = digest_of("s3object-v1", name, etag, size)
        return self._lay_out(source, digest, [(name, where.key, etag, size)], where.bucket)

    def prefix(self, source: ModelDataSource, where: S3Location) -> Path:
        client = self.client()
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
        self.cache.check_size(source, sum(size for *_, size in objects))
        digest = digest_of("s3prefix-v1", sorted((rel, etag, size) for rel, _k, etag, size in objects))

        return self._lay_out(source, digest, objects, where.bucket)

    # -- building blocks ----------------------------------------------------------------------------

    def _lay_out(
        self, source: ModelDataSource, digest: str, objects: list[tuple[str, str, str, int]], bucket: str
    ) -> Path:
        """A model directory of `objects` (relative name, key, ETag, size), each obtained through
        partial/ (what an interrupted attempt completed is not fetched again) and linked in place."""

        def lay_out(tmp: Path) -> str:
            for rel, key, etag, size in objects:
                target = tmp.joinpath(*rel.split("/"))
                target.parent.mkdir(parents=True, exist_ok=True)
                object_id = self.partial.object_id(bucket, key, etag, size)
                with self.cache.locked("partial:" + object_id):
                    path, _sha = self._obtain(source, bucket, key, etag, size)
                    self.partial.place(path, target)
            return digest

        try:
            model = self.cache.build(source, lay_out, digest)[1]
        except BaseException:
            if not self.partial.resume:  # this cache keeps nothing of a failed attempt
                self._forget(objects, bucket)
            raise
        self._forget(objects, bucket)  # published: the directory holds the bytes now
        return model

    def _forget(self, objects: list[tuple[str, str, str, int]], bucket: str) -> None:
        for _rel, key, etag, size in objects:
            object_id = self.partial.object_id(bucket, key, etag, size)
            with self.cache.locked("partial:" + object_id):
                self.partial.forget(object_id)

    def _obtain(
        self, source: ModelDataSource, bucket: str, key: str, etag: str, size: int, want_sha: bool = False
    ) -> tuple[Path, str]:
        """The whole object in partial/: already there, resumed with a Range GET from the bytes an
        earlier attempt left, or fetched. Returns its path and, with `want_sha`, its sha256 (the
        bytes already on disk are read back for it). The caller holds the object's partial lock."""
        object_id = self.partial.object_id(bucket, key, etag, size)
        have = self.partial.have(object_id, size)
        complete = self.partial.complete(object_id)
        sha = hashlib.sha256()
        if want_sha and have:
            self._hash_file(complete if complete.is_file() else self.partial.part(object_id), sha)
        if complete.is_file():
            self.cache.count(kept_objects=1)
            return complete, sha.hexdigest()
        if have:
            self.cache.count(resumed_bytes=have)
            log.info("s3://%s/%s: resuming at byte %d of %d", bucket, key, have, size)
        if have < size or not have:
            self._fetch(source, bucket, key, self.partial.part(object_id), etag, have, sha)
        return self.partial.finish(object_id), sha.hexdigest()

    def _hash_file(self, path: Path, sha: Any) -> None:
        with open(path, "rb") as f:
            while chunk := f.read(1024 * 1024):
                self._check_deadline()
                sha.update(chunk)

    def _s3_call(self, source: ModelDataSource, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except (ClientError, BotoCoreError) as exc:
            raise ModelDataFailure(download_failed_message(source.uri), f"{source.uri}: {exc}") from exc

    @staticmethod
    def _s3_fingerprint(where: S3Location, etag: str, size: int) -> str:
        return json.dumps(["s3", where.bucket, where.key, etag, int(size)])

    def _fetch(
        self, source: ModelDataSource, bucket: str, key: str, dest: Path, if_match: str, offset: int, sha: Any
    ) -> None:
        """Stream one object into `dest` from byte `offset` on (appended to what is there; a Range
        GET), feeding `sha` as it goes."""
        key_uri = f"s3://{bucket}/{key}"
        written = 0
        extra = {"IfMatch": if_match} if if_match else {}
        if offset:
            extra["Range"] = f"bytes={offset}-"
        watchdog: threading.Timer | None = None
        forget: Callable[[], None] = _nothing
        try:
            response = self.client().get_object(Bucket=bucket, Key=key, **extra)
            body = response["Body"]
            watchdog = self._watchdog(body)
            cancel = self._deadline().cancel
            if isinstance(cancel, Cancellation):  # a stop cuts a stalled read at once, too
                forget = cancel.on_set(functools.partial(_shut_down_stream, body))
            with open(dest, "ab" if offset else "wb") as out:
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
            forget()
        expected = int(response.get("ContentLength", written))
        self._check_deadline()
        if written != expected:
            raise ModelDataFailure(
                download_failed_message(source.uri), f"{key_uri}: got {written} of {expected} bytes"
            )
        os.chmod(dest, FILE_MODE)
        self.cache.count(downloads=1)
        timings.current().add_download(written)

    def _watchdog(self, body: Any) -> threading.Timer | None:
        """At the deadline, shut down the socket under an S3 body, so a read that waits on a stalled
        source returns at once (the chunk loop only runs between reads)."""
        deadline = self._deadline()
        if deadline.at is None:
            return None
        timer = threading.Timer(max(0.0, deadline.at - time.monotonic()), _shut_down_stream, (body,))
        timer.daemon = True
        timer.start()
        return timer
