"""Asynchronous inference's S3 streams (emulator/hosting/async_inference/s3_stream.py) against moto's
real S3 API: inputs read a chunk at a time, answers written as they come (one PutObject when small,
a multipart upload of PART_BYTES parts otherwise), failures named by call and object."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from emulator.hosting.async_inference.s3_stream import CHUNK_BYTES, PART_BYTES, AsyncS3, S3Failure

T = TypeVar("T")
PIECE = 64 * 1024  # what the container connection hands over at a time


async def run(fn: Callable[[], T]) -> T:
    return await asyncio.to_thread(fn)


@pytest.fixture
def s3(s3_client_factory: Callable[[], Any]) -> AsyncS3:
    return AsyncS3(s3_client_factory, run)


async def test_a_small_answer_is_one_put_object_and_is_kept_for_the_notification(
    s3: AsyncS3, s3_bucket: str, s3_client: Any
) -> None:
    output = s3.open_output(f"s3://{s3_bucket}/out/small", "application/json")
    await output.write(b'{"a": ')
    await output.write(b"1}")
    assert await output.finish() == b'{"a": 1}'
    got = s3_client.get_object(Bucket=s3_bucket, Key="out/small")
    assert got["Body"].read() == b'{"a": 1}' and got["ContentType"] == "application/json"
    assert "-" not in got["ETag"]  # not a multipart object


async def test_a_large_answer_goes_up_in_parts_and_no_more_than_a_part_is_held(
    s3: AsyncS3, s3_bucket: str, s3_client: Any
) -> None:
    size = 2 * PART_BYTES + 3 * PIECE
    data = hashlib.sha256(b"seed").digest() * (size // 32)
    output = s3.open_output(f"s3://{s3_bucket}/out/large", "image/png")
    held = 0
    for start in range(0, len(data), PIECE):
        await output.write(data[start : start + PIECE])
        held = max(held, output._buffered)
    assert await output.finish() is None  # too large to keep for a notification
    assert held < PART_BYTES  # a full part is sent (and let go) at once
    got = s3_client.get_object(Bucket=s3_bucket, Key="out/large")
    assert got["Body"].read() == data
    assert got["ContentType"] == "image/png"
    assert got["ETag"].strip('"').endswith("-3")  # two full parts and the rest
    assert s3_client.list_multipart_uploads(Bucket=s3_bucket).get("Uploads", []) == []


async def test_an_aborted_answer_leaves_no_object_and_no_upload(
    s3: AsyncS3, s3_bucket: str, s3_client: Any
) -> None:
    output = s3.open_output(f"s3://{s3_bucket}/out/broken", None)
    await output.write(b"x" * (PART_BYTES + 1))  # one part sent: the upload exists
    assert len(s3_client.list_multipart_uploads(Bucket=s3_bucket).get("Uploads", [])) == 1
    await output.abort()
    assert s3_client.list_multipart_uploads(Bucket=s3_bucket).get("Uploads", []) == []
    assert s3_client.list_objects_v2(Bucket=s3_bucket).get("Contents", []) == []


async def test_s3_failures_name_the_call_and_the_object(s3: AsyncS3) -> None:
    with pytest.raises(S3Failure) as put:
        await s3.put("s3://no-such-bucket-smlocal/err/x-error.out", b"reason", "text/plain")
    assert str(put.value) == (
        "PutObject s3://no-such-bucket-smlocal/err/x-error.out: NoSuchBucket: An error occurred "
        "(NoSuchBucket) when calling the PutObject operation: The specified bucket does not exist"
    )
    with pytest.raises(S3Failure) as big:
        output = s3.open_output("s3://no-such-bucket-smlocal/out/big", None)
        await output.write(b"x" * PART_BYTES)
    assert str(big.value).startswith(
        "CreateMultipartUpload s3://no-such-bucket-smlocal/out/big: NoSuchBucket: "
    )
    with pytest.raises(S3Failure) as get:
        await s3.open_input("s3://no-such-bucket-smlocal/in")
    assert str(get.value).startswith("GetObject s3://no-such-bucket-smlocal/in: NoSuchBucket: ")


async def test_an_input_is_read_a_chunk_at_a_time(s3: AsyncS3, s3_bucket: str, s3_client: Any) -> None:
    data = b"i" * (2 * CHUNK_BYTES + 5)
    s3_client.put_object(Bucket=s3_bucket, Key="in", Body=data)
    source = await s3.open_input(f"s3://{s3_bucket}/in")
    assert source.length == len(data)
    sizes = [len(chunk) async for chunk in source.chunks()]
    await source.close()
    assert sizes == [CHUNK_BYTES, CHUNK_BYTES, 5] and source.error is None

    s3_client.put_object(Bucket=s3_bucket, Key="small", Body=b"s" * CHUNK_BYTES)
    small = await s3.open_input(f"s3://{s3_bucket}/small")  # read in the opening call
    assert small.length == CHUNK_BYTES and [c async for c in small.chunks()] == [b"s" * CHUNK_BYTES]
