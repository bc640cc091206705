"""S3 object URLs as SageMaker takes them (emulator/model/s3_urls.py)."""

from __future__ import annotations

import pytest

from emulator.model.s3_urls import s3_location


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("s3://bucket/in/put.json", ("bucket", "in/put.json")),
        ("s3://bucket/a%20b", ("bucket", "a%20b")),  # an s3:// key is taken as it is
        ("https://bucket.s3.amazonaws.com/in/put.json", ("bucket", "in/put.json")),
        ("https://bucket.s3.us-west-2.amazonaws.com/in/put.json", ("bucket", "in/put.json")),
        ("https://my.dotted.bucket.s3.eu-central-1.amazonaws.com/k", ("my.dotted.bucket", "k")),
        ("https://bucket.s3-us-west-2.amazonaws.com/k", ("bucket", "k")),  # the legacy dash form
        ("https://bucket.s3.cn-north-1.amazonaws.com.cn/k", ("bucket", "k")),
        ("https://s3.amazonaws.com/bucket/in/put.json", ("bucket", "in/put.json")),
        ("https://s3.us-west-2.amazonaws.com/bucket/in/put.json", ("bucket", "in/put.json")),
        ("https://s3-us-west-2.amazonaws.com/bucket/k", ("bucket", "k")),
        ("https://bucket.s3.amazonaws.com/a%20b/c%2Bd", ("bucket", "a b/c+d")),  # decoded, as S3 does
        ("https://BUCKET.S3.AMAZONAWS.COM/Key", ("bucket", "Key")),  # host names are case-insensitive
    ],
)
def test_s3_object_urls(url: str, expected: tuple[str, str]) -> None:
    assert s3_location(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        "http://bucket.s3.amazonaws.com/k",  # not https
        "https://example.com/bucket/k",  # not S3
        "https://bucket.s3.amazonaws.com.evil.example/k",
        "https://s3.amazonaws.com/",  # no bucket
        "https://bucket.s3.amazonaws.com/k?versionId=1",  # a query is not part of an object URL
        "s3:///k",
        "file:///tmp/in.json",
        "bucket/key",
    ],
)
def test_anything_else_is_not_an_s3_object_url(url: str) -> None:
    assert s3_location(url) is None
