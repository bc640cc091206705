"""Model data sources: where a ModelDataSource points, and the FailureReason texts for it.

Failure texts: extraction and "too large" follow the FailureReasons observed from SageMaker (§3.2);
the download text follows SageMaker's observed "Failed to download model data for container" form.
The `Invalid model data at URL ...` texts for rejected uncompressed object names are smlocal's own.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from emulator.errors import ModelDataError, ValidationFailed
from emulator.model.resources import ModelDataSource

NOT_FOUND_CODES = frozenset({"404", "NoSuchKey", "NotFound", "NoSuchBucket"})


def extract_failed_message(uri: str) -> str:
    return (
        f'Failed to extract model data archive from URL "{uri}". '
        "Please ensure that the object located at the URL is a valid tar.gz archive."
    )


def too_large_message(uri: str) -> str:
    return (
        f'Failed to extract model data archive from URL "{uri}". The model data archive is too large. '
        "Please reduce the size of the model data archive or move to an instance type with more memory."
    )


def download_failed_message(uri: str) -> str:
    return (
        f'Failed to download model data for container from URL "{uri}". Please ensure that there is an '
        "object located at the URL and that the role passed to CreateModel has permissions to download "
        "the object."
    )


def timeout_message(uri: str, timeout_s: float) -> str:
    """[U] SageMaker's text for a download past ModelDataDownloadTimeoutInSeconds is not published."""
    return (
        f'Failed to download model data for container from URL "{uri}" within the '
        f"ModelDataDownloadTimeoutInSeconds of {timeout_s:g} seconds. Please ensure that the model data "
        "can be downloaded and extracted in that time, or increase ModelDataDownloadTimeoutInSeconds."
    )


def outside_allowed_message(uri: str, real: Path, allowed: tuple[Path, ...]) -> str:
    """smlocal's own: a local model data directory outside the directories the server may mount."""
    roots = ", ".join(str(r) for r in allowed) or "none"
    return (
        f"Model data directory {uri} ({real}) is outside the directories smlocal may mount as model "
        f"data ({roots}). Start smlocal serve with --allow-local-model-dir DIR to allow it."
    )


def not_found_message(uri: str) -> str:
    return f"Could not find model data at {uri}."


class ModelDataFailure(ModelDataError):
    """A ModelDataError whose `detail` says exactly what failed (for the endpoint's log)."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.detail = detail


@dataclass(frozen=True)
class S3Location:
    bucket: str
    key: str


def locate(source: ModelDataSource) -> S3Location | Path:
    """Check the source's shape; raise ValidationFailed for one SageMaker would not accept."""
    uri = source.uri
    if source.compression not in ("Gzip", "None"):
        raise ValidationFailed(
            f"Invalid CompressionType {source.compression!r} for model data {uri}: expected Gzip or None."
        )
    if source.data_type not in ("S3Object", "S3Prefix"):
        raise ValidationFailed(
            f"Invalid S3DataType {source.data_type!r} for model data {uri}: expected S3Object or S3Prefix."
        )
    if source.data_type == "S3Prefix" and source.compression != "None":
        raise ValidationFailed(f"Model data {uri} has S3DataType S3Prefix, which needs CompressionType None.")
    if uri.startswith("s3://"):
        bucket, _, key = uri[len("s3://") :].partition("/")
        if not bucket:
            raise ValidationFailed(f"Model data URL {uri} names no bucket.")
        if source.data_type == "S3Prefix":
            if not uri.endswith("/"):
                raise ValidationFailed(f"The S3 prefix {uri} of model data must end with '/'.")
        elif not key or key.endswith("/"):
            raise ValidationFailed(f"Model data URL {uri} does not name an S3 object.")
        return S3Location(bucket, key)
    if uri.startswith("file://"):
        parsed = urlparse(uri)
        if parsed.netloc not in ("", "localhost"):
            raise ValidationFailed(f"Model data URL {uri} must name a file on this host.")
        return Path(unquote(parsed.path))
    if "://" in uri:
        raise ValidationFailed(f"Model data URL {uri} is not supported: use s3://, file:// or a local path.")
    if not uri:
        raise ValidationFailed("Model data URL is empty.")
    return Path(uri)


