"""Validators compiled from botocore shapes: one closure check(value, path, errors) per shape,
cached per shape name and model, that appends a message item for each violation (the order and
conventions are emulator.wire.validation's).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import botocore.model

from emulator.wire.java_patterns import matcher
from emulator.wire.timestamps import is_timestamp
from emulator.wire.validation_messages import (
    Fmt,
    fmt_hidden,
    fmt_map_key,
    fmt_map_key_hidden,
    fmt_value,
    must_not_be_null,
    type_error,
)

Check = Callable[[Any, str, list[str]], None]


def _camel(name: str) -> str:
    return name[:1].lower() + name[1:]


_NUMERIC = {"integer", "long", "float", "double"}
_validators: dict[tuple[object, str, bool, bool], Check] = {}
_sensitive_subtree: dict[tuple[object, str], bool] = {}


def _resolver(shape: botocore.model.Shape) -> object:
    return getattr(shape, "_shape_resolver", None) or id(shape)


def _children(shape: botocore.model.Shape) -> list[botocore.model.Shape]:
    t = shape.type_name
    if t == "structure":
        return list(shape.members.values())
    if t == "list":
        return [shape.member]
    if t == "map":
        return [shape.key, shape.value]
    return []


def _holds_sensitive(shape: botocore.model.Shape, seen: set[str] | None = None) -> bool:
    """Whether the shape or anything below it is marked sensitive (cycles are followed once)."""
    key = (_resolver(shape), shape.name)
    cached = _sensitive_subtree.get(key)
    if cached is not None:
        return cached
    top = seen is None
    seen = set() if seen is None else seen
    if shape.name in seen:
        return False
    seen.add(shape.name)
    result = bool(shape.metadata.get("sensitive")) or any(_holds_sensitive(c, seen) for c in _children(shape))
    if top or result:  # a False below the top may have been cut short by a cycle
        _sensitive_subtree[key] = result
    return result


def validator_for(shape: botocore.model.Shape, *, hidden: bool = False, map_key: bool = False) -> Check:
    """The compiled check(value, path, errors) for a shape; errors are appended as message items.

    `hidden` hides values (a sensitive ancestor); `map_key` formats violations as map-key ones."""
    hidden = hidden or bool(shape.metadata.get("sensitive"))
    key = (_resolver(shape), shape.name, hidden, map_key)
    check = _validators.get(key)
    if check is None:
        check = _build(shape, hidden, map_key, key)
        _validators[key] = check
    return check


#: the range of Java's int and long, which Coral deserialises integer and long members into
_INTEGRAL_RANGE: dict[str, tuple[int | None, int | None]] = {
    "integer": (-(2**31), 2**31 - 1),
    "long": (-(2**63), 2**63 - 1),
}


def _bounds(shape: botocore.model.Shape, what: str) -> tuple[Any, Any, str, str]:
    mn = shape.metadata.get("min")
    mx = shape.metadata.get("max")
    return (
        mn,
        mx,
        f"Member must have {what} greater than or equal to {mn}",
        f"Member must have {what} less than or equal to {mx}",
    )


def _build(
    shape: botocore.model.Shape, hidden: bool, map_key: bool, key: tuple[object, str, bool, bool]
) -> Check:
    t = shape.type_name
    if map_key:
        fmt: Fmt = fmt_map_key_hidden if hidden else fmt_map_key
    else:
        fmt = fmt_hidden if hidden else fmt_value
    if t == "string":
        return _build_string(shape, fmt)
    if t in _NUMERIC:
        return _build_number(shape, fmt)
    if t == "boolean":

        def check_bool(v: Any, path: str, errors: list[str]) -> None:
            if not isinstance(v, bool):
                errors.append(type_error(fmt, v, path, "boolean"))

        return check_bool
    if t == "timestamp":

        def check_timestamp(v: Any, path: str, errors: list[str]) -> None:
            if not is_timestamp(v):
                errors.append(type_error(fmt, v, path, "timestamp"))

        return check_timestamp
    if t == "blob":
        return _build_blob(shape, fmt)
    # Containers: printing the whole value would leak a sensitive descendant.
    cfmt = fmt_hidden if hidden or _holds_sensitive(shape) else fmt
    if t == "structure":
        return _build_structure(shape, hidden, cfmt, key)
    if t == "list":
        return _build_list(shape, hidden, cfmt)
    if t == "map":
        return _build_map(shape, hidden, cfmt)

    def check_any(v: Any, path: str, errors: list[str]) -> None:  # document or unknown: no checks
        return None

    return check_any


def _build_string(shape: botocore.model.Shape, fmt: Fmt) -> Check:
    enum = shape.metadata.get("enum")
    enum_set = frozenset(enum) if enum else None
    enum_msg = "Member must satisfy enum value set: [" + ", ".join(enum or ()) + "]"
    pattern = shape.metadata.get("pattern")
    matches = matcher(pattern) if pattern is not None else None
    pattern_msg = f"Member must satisfy regular expression pattern: {pattern}"
    mn, mx, min_msg, max_msg = _bounds(shape, "length")

    def check_string(v: Any, path: str, errors: list[str]) -> None:
        if not isinstance(v, str):
            errors.append(type_error(fmt, v, path, "string"))
            return
        if enum_set is not None and v not in enum_set:
            errors.append(fmt(v, path, enum_msg))
        if matches is not None and not matches(v):
            errors.append(fmt(v, path, pattern_msg))
        size = len(v)
        if mx is not None and size > mx:
            errors.append(fmt(v, path, max_msg))
        if mn is not None and size < mn:
            errors.append(fmt(v, path, min_msg))

    return check_string


def _build_number(shape: botocore.model.Shape, fmt: Fmt) -> Check:
    integral = shape.type_name in ("integer", "long")
    type_name = shape.type_name
    mn, mx, min_msg, max_msg = _bounds(shape, "value")
    accepted: tuple[type, ...] = (int,) if integral else (int, float)
    low, high = _INTEGRAL_RANGE.get(type_name, (None, None))

    def check_number(v: Any, path: str, errors: list[str]) -> None:
        if isinstance(v, bool) or not isinstance(v, accepted):
            errors.append(type_error(fmt, v, path, type_name))
            return
        if isinstance(v, float) and not math.isfinite(v):
            errors.append(type_error(fmt, v, path, type_name))
            return
        if low is not None and high is not None and isinstance(v, int) and not low <= v <= high:
            errors.append(type_error(fmt, v, path, type_name))
            return
        if mx is not None and v > mx:
            errors.append(fmt(v, path, max_msg))
        if mn is not None and v < mn:
            errors.append(fmt(v, path, min_msg))

    return check_number


def _build_blob(shape: botocore.model.Shape, fmt: Fmt) -> Check:
    mn, mx, min_msg, max_msg = _bounds(shape, "length")

    def check_blob(v: Any, path: str, errors: list[str]) -> None:
        if type(v) is bytes:
            size = len(v)
        elif isinstance(v, bytes | bytearray):
            size = len(v)
        elif isinstance(v, memoryview):
            size = v.nbytes
        elif isinstance(v, str):  # base64 text in a JSON body: the decoded size is the caller's
            return
        else:
            errors.append(type_error(fmt, v, path, "blob"))
            return
        if mx is not None and size > mx:
            errors.append(fmt(v, path, max_msg))
        if mn is not None and size < mn:
            errors.append(fmt(v, path, min_msg))

    return check_blob


def _from_text(check: Check, type_name: str, fmt: Fmt) -> Check:
    """Accept a header/URI/query member's raw text for an integer or boolean shape."""

    def parse(v: Any, path: str, errors: list[str]) -> None:
        if isinstance(v, str):
            text = v.strip()
            if type_name == "boolean":
                if text.lower() not in ("true", "false"):
                    errors.append(type_error(fmt, v, path, type_name))
                    return
                check(text.lower() == "true", path, errors)
                return
            try:
                number: float = int(text) if type_name in ("integer", "long") else float(text)
            except ValueError:
                errors.append(type_error(fmt, v, path, type_name))
                return
            check(number, path, errors)
            return
        check(v, path, errors)

    return parse


