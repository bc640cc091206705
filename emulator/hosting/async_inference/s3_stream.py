"""Asynchronous inference's S3 objects, streamed: an input read a chunk at a time, an output written
a part at a time, so the server holds at most one chunk of a request's input and one part of its
answer whatever the payload sizes (the bound is in docs/reliability.md, "Asynchronous inference's
memory").

Every boto3 call runs on the async I/O pool (emulator/hosting/executors.py): one call per chunk or
part, so a slow object holds a thread only while a piece of it moves. Any failure of an S3 call is
an S3Failure saying which call on which object failed, translated here, once.

An output that fits in one part is written with one PutObject; a larger one with a multipart upload
(parts of PART_BYTES, the last one shorter), aborted when the request fails on the way.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol, TypeVar

from emulator.model.s3_urls import s3_location

T = TypeVar("T")

#: Bytes of input read from S3 per call (and sent on to the container as one write).
CHUNK_BYTES = 1024 * 1024
#: Bytes of answer per part of a multipart upload: S3's smallest part, so the least memory (a part is
#: held about twice while it is joined and sent: 8 MiB parts measured 72 MiB for 4 concurrent
#: requests, 5 MiB ones 48 MiB); 10,000 parts (S3's most) hold 48 GiB, far above the 1 GiB answer cap.
#: An answer up to this size is written with one PutObject.
PART_BYTES = 5 * 1024 * 1024

#: Runs a blocking call on the async I/O pool.
Run = Callable[[Callable[[], T]], Awaitable[T]]


class S3Failure(Exception):
    """An S3 call of an asynchronous request failed; the message names the call, object and error."""


class InputSource(Protocol):
    """A request's input: its length when known, and its bytes a chunk at a time."""

    @property
    def length(self) -> int | None: ...

    #: The failure of a read after the first byte (the container call sees only a broken body).
    error: S3Failure | None

    def chunks(self) -> AsyncIterator[bytes]: ...

    def stalled(self, timeout_s: float) -> S3Failure | None:
        """When the call timed out: S3's failure if a read of the input was still waiting (the
        container was not to blame), else None."""

    async def close(self) -> None: ...


