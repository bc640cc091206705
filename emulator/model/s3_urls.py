"""S3 object URLs as SageMaker takes them: `s3://bucket/key`, or an `https://` URL of S3 in either
addressing style (InvokeEndpointAsync's InputLocation and AsyncInferenceConfig's output paths match
`^(https|s3)://([^/]+)/?(.*)$`, spec §1.3)."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

#: bucket.s3.amazonaws.com, bucket.s3.REGION.amazonaws.com, bucket.s3-REGION.amazonaws.com (legacy)
_VIRTUAL_HOSTED = re.compile(r"^(?P<bucket>.+)\.s3(?:[.-][a-z0-9-]+)?\.amazonaws\.com(?:\.cn)?$")
#: s3.amazonaws.com, s3.REGION.amazonaws.com, s3-REGION.amazonaws.com: the bucket leads the path
_PATH_STYLE = re.compile(r"^s3(?:[.-][a-z0-9-]+)?\.amazonaws\.com(?:\.cn)?$")


def s3_location(url: str) -> tuple[str, str] | None:
    """(bucket, key) of an S3 object URL; None for anything else (another scheme, another host, no
    bucket). An https URL's path is percent-decoded, as S3 decodes it; an s3:// key is taken as it is."""
    parts = urlsplit(url)
    if parts.scheme == "s3":
        return (parts.netloc, parts.path.lstrip("/")) if parts.netloc else None
    if parts.scheme != "https" or parts.query or parts.fragment:
        return None
    host = (parts.hostname or "").lower()
    path = unquote(parts.path.lstrip("/"))
    virtual = _VIRTUAL_HOSTED.match(host)
    if virtual is not None and not _PATH_STYLE.match(host):
        return virtual.group("bucket"), path
    if _PATH_STYLE.match(host):
        bucket, _, key = path.partition("/")
        return (bucket, key) if bucket else None
    return None