def _build_structure(
    shape: botocore.model.Shape, hidden: bool, fmt: Fmt, key: tuple[object, str, bool, bool]
) -> Check:
    # (name, camelName, check, required) in model order; filled after registration so that
    # recursive shapes find this validator in the cache.
    ordered: list[tuple[str, str, Check, bool]] = []
    by_name: dict[str, tuple[str, Check]] = {}
    required: list[tuple[str, str]] = []

    def check_structure(v: Any, path: str, errors: list[str]) -> None:
        if type(v) is not dict and not isinstance(v, Mapping):
            errors.append(type_error(fmt, v, path, "structure"))
            return
        prefix = path + "." if path else ""
        start = len(errors)
        for name, camel in required:
            if v.get(name) is None:
                errors.append(must_not_be_null(prefix + camel))
        for name, value in v.items():
            member = by_name.get(name)
            if member is not None and value is not None:
                member[1](value, prefix + member[0], errors)
        if len(errors) == start:
            return
        # Something failed: report again in model member order.
        del errors[start:]
        for name, camel, member_check, is_required in ordered:
            value = v.get(name)
            if value is None:
                if is_required:
                    errors.append(must_not_be_null(prefix + camel))
                continue
            member_check(value, prefix + camel, errors)

    _validators[key] = check_structure
    required_names = set(shape.required_members)
    for name, member in shape.members.items():
        member_check = validator_for(member, hidden=hidden)
        location = member.serialization.get("location")
        if location in ("header", "uri", "querystring") and member.type_name in (_NUMERIC | {"boolean"}):
            member_hidden = hidden or bool(member.metadata.get("sensitive"))
            member_check = _from_text(
                member_check, member.type_name, fmt_hidden if member_hidden else fmt_value
            )
        camel = _camel(name)
        ordered.append((name, camel, member_check, name in required_names))
        by_name[name] = (camel, member_check)
        if name in required_names:
            required.append((name, camel))
    return check_structure


