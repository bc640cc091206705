"""Downloads kept across attempts, so that a deployment that failed mid-way (the download deadline,
a stopped instance, a dropped connection, a server restart) resumes where it stopped.

Layout under the cache's `root`::

    partial/<id>.part   an S3 object's bytes as far as they came (appended to with a Range GET)
    partial/<id>        the whole object, until the model directory it is for is published

`<id>` names (bucket, key, ETag, size): a changed object is another id, and every resumed GET carries
If-Match with the ETag. A complete object is hard-linked into the model directory being built (no
second copy on disk), so that a prefix whose build failed keeps every object it completed; once the
directory is published its entries here go. Entries untouched for `STALE_AFTER_S` are removed when the
cache starts [U]: data that never deployed again is not kept for ever.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

#: An entry of partial/ not written for this long is removed at start [U].
STALE_AFTER_S = 24 * 3600.0


class PartialDownloads:
    """`folder`: partial/ of the cache's root. `resume` False (the multi-model cache, which keeps
    nothing a load that failed or was stopped fetched: issue 23): the entries are made in the cache's
    tmp/ instead, and removed when the attempt fails (`S3Fetcher`)."""

    def __init__(self, folder: Path, resume: bool = True) -> None:
        self.dir = folder
        self.resume = resume
        self.dir.mkdir(parents=True, exist_ok=True)
        if resume:
            self._drop_stale()

    @staticmethod
    def object_id(bucket: str, key: str, etag: str, size: int) -> str:
        return hashlib.sha256(json.dumps(["s3", bucket, key, etag, int(size)]).encode()).hexdigest()[:40]

    def complete(self, object_id: str) -> Path:
        return self.dir / object_id

    def part(self, object_id: str) -> Path:
        return self.dir / f"{object_id}.part"

    def have(self, object_id: str, size: int) -> int:
        """Bytes of the object already here: `size` when it is complete, else the .part's length (a
        .part longer than the object, which cannot be trusted, is removed)."""
        if self.complete(object_id).is_file():
            return size
        try:
            length = self.part(object_id).stat().st_size
        except FileNotFoundError:
            return 0
        if length > size:
            self.part(object_id).unlink(missing_ok=True)
            return 0
        return length

    def finish(self, object_id: str) -> Path:
        """The .part holds the whole object: it becomes the complete entry."""
        os.replace(self.part(object_id), self.complete(object_id))
        return self.complete(object_id)

    def forget(self, object_id: str) -> None:
        self.complete(object_id).unlink(missing_ok=True)
        self.part(object_id).unlink(missing_ok=True)

    @staticmethod
    def place(source: Path, dest: Path) -> None:
        """`source` at `dest` too: a hard link (the same bytes on disk), a copy where links fail."""
        try:
            os.link(source, dest)
        except OSError:
            shutil.copyfile(source, dest)

    def _drop_stale(self) -> None:
        cutoff = time.time() - STALE_AFTER_S
        for entry in self.dir.iterdir():
            try:
                if entry.lstat().st_mtime < cutoff:
                    entry.unlink()
            except OSError:
                pass
