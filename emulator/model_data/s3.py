"""Model data fetched from S3: a gzip archive (S3Object, Gzip), one object (S3Object, None) or every
object under a prefix (S3Prefix, None), each streamed, hashed and checked against its size as it comes.

boto3 clients come from the factory, so the endpoint is the caller's choice. A watchdog shuts down the
socket under a body at the download deadline, so a read stalled on a source that trickles returns.
SageMaker's texts for rejected uncompressed object names, folder objects and name clashes are not
known: the `Invalid model data at URL ...` messages here are smlocal's own, in SageMaker's style.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import socket
import tempfile
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
        fingerprint = self._s3_fingerprint(where, head["ETag"], head["ContentLength"])
        with self.cache.locked(fingerprint):
            known = self.cache.lookup(fingerprint)
            if known is not None:
                return known
            fd, name = tempfile.mkstemp(prefix="download-", suffix=".tar.gz", dir=self.cache.tmp_dir)
            os.close(fd)
            archive = Path(name)
            try:
                digest, etag, size = self._fetch(source, where.bucket, where.key, archive, None)
                model = self.cache.extract(source, archive, digest)
            finally:
                archive.unlink(missing_ok=True)
            self.cache.remember(self._s3_fingerprint(where, etag, size), digest)
            return model

    def object(self, source: ModelDataSource, where: S3Location) -> Path:
        client = self.client()
        head = self._s3_call(source, lambda: client.head_object(Bucket=where.bucket, Key=where.key))
        name = where.key.rsplit("/", 1)[-1]
        problem = name_problem(name)
        if problem:
            raise invalid_object(source.uri, source.uri, problem)
        etag, size = head["ETag"], int(head["ContentLength"])
        self.cache.check_size(source, size)
        digest = digest_of("s3object-v1", name, etag, size)

        def lay_out(tmp: Path) -> str:
            self._fetch(source, where.bucket, where.key, tmp / name, etag)
            return digest

        return self.cache.build(source, lay_out, digest)[1]

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

        def lay_out(tmp: Path) -> str:
            for rel, key, etag, _size in objects:
                target = tmp.joinpath(*rel.split("/"))
                target.parent.mkdir(parents=True, exist_ok=True)
                self._fetch(source, where.bucket, key, target, etag)
            return digest

        return self.cache.build(source, lay_out, digest)[1]

    # -- building blocks ----------------------------------------------------------------------------

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
        forget: Callable[[], None] = _nothing
        try:
            response = self.client().get_object(Bucket=bucket, Key=key, **extra)
            body = response["Body"]
            watchdog = self._watchdog(body)
            cancel = self._deadline().cancel
            if isinstance(cancel, Cancellation):  # a stop cuts a stalled read at once, too
                forget = cancel.on_set(functools.partial(_shut_down_stream, body))
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
        return sha.hexdigest(), str(response.get("ETag", if_match or "")), written

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