def _build_list(shape: botocore.model.Shape, hidden: bool, fmt: Fmt) -> Check:
    mn, mx, min_msg, max_msg = _bounds(shape, "length")
    item_check = validator_for(shape.member, hidden=hidden)

    def check_list(v: Any, path: str, errors: list[str]) -> None:
        if type(v) is not list and not isinstance(v, list | tuple):
            errors.append(type_error(fmt, v, path, "list"))
            return
        size = len(v)
        if mx is not None and size > mx:
            errors.append(fmt(v, path, max_msg))
        if mn is not None and size < mn:
            errors.append(fmt(v, path, min_msg))
        for index, item in enumerate(v, 1):
            item_path = f"{path}.{index}.member"
            if item is None:
                errors.append(must_not_be_null(item_path))
            else:
                item_check(item, item_path, errors)

    return check_list


def _build_map(shape: botocore.model.Shape, hidden: bool, fmt: Fmt) -> Check:
    mn, mx, min_msg, max_msg = _bounds(shape, "length")
    key_check = validator_for(shape.key, hidden=hidden, map_key=True)
    value_check = validator_for(shape.value, hidden=hidden)

    def check_map(v: Any, path: str, errors: list[str]) -> None:
        if type(v) is not dict and not isinstance(v, Mapping):
            errors.append(type_error(fmt, v, path, "map"))
            return
        size = len(v)
        if mx is not None and size > mx:
            errors.append(fmt(v, path, max_msg))
        if mn is not None and size < mn:
            errors.append(fmt(v, path, min_msg))
        for k, value in v.items():
            key_check(k, path, errors)
            value_path = f"{path}.{k}"
            if value is None:
                errors.append(must_not_be_null(value_path))
            else:
                value_check(value, value_path, errors)

    return check_map
