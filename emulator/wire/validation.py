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
  reported in the same list as ``Member must be of type {integer|string|list|...}``. AWS answers
  those with a SerializationException instead; a ValidationFailed naming the member is our choice.
  Members bound to HTTP headers/URI/query (rest-json runtime) may be given as the raw strings:
  integers and booleans are parsed (``"60"``, ``"true"``) before their constraints are checked.
* Unknown members are ignored, as AWS does. Timestamps are checked for type only (number, string
  or datetime). Blobs given as ``bytes``/``bytearray``/``memoryview`` are length-checked; blobs
  given as (base64) ``str`` are not. Union "exactly one member" rules are not checked.
* Lengths are Python ``len`` (code points); Java counts UTF-16 units, which differs only for
  characters outside the BMP.

Patterns are Java regexes applied to the whole value (``fullmatch``). `compile_pattern` translates
them for the ``regex`` package: Java's POSIX classes (``\\p{ASCII}``, ``\\p{Print}``,
``\\p{Alnum}`` ...) become their ASCII sets, ``\\d \\w \\s`` (and negations) their ASCII sets as in
Java, ``.`` excludes Java's line terminators, ``\\z`` is ``\\Z``, ``\\uD800\\uDC00`` surrogate
pairs become the code point, and a quantified ``$`` (``${1,128}``) drops its quantifier. The
``regex`` package is used rather than ``re`` because it does not backtrack exponentially on the
models' nested-star patterns; values longer than 256 characters are matched with a timeout and a
timeout counts as a mismatch. Match results for short values are memoised per pattern.

Validators are compiled once per shape (closures, cached per shape name and model), so a request
costs a dict walk plus a cached regex answer per string member.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import botocore.model
import regex

from emulator.errors import ValidationFailed

__all__ = ["compile_pattern", "translate_java_pattern", "validate_input", "validator_for"]

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------
# Java regex -> Python (regex package)
# ---------------------------------------------------------------------------------------------

# Java's POSIX character classes are US-ASCII only (without UNICODE_CHARACTER_CLASS).
_POSIX: dict[str, str] = {
    "Lower": "a-z",
    "Upper": "A-Z",
    "ASCII": r"\x00-\x7F",
    "Alpha": "a-zA-Z",
    "Digit": "0-9",
    "Alnum": "a-zA-Z0-9",
    "Punct": r"!-/:-@\[-`{-~",
    "Graph": r"!-~",
    "Print": r"\x20-\x7E",
    "Blank": r" \t",
    "Cntrl": r"\x00-\x1F\x7F",
    "XDigit": "0-9a-fA-F",
    "Space": r" \t\n\x0B\f\r",
}
# Java's predefined classes are ASCII-only too.
_SHORTHAND: dict[str, str] = {"d": "0-9", "w": "a-zA-Z_0-9", "s": r" \t\n\x0B\f\r"}
_DOT = r"[^\n\r\u0085\u2028\u2029]"  # Java's '.' stops at every line terminator
_JAVA_BIG_Z = r"(?=(?:\r\n|[\n\r\u0085\u2028\u2029])?\Z)"


def _hex4(p: str, i: int) -> int | None:
    """The code unit of a `\\uXXXX` escape starting at p[i] (the backslash), if there is one."""
    if p.startswith("\\u", i) and len(p) >= i + 6:
        digits = p[i + 2 : i + 6]
        if all(c in "0123456789abcdefABCDEF" for c in digits):
            return int(digits, 16)
    return None


def _code_point_escape(cp: int) -> str:
    return f"\\U{cp:08X}" if cp > 0xFFFF else f"\\u{cp:04X}"