class BytesInput:
    """An input held in memory (an inline body, at most a few MB)."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self.error: S3Failure | None = None

    @property
    def length(self) -> int | None:
        return len(self._data)

    async def chunks(self) -> AsyncIterator[bytes]:
        if self._data:
            yield self._data

    def stalled(self, timeout_s: float) -> S3Failure | None:
        return None

    async def close(self) -> None:
        return None


def split(url: str) -> tuple[str, str]:
    """The bucket and key of an S3 URL (s3:// or https://, checked where the URL came in)."""
    location = s3_location(url)
    if location is None:
        raise S3Failure(f"not an S3 object URL: {url}")
    return location


def _failure(call: str, url: str, exc: Exception) -> S3Failure:
    return S3Failure(f"{call} {url}: {type(exc).__name__}: {exc}")


class S3Input:
    """An S3 object's body, opened by GetObject and read CHUNK_BYTES per call."""

    def __init__(self, url: str, body: Any, length: int | None, run: Run[Any]) -> None:
        self._url = url
        self._body = body
        self._length = length
        self._run = run
        #: The failure of a read after the first byte (the container call sees only a broken body).
        self.error: S3Failure | None = None
        self._read = 0
        self._reading = False

    @property
    def length(self) -> int | None:
        return self._length

    async def chunks(self) -> AsyncIterator[bytes]:
        while True:
            self._reading = True  # left set when the call is cancelled (timed out) during the read
            try:
                chunk: bytes = await self._run(lambda: self._body.read(CHUNK_BYTES))
            except Exception as exc:  # noqa: BLE001 - botocore's and urllib3's errors, translated once
                self._reading = False
                self.error = _failure("GetObject", self._url, exc)
                raise self.error from exc
            self._reading = False
            if not chunk:
                return
            self._read += len(chunk)
            yield chunk

    def stalled(self, timeout_s: float) -> S3Failure | None:
        if not self._reading:
            return None
        of = f" of {self._length}" if self._length is not None else ""
        self.error = S3Failure(
            f"GetObject {self._url}: {self._read}{of} bytes read when the invocation timeout "
            f"({timeout_s:g} s) ran out, the next read still waiting for S3"
        )
        return self.error

    async def close(self) -> None:
        try:
            await self._run(self._body.close)
        except Exception:  # noqa: BLE001, S110 - closing a broken stream: nothing left to free
            pass


class S3Output:
    """An answer written to S3 as it arrives: buffered up to PART_BYTES, then a multipart upload."""

    def __init__(
        self, s3: Callable[[], Any], url: str, content_type: str | None, run: Run[Any], part_bytes: int
    ) -> None:
        self._s3 = s3
        self._url = url
        self._bucket, self._key = split(url)
        self._extra = {"ContentType": content_type} if content_type else {}
        self._run = run
        self._part_bytes = part_bytes
        #: the answer's pieces not yet sent (less than a part, plus the piece that fills it)
        self._pieces: list[bytes] = []
        self._buffered = 0
        self._upload_id: str | None = None
        self._parts: list[dict[str, Any]] = []
        #: Bytes written so far.
        self.size = 0

    async def write(self, data: bytes) -> None:
        self._pieces.append(data)
        self._buffered += len(data)
        self.size += len(data)
        if self._buffered >= self._part_bytes:
            await self._upload_part(self._take())

    def _take(self) -> bytes:
        """The buffered pieces as one part; the pieces are let go before the part is sent, so a part
        in flight is held once."""
        part = b"".join(self._pieces)
        self._pieces.clear()
        self._buffered = 0
        return part

    async def finish(self) -> bytes | None:
        """Complete the object; the whole answer when it was written with one PutObject, else None."""
        if self._upload_id is None:
            data = self._take()
            await self._call(
                "PutObject",
                lambda: self._s3().put_object(Bucket=self._bucket, Key=self._key, Body=data, **self._extra),
            )
            return data
        if self._buffered:
            await self._upload_part(self._take())
        upload_id, parts = self._upload_id, self._parts
        await self._call(
            "CompleteMultipartUpload",
            lambda: self._s3().complete_multipart_upload(
                Bucket=self._bucket, Key=self._key, UploadId=upload_id, MultipartUpload={"Parts": parts}
            ),
        )
        self._upload_id = None
        return None

    async def abort(self) -> None:
        """Drop what was written (a multipart upload's parts); never raises."""
        self._pieces.clear()
        self._buffered = 0
        upload_id, self._upload_id = self._upload_id, None
        if upload_id is None:
            return
        try:
            await self._run(
                lambda: self._s3().abort_multipart_upload(
                    Bucket=self._bucket, Key=self._key, UploadId=upload_id
                )
            )
        except Exception:  # noqa: BLE001, S110 - S3 expires abandoned uploads by its own lifecycle rules
            pass

    async def _upload_part(self, part: bytes) -> None:
        if self._upload_id is None:
            created = await self._call(
                "CreateMultipartUpload",
                lambda: self._s3().create_multipart_upload(Bucket=self._bucket, Key=self._key, **self._extra),
            )
            self._upload_id = str(created["UploadId"])
        number, upload_id = len(self._parts) + 1, self._upload_id
        answer = await self._call(
            "UploadPart",
            lambda: self._s3().upload_part(
                Bucket=self._bucket, Key=self._key, UploadId=upload_id, PartNumber=number, Body=part
            ),
        )
        self._parts.append({"PartNumber": number, "ETag": answer["ETag"]})

    async def _call(self, name: str, fn: Callable[[], Any]) -> Any:
        try:
            return await self._run(fn)
        except Exception as exc:  # noqa: BLE001 - botocore's errors, translated once
            raise _failure(name, self._url, exc) from exc


class AsyncS3:
    """Opens inputs and outputs, and writes small objects, through one lazily made boto3 client."""

    def __init__(self, factory: Callable[[], Any], run: Run[Any], part_bytes: int = PART_BYTES) -> None:
        self._factory = factory
        self._client: Any = None
        self._run = run
        self._part_bytes = part_bytes

    def client(self) -> Any:
        if self._client is None:
            self._client = self._factory()
        return self._client

    async def open_input(self, url: str) -> InputSource:
        """The object opened; one of at most CHUNK_BYTES is read at once, in the same pool call (a
        small input costs one thread hop, not four)."""
        bucket, key = split(url)

        def get() -> tuple[Any, int | None, bytes | None]:
            got = self.client().get_object(Bucket=bucket, Key=key)
            length = got.get("ContentLength")
            size = int(length) if length is not None else None
            if size is not None and size <= CHUNK_BYTES:
                body = got["Body"]
                try:
                    data: bytes = body.read()
                finally:
                    body.close()
                return None, size, data
            return got["Body"], size, None

        try:
            body, length, data = await self._run(get)
        except Exception as exc:  # noqa: BLE001 - botocore's errors, translated once
            raise _failure("GetObject", url, exc) from exc
        if data is not None:
            return BytesInput(data)
        return S3Input(url, body, length, self._run)

    def open_output(self, url: str, content_type: str | None) -> S3Output:
        return S3Output(self.client, url, content_type, self._run, self._part_bytes)

    async def put(self, url: str, data: bytes, content_type: str | None) -> None:
        output = self.open_output(url, content_type)
        await output.write(data)
        await output.finish()
