"""Gated model data: which S3 model data needs ModelAccessConfig.AcceptEula=True [U].

SageMaker keeps its gated models (JumpStart's Llama, Gemma, ...) in private buckets and refuses
CreateModel with a ValidationException when their data source lacks AcceptEula=True [O]; how it knows
a model is gated is not published. smlocal's rule: the model data's **bucket carries the tag
`smlocal:requires-eula` = `true`** (S3's PutBucketTagging, so moto's S3 and a real bucket both work),
for every data source in it (ModelDataSource, each AdditionalModelDataSources channel; S3Object or
S3Prefix alike). A bucket whose tags cannot be read (no tag set, access denied) is not gated.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from emulator.errors import ValidationFailed
from emulator.model import messages
from emulator.model.resources import ModelDataSource

#: The bucket tag that marks every model in the bucket as gated (value "true", any case).
GATED_TAG = "smlocal:requires-eula"


def bucket_gated(client: Any, bucket: str) -> bool:
    try:
        tags = client.get_bucket_tagging(Bucket=bucket).get("TagSet", [])
    except (ClientError, BotoCoreError):  # NoSuchTagSet, AccessDenied, ...: not gated
        return False
    return any(t.get("Key") == GATED_TAG and str(t.get("Value", "")).lower() == "true" for t in tags)


def check_eula(client: Any, source: ModelDataSource, bucket: str) -> None:
    """CreateModel's check: a gated model's data source without AcceptEula=True is refused."""
    if source.accept_eula is True:
        return
    if bucket_gated(client, bucket):
        raise ValidationFailed(messages.eula_required(source.uri))
