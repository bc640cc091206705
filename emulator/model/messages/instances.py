"""The instance a container gets: its memory, CPU share and GPUs (docs/cloud-parity.md, "The
instance a container gets").

[U] texts are smlocal's own choice (SageMaker publishes no text for a container killed for memory);
append, do not reorder.
"""

from __future__ import annotations

from emulator.model.messages.resources import cannot_start_container

__all__ = [
    "out_of_memory",
    "out_of_memory_at_start",
    "host_memory_short",
    "host_gpus_missing",
    "unknown_instance_type",
    "instance_limits_tag",
]


def _gib(value_bytes: int) -> str:
    return f"{value_bytes / 2**30:.3g}"


def out_of_memory(limit_bytes: int, instance_type: str, type_memory_gib: float) -> str:  # [U]
    """The endpoint's log line for a container the kernel killed at its memory limit."""
    return f"out of memory at {_gib(limit_bytes)} GiB ({instance_type} has {type_memory_gib:g} GiB)"


def out_of_memory_at_start(variant: str, line: str) -> str:
    """The FailureReason: SageMaker's CannotStartContainerError, then smlocal's words [U] (`line`:
    out_of_memory's, or plain "out of memory" for a container without an instance type's limit)."""
    return f"{cannot_start_container(variant)}. The container was killed: {line}"


def host_memory_short(instance_type: str, type_memory_gib: float, host_bytes: int) -> str:  # [U]
    return (
        f"warning: {instance_type} has {type_memory_gib:g} GiB of memory, this machine {_gib(host_bytes)} "
        f"GiB: its containers run with {_gib(host_bytes)} GiB"
    )


def host_gpus_missing(instance_type: str, gpus: int, model: str | None) -> str:  # [U]
    return (
        f"warning: {instance_type} has {gpus} {model or 'GPU'}, but the Docker engine has no NVIDIA "
        "runtime: its containers run without GPUs"
    )


def unknown_instance_type(instance_type: str) -> str:  # [U]
    return (
        f"warning: smlocal has no figures for {instance_type}: its containers run without memory, "
        "CPU or GPU limits"
    )


def instance_limits_tag(key: str, value: str) -> str:  # [U]
    return f"warning: tag {key}={value!r} is not understood (give 'off' or 'on'): instance limits stay on"