def translate_java_pattern(pattern: str) -> str:
    """Rewrite a Java (java.util.regex) pattern into an equivalent one for the `regex` package.

    Raises ValueError for Java constructs this translation does not support (nested/intersected
    character classes, \\Q...\\E, negated shorthand inside a negated class)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            piece, i = _escape(pattern, i, in_class=False)
            out.append(piece)
        elif c == "[":
            piece, i = _char_class(pattern, i)
            out.append(piece)
        elif c == ".":
            out.append(_DOT)
            i += 1
        elif c == "$" and i + 1 < n and pattern[i + 1] == "{":
            # `${1,128}`: a quantified end anchor is still just the end anchor.
            end = pattern.find("}", i + 1)
            if end < 0:
                raise ValueError(f"unterminated quantifier in {pattern!r}")
            out.append("$")
            i = end + 1
            if i < n and pattern[i] in "?+":
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _property(pattern: str, i: int) -> tuple[str, bool, int]:
    """Parse `\\p{Name}` / `\\pL` / `\\P{...}` at p[i]; returns (name, negated, next index)."""
    negated = pattern[i + 1] == "P"
    j = i + 2
    if j < len(pattern) and pattern[j] == "{":
        end = pattern.find("}", j)
        if end < 0:
            raise ValueError(f"unterminated \\p{{ in {pattern!r}")
        name = pattern[j + 1 : end]
        return name, negated, end + 1
    if j >= len(pattern):
        raise ValueError(f"dangling \\p in {pattern!r}")
    return pattern[j], negated, j + 1


def _escape(pattern: str, i: int, *, in_class: bool) -> tuple[str, int]:
    """Translate the escape at p[i] (a backslash). Inside a class, the result is a class body
    fragment; a negated set is returned as '[^...]' and the caller deals with it."""
    if i + 1 >= len(pattern):
        raise ValueError(f"trailing backslash in {pattern!r}")
    e = pattern[i + 1]
    if e in "pP":
        name, negated, j = _property(pattern, i)
        if name.startswith("Is") and name[2:] in _POSIX:
            name = name[2:]
        if name in _POSIX:
            body = _POSIX[name]
        elif name.startswith("java"):
            raise ValueError(f"unsupported Java property \\p{{{name}}} in {pattern!r}")
        else:  # a Unicode category or script the regex package knows (L, N, Z, M, S, P, ...)
            prop = f"\\{'P' if negated else 'p'}{{{name}}}"
            return prop, j
        if negated:
            return f"[^{body}]", j
        return (body if in_class else f"[{body}]"), j
    if e in "dws":
        body = _SHORTHAND[e]
        return (body if in_class else f"[{body}]"), i + 2
    if e in "DWS":
        return f"[^{_SHORTHAND[e.lower()]}]", i + 2
    if e == "u":
        unit = _hex4(pattern, i)
        if unit is None:
            raise ValueError(f"bad \\u escape in {pattern!r}")
        j = i + 6
        if 0xD800 <= unit <= 0xDBFF:
            low = _hex4(pattern, j)
            if low is not None and 0xDC00 <= low <= 0xDFFF:
                cp = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                return _code_point_escape(cp), j + 6
        return _code_point_escape(unit), j
    if e == "Q":
        raise ValueError(f"unsupported \\Q...\\E quoting in {pattern!r}")
    if not in_class:
        if e == "z":
            return "\\Z", i + 2
        if e == "Z":
            return _JAVA_BIG_Z, i + 2
    return pattern[i : i + 2], i + 2


def _char_class(pattern: str, i: int) -> tuple[str, int]:
    """Translate the character class opening at p[i]."""
    j = i + 1
    negated = j < len(pattern) and pattern[j] == "^"
    if negated:
        j += 1
    body: list[str] = []
    extra: list[str] = []  # negated sets inside a positive class, joined by alternation
    while True:
        if j >= len(pattern):
            raise ValueError(f"unterminated character class in {pattern!r}")
        c = pattern[j]
        if c == "]":
            j += 1
            break
        if c == "[" or pattern.startswith("&&", j):
            raise ValueError(f"unsupported nested/intersected character class in {pattern!r}")
        if c == "\\":
            piece, j = _escape(pattern, j, in_class=True)
            if piece.startswith("[^"):
                if negated:
                    raise ValueError(f"unsupported negated set inside [^...] in {pattern!r}")
                extra.append(piece)
            else:
                body.append(piece)
            continue
        body.append(c)
        j += 1
    if not extra:
        return f"[{'^' if negated else ''}{''.join(body)}]", j
    alternatives = ([f"[{''.join(body)}]"] if body else []) + extra
    if len(alternatives) == 1:
        return alternatives[0], j
    return f"(?:{'|'.join(alternatives)})", j


_compiled: dict[str, Any] = {}


def compile_pattern(pattern: str) -> Any:
    """The compiled `regex` object for a model (Java) pattern; cached. Raises ValueError or
    regex.error when the pattern cannot be translated or compiled."""
    rx = _compiled.get(pattern)
    if rx is None:
        rx = regex.compile(translate_java_pattern(pattern), regex.V0)
        _compiled[pattern] = rx
    return rx


_LONG = 256  # values longer than this are matched with a timeout and not memoised
_MATCH_TIMEOUT_S = 0.25
_MEMO_MAX = 4096


def _matcher(pattern: str) -> Callable[[str], bool] | None:
    """A memoising full-match predicate for `pattern`, or None (logged) if it does not compile."""
    try:
        rx = compile_pattern(pattern)
    except (ValueError, regex.error) as exc:  # a newer model may bring a construct we lack
        log.warning("model pattern %r not enforced: %s", pattern, exc)
        return None
    fullmatch = rx.fullmatch
    memo: dict[str, bool] = {}

    def matches(value: str) -> bool:
        ok = memo.get(value)
        if ok is not None:
            return ok
        if len(value) > _LONG:
            try:
                return fullmatch(value, timeout=_MATCH_TIMEOUT_S) is not None
            except TimeoutError:
                return False
        ok = fullmatch(value) is not None
        if len(memo) >= _MEMO_MAX:
            memo.clear()
        memo[value] = ok
        return ok

    return matches


# ---------------------------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------------------------

Check = Callable[[Any, str, list[str]], None]
Fmt = Callable[[Any, str, str], str]


def _render(value: Any) -> str:
    """A value as Coral (Java toString) would print it, near enough."""
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
        return "{" + ", ".join(f"{_render(k)}={_render(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_render(v) for v in value) + "]"
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


def _type_error(fmt: Fmt, value: Any, path: str, type_name: str) -> str:
    return fmt(value, path, f"Member must be of type {type_name}")


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
            if isinstance(v, bool) or not isinstance(v, str | int | float | datetime):
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
    matches = _matcher(pattern) if pattern is not None else None
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

    def check_number(v: Any, path: str, errors: list[str]) -> None:
        if isinstance(v, bool) or not isinstance(v, accepted):
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
    if len(errors) == 1:
        raise ValidationFailed(f"1 validation error detected: {errors[0]}")
    raise ValidationFailed(f"{len(errors)} validation errors detected: " + "; ".join(errors))
