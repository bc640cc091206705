"""Server-side input validation against botocore's service models, in AWS's (Coral) wording.

botocore checks only minimums (and required members) on the client, so the emulator enforces the
model's maxima, patterns, enums, ranges and required members itself, the way the real service's
Coral layer does, before any handler runs:

    validate_input(operation_model("sagemaker", "CreateEndpoint").input_shape, params)

raises `ValidationFailed` carrying every violation found, in one message::

    1 validation error detected: Value 'my_ep' at 'endpointName' failed to satisfy constraint:
    Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9])*
    2 validation errors detected: {item}; {item}

Each item is ``Value '{value}' at '{path}' failed to satisfy constraint: {constraint}`` with one
of the constraints ``Member must satisfy regular expression pattern: {pattern as in the model}``,
``Member must have length less than or equal to {max}`` / ``... greater than or equal to {min}``
(strings, lists, maps, bytes blobs), ``Member must have value less than or equal to {max}`` /
``... greater than or equal to {min}`` (numbers), ``Member must satisfy enum value set: [a, b]``
(model order), or ``Value null at '{path}' failed to satisfy constraint: Member must not be null``
for a missing (or JSON null) required member.

Conventions (where AWS's exact behaviour is unknown, these are our choices):

* Paths: member names with the first letter lower-cased (``EndpointName`` -> ``endpointName``),
  nested with ``.``; list items as ``{list}.{i}.member`` with a 1-based index
  (``productionVariants.1.member.variantName``); map values as ``{map}.{key}``
  (``environment.MY_VAR``); a bad map key is reported at ``{map}`` as
  ``Value '{key}' at '{map}' failed to satisfy constraint: Map keys must satisfy constraint:
  [{constraint}]``, one item per violated constraint.
* Order: structure members in model member order (missing-required and invalid alike); within one
  member: type, enum, pattern, length/value maximum, length/value minimum; for a list or map its own
  length first, then its entries in order.
* Sensitive members (``sensitive`` in the model, or anything nested in a sensitive shape) print
  ``Value at '{path}' ...``: the value never appears in the message. Lists, maps and structures
  whose subtree holds a sensitive shape are likewise never printed.
* Values print as given (strings verbatim, however long); numbers as Python prints them, booleans
  as ``true``/``false``, lists as ``[a, b]``, maps/structures as ``{k=v, ...}`` (Java's style),
  bytes as Java's ByteBuffer does.
* Wrong JSON types (a string where an integer is modelled, a list where a structure is...) are
  deserialisation errors, as in AWS's Coral layer: when any is found, only those are reported,
  each as ``Member must be of type {integer|string|list|...}``, in a ``MalformedRequest``
  (json-1.1: SerializationException, 400; runtime and CloudWatch: ValidationError). Coral's own
  text for them is its deserialiser's (``STRING_VALUE can not be converted to an Integer``);
  naming the member is our choice. So are numbers outside their type's range (integer: 32 bits,
  long: 64 bits, no NaN or infinity) and timestamps that are no timestamp (epoch seconds, ISO 8601
  text or a datetime, years 1 to 9999: emulator.wire.timestamps).
  Members bound to HTTP headers/URI/query (rest-json runtime) may be given as the raw strings:
  integers and booleans are parsed (``"60"``, ``"true"``) before their constraints are checked.
* Unknown members are ignored, as AWS does. Blobs given as ``bytes``/``bytearray``/``memoryview``
  are length-checked; blobs given as (base64) ``str`` are not. Union "exactly one member" rules
  are not checked.
* Lengths are Python ``len`` (code points); Java counts UTF-16 units, which differs only for
  characters outside the BMP.

Patterns are Java regexes applied to the whole value, translated for the ``regex`` package by
emulator.wire.java_patterns (see there for what is translated and how long values are matched).

Validators are compiled once per shape (closures, cached per shape name and model), so a request
costs a dict walk plus a cached regex answer per string member.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

import botocore.model

from emulator.errors import MalformedRequest, ValidationFailed
from emulator.wire.java_patterns import compile_pattern, matcher, translate_java_pattern
from emulator.wire.timestamps import is_timestamp

__all__ = ["compile_pattern", "translate_java_pattern", "validate_input", "validator_for"]

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------------------------

Check = Callable[[Any, str, list[str]], None]
Fmt = Callable[[Any, str, str], str]


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


def _fmt_value(value: Any, path: str, constraint: str) -> str:
    return f"Value '{_render(value)}' at '{path}' failed to satisfy constraint: {constraint}"


def _fmt_hidden(value: Any, path: str, constraint: str) -> str:
    return f"Value at '{path}' failed to satisfy constraint: {constraint}"


def _fmt_map_key(value: Any, path: str, constraint: str) -> str:
    return (
        f"Value '{_render(value)}' at '{path}' failed to satisfy constraint: "
        f"Map keys must satisfy constraint: [{constraint}]"
    )


def _fmt_map_key_hidden(value: Any, path: str, constraint: str) -> str:
    return f"Value at '{path}' failed to satisfy constraint: Map keys must satisfy constraint: [{constraint}]"


def _null(path: str) -> str:
    return f"Value null at '{path}' failed to satisfy constraint: Member must not be null"


def _camel(name: str) -> str:
    return name[:1].lower() + name[1:]


# ---------------------------------------------------------------------------------------------
# Validator compilation
# ---------------------------------------------------------------------------------------------

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


_TYPE_CONSTRAINT = "Member must be of type "
#: the range of Java's int and long, which Coral deserialises integer and long members into
_INTEGRAL_RANGE: dict[str, tuple[int | None, int | None]] = {
    "integer": (-(2**31), 2**31 - 1),
    "long": (-(2**63), 2**63 - 1),
}


def _type_error(fmt: Fmt, value: Any, path: str, type_name: str) -> str:
    return fmt(value, path, f"{_TYPE_CONSTRAINT}{type_name}")


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
        fmt: Fmt = _fmt_map_key_hidden if hidden else _fmt_map_key
    else:
        fmt = _fmt_hidden if hidden else _fmt_value
    if t == "string":
        return _build_string(shape, fmt)
    if t in _NUMERIC:
        return _build_number(shape, fmt)
    if t == "boolean":

        def check_bool(v: Any, path: str, errors: list[str]) -> None:
            if not isinstance(v, bool):
                errors.append(_type_error(fmt, v, path, "boolean"))

        return check_bool
    if t == "timestamp":

        def check_timestamp(v: Any, path: str, errors: list[str]) -> None:
            if not is_timestamp(v):
                errors.append(_type_error(fmt, v, path, "timestamp"))

        return check_timestamp
    if t == "blob":
        return _build_blob(shape, fmt)
    # Containers: printing the whole value would leak a sensitive descendant.
    cfmt = _fmt_hidden if hidden or _holds_sensitive(shape) else fmt
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
            errors.append(_type_error(fmt, v, path, "string"))
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
            errors.append(_type_error(fmt, v, path, type_name))
            return
        if isinstance(v, float) and not math.isfinite(v):
            errors.append(_type_error(fmt, v, path, type_name))
            return
        if low is not None and high is not None and isinstance(v, int) and not low <= v <= high:
            errors.append(_type_error(fmt, v, path, type_name))
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
            errors.append(_type_error(fmt, v, path, "blob"))
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
                    errors.append(_type_error(fmt, v, path, type_name))
                    return
                check(text.lower() == "true", path, errors)
                return
            try:
                number: float = int(text) if type_name in ("integer", "long") else float(text)
            except ValueError:
                errors.append(_type_error(fmt, v, path, type_name))
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
            errors.append(_type_error(fmt, v, path, "structure"))
            return
        prefix = path + "." if path else ""
        start = len(errors)
        for name, camel in required:
            if v.get(name) is None:
                errors.append(_null(prefix + camel))
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
                    errors.append(_null(prefix + camel))
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
                member_check, member.type_name, _fmt_hidden if member_hidden else _fmt_value
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
            errors.append(_type_error(fmt, v, path, "list"))
            return
        size = len(v)
        if mx is not None and size > mx:
            errors.append(fmt(v, path, max_msg))
        if mn is not None and size < mn:
            errors.append(fmt(v, path, min_msg))
        for index, item in enumerate(v, 1):
            item_path = f"{path}.{index}.member"
            if item is None:
                errors.append(_null(item_path))
            else:
                item_check(item, item_path, errors)

    return check_list


def _build_map(shape: botocore.model.Shape, hidden: bool, fmt: Fmt) -> Check:
    mn, mx, min_msg, max_msg = _bounds(shape, "length")
    key_check = validator_for(shape.key, hidden=hidden, map_key=True)
    value_check = validator_for(shape.value, hidden=hidden)

    def check_map(v: Any, path: str, errors: list[str]) -> None:
        if type(v) is not dict and not isinstance(v, Mapping):
            errors.append(_type_error(fmt, v, path, "map"))
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
                errors.append(_null(value_path))
            else:
                value_check(value, value_path, errors)

    return check_map


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------


_top_level: dict[int, tuple[botocore.model.Shape, Check]] = {}


def validate_input(shape: botocore.model.Shape, params: Mapping[str, Any]) -> None:
    """Check `params` (an operation's input members, PascalCase keys) against `shape` (its
    input structure). Raises ValidationFailed listing every violation in Coral's wording."""
    entry = _top_level.get(id(shape))
    if entry is not None and entry[0] is shape:
        check = entry[1]
    else:  # the shape object is kept alive by the entry, so its id cannot be reused
        check = validator_for(shape)
        _top_level[id(shape)] = (shape, check)
    errors: list[str] = []
    check(params, "", errors)
    if not errors:
        return
    malformed = [e for e in errors if _TYPE_CONSTRAINT in e]
    if malformed:  # Coral's deserialiser fails before its validator runs
        raise MalformedRequest(_summary(malformed))
    raise ValidationFailed(_summary(errors))


def _summary(errors: list[str]) -> str:
    if len(errors) == 1:
        return f"1 validation error detected: {errors[0]}"
    return f"{len(errors)} validation errors detected: " + "; ".join(errors)
