"""The items of a validation message, in AWS's (Coral) wording: each violation as
``Value '{value}' at '{path}' failed to satisfy constraint: {constraint}``, with values printed as
Java's toString would (emulator.wire.validation describes the conventions).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Fmt = Callable[[Any, str, str], str]

TYPE_CONSTRAINT = "Member must be of type "

_RENDER_DEPTH = 16


def _render(value: Any, depth: int = 0) -> str:
    """A value as Coral (Java toString) would print it, near enough (nesting deeper than
    _RENDER_DEPTH prints as `...`)."""
    if depth > _RENDER_DEPTH:
        return "..."
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes | bytearray | memoryview):
        size = len(value)
        return f"java.nio.HeapByteBuffer[pos=0 lim={size} cap={size}]"
    if isinstance(value, Mapping):
        return (
            "{"
            + ", ".join(f"{_render(k, depth + 1)}={_render(v, depth + 1)}" for k, v in value.items())
            + "}"
        )
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_render(v, depth + 1) for v in value) + "]"
    return str(value)


def fmt_value(value: Any, path: str, constraint: str) -> str:
    return f"Value '{_render(value)}' at '{path}' failed to satisfy constraint: {constraint}"


def fmt_hidden(value: Any, path: str, constraint: str) -> str:
    return f"Value at '{path}' failed to satisfy constraint: {constraint}"


def fmt_map_key(value: Any, path: str, constraint: str) -> str:
    return (
        f"Value '{_render(value)}' at '{path}' failed to satisfy constraint: "
        f"Map keys must satisfy constraint: [{constraint}]"
    )


def fmt_map_key_hidden(value: Any, path: str, constraint: str) -> str:
    return f"Value at '{path}' failed to satisfy constraint: Map keys must satisfy constraint: [{constraint}]"


def must_not_be_null(path: str) -> str:
    return f"Value null at '{path}' failed to satisfy constraint: Member must not be null"


def type_error(fmt: Fmt, value: Any, path: str, type_name: str) -> str:
    return fmt(value, path, f"{TYPE_CONSTRAINT}{type_name}")
