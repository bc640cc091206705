"""The model data cache's index: source fingerprint -> the digest of its model directory, so that a
repeat needs no download or hash ([s3, bucket, key, ETag, size] or [file, real path, size, mtime_ns]).

On disk a journal, `index.json`, one JSON line per change: `[fingerprint, digest]`, or `[fingerprint,
null]` when the directory was evicted. A change appends one line (rewriting the whole index for every
new model cost O(models) per model: issue 23); the file is compacted (rewritten with the live entries
and renamed into place) once it holds more than twice as many lines as live entries, plus slack. A
torn last line (a crash mid-append) is ignored; the older format, one JSON object, is read as is.
Not thread-safe: ModelCache calls it under its guard."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

#: Lines beyond twice the live entries that a journal may hold before it is compacted.
SLACK_LINES = 64


class ModelIndex:
    def __init__(self, path: Path, tmp_dir: Path) -> None:
        self.path = path
        self._tmp_dir = tmp_dir
        self._entries: dict[str, str] = {}
        self._lines = 0
        self._load()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, fingerprint: str) -> str | None:
        return self._entries.get(fingerprint)

    def put(self, fingerprint: str, digest: str) -> None:
        if self._entries.get(fingerprint) == digest:
            return
        self._entries[fingerprint] = digest
        self._append([[fingerprint, digest]])

    def drop_digest(self, digest: str) -> None:
        """Forget every fingerprint of `digest` (its directory was evicted)."""
        gone = [fp for fp, d in self._entries.items() if d == digest]
        for fp in gone:
            del self._entries[fp]
        if gone:
            self._append([[fp, None] for fp in gone])

    def _append(self, changes: list[list[str | None]]) -> None:
        if self._lines + len(changes) > 2 * len(self._entries) + SLACK_LINES:
            self._compact()
            return
        text = "".join(json.dumps(c) + "\n" for c in changes)
        try:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(text)
            self._lines += len(changes)
        except OSError as exc:
            log.warning("could not write model data index %s: %s", self.path, exc)

    def _compact(self) -> None:
        text = "".join(json.dumps([fp, d]) + "\n" for fp, d in sorted(self._entries.items()))
        fd, name = tempfile.mkstemp(prefix="index-", dir=self._tmp_dir)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(name, self.path)
            self._lines = len(self._entries)
        except OSError as exc:
            Path(name).unlink(missing_ok=True)
            log.warning("could not write model data index %s: %s", self.path, exc)

    def _load(self) -> None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable model data index %s: %s", self.path, exc)
            return
        try:
            whole = json.loads(text)
        except ValueError:
            whole = None
        if isinstance(whole, dict):  # the older format: one object, rewritten per change
            self._entries = {str(k): str(v) for k, v in whole.items()}
            self._compact()
            return
        for line in text.splitlines():
            try:
                fingerprint, digest = json.loads(line)
            except (ValueError, TypeError):
                continue  # a torn line (a crash mid-append)
            self._lines += 1
            if digest is None:
                self._entries.pop(str(fingerprint), None)
            else:
                self._entries[str(fingerprint)] = str(digest)