def error_code(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def digest_of(*manifest: object) -> str:
    return hashlib.sha256(json.dumps(manifest, separators=(",", ":")).encode()).hexdigest()


def name_problem(segment: str) -> str | None:
    """Why an object name segment cannot be a file name under /opt/ml/model, or None."""
    if not segment.strip():
        return "has an empty or blank path segment"
    if segment in (".", ".."):
        return f"has a {segment!r} path segment"
    if "\x00" in segment:
        return "has a NUL character in its name"
    if len(segment.encode()) > 255:
        return "has a path segment longer than 255 bytes"
    return None


def invalid_object(uri: str, key_uri: str, reason: str) -> ModelDataFailure:
    return ModelDataFailure(
        f'Invalid model data at URL "{uri}": the object "{key_uri}" {reason}. With CompressionType None '
        "each object must map to a file path under /opt/ml/model.",
        f"{key_uri}: {reason}",
    )


class Cancellation(threading.Event):
    """An Event that also calls what was registered with `on_set` when it is set: a fetch blocked
    in a read (a stalled source) registers the shutdown of its socket, so that it returns at once
    instead of after the read timeout."""

    def __init__(self) -> None:
        super().__init__()
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._next = 0
        self._lock = threading.Lock()

    def set(self) -> None:
        super().set()
        with self._lock:
            callbacks, self._callbacks = list(self._callbacks.values()), {}
        for callback in callbacks:
            callback()

    def on_set(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback` once set (at once if it is); returns what unregisters it."""
        with self._lock:
            if not self.is_set():
                key = self._next = self._next + 1
                self._callbacks[key] = callback
                return lambda: self._forget(key)
        callback()
        return lambda: None

    def _forget(self, key: int) -> None:
        with self._lock:
            self._callbacks.pop(key, None)


def cancelled_message(uri: str) -> str:
    """smlocal's own: the download was stopped because what it was for went away (an instance)."""
    return f'Stopped downloading model data from URL "{uri}": the instance it was for was stopped.'


class Deadline:
    """ModelDataDownloadTimeoutInSeconds for one materialize call, and the caller's cancellation:
    both checked on every chunk read."""

    def __init__(
        self, uri: str, timeout_s: float | None, shown_s: float | None, cancel: threading.Event | None = None
    ) -> None:
        self.uri = uri
        self.cancel = cancel
        self.timeout_s = timeout_s
        self.shown_s = shown_s if shown_s is not None else timeout_s
        self.started = time.monotonic()
        self.at = None if timeout_s is None else self.started + timeout_s

    def passed(self) -> bool:
        """Cancelled, or past the deadline: work stopped for it may be resumed by a later attempt."""
        cancelled = self.cancel is not None and self.cancel.is_set()
        return cancelled or (self.at is not None and time.monotonic() > self.at)

    def check(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise ModelDataFailure(cancelled_message(self.uri), "cancelled: the instance was stopped")
        if self.at is not None and time.monotonic() > self.at:
            elapsed = time.monotonic() - self.started
            raise ModelDataFailure(
                timeout_message(self.uri, self.shown_s or 0),
                f"download and extraction took over {self.timeout_s:g} s "
                f"(ModelDataDownloadTimeoutInSeconds {self.shown_s:g}); stopped after {elapsed:.1f} s",
            )


NO_DEADLINE = Deadline("", None, None)


def default_local_dirs() -> tuple[Path, ...]:
    """Where local model data directories may be, unless `--allow-local-model-dir` says otherwise:
    the working directory the server starts in and the system temp directory."""
    return (Path.cwd(), Path(tempfile.gettempdir()))
