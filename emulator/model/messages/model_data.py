"""CreateModel's texts for ModelDataSource, ModelAccessConfig and AdditionalModelDataSources.

`eula_required` is SageMaker's ValidationException as observed [O] (hashicorp/terraform-provider-aws
#34795, a Llama 2 JumpStart model created without ModelAccessConfig); the rest are [U].
"""

from __future__ import annotations

__all__ = [
    "eula_required",
    "prefix_without_slash",
    "prefix_needs_uncompressed",
    "both_model_data_forms",
    "duplicate_channel",
    "channels_with_multi_model",
]


def eula_required(uri: str) -> str:  # [O]
    return (
        "The AcceptEula value must be explicitly defined as True in order to accept the end-user "
        f'license agreement (EULA) that this "{uri}" model requires. You are responsible for reviewing '
        "and complying with any applicable license terms and making sure they are acceptable for your "
        "use case before downloading or using a model."
    )


def prefix_without_slash(uri: str) -> str:  # [U]; the model says a valid prefix "always ends with /" [M]
    return f"S3Uri {uri} of an S3Prefix data source must end with '/'."


def prefix_needs_uncompressed() -> str:  # [U]
    return "S3DataType S3Prefix requires CompressionType None."


def both_model_data_forms() -> str:  # [U]
    return "Specify either ModelDataUrl or ModelDataSource, not both."


def duplicate_channel(name: str) -> str:  # [U]
    return f"AdditionalModelDataSources has more than one channel named {name}: ChannelName must be unique."


def channels_with_multi_model() -> str:  # [U]; ModelDataSource is not for multi-model endpoints [M]
    return "AdditionalModelDataSources cannot be used with a container in Mode MultiModel."
