"""Inference components (issue 26).

[U] texts are smlocal's own choice (SageMaker publishes no text for these); append, do not reorder.
"""

from __future__ import annotations

__all__ = [
    "copy_needs_cpus",
    "copy_needs_memory",
    "copy_needs_accelerators",
]


def copy_needs_cpus(needed: float, instance_type: str, has: float) -> str:  # [U]
    """One copy asks for more CPU cores than a whole instance of the type has."""
    return f"needs {needed} CPU cores, {instance_type} has {has:g}"


def copy_needs_memory(needed_mb: int, instance_type: str, has_mb: int) -> str:  # [U]
    """One copy's MinMemoryRequiredInMb is more than a whole instance of the type has."""
    return f"needs {needed_mb} MB of memory, {instance_type} has {has_mb}"


def copy_needs_accelerators(needed: int, instance_type: str, has: int) -> str:  # [U]
    """One copy asks for more accelerator devices than a whole instance of the type has."""
    devices = "device" if needed == 1 else "devices"
    return f"needs {needed} accelerator {devices}, {instance_type} has {has}"
