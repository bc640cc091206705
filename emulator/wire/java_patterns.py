"""Java regular expressions (as botocore's models carry them) for Python's `regex` package, and a
memoising full-match predicate per pattern. Used by emulator.wire.validation.

Patterns are Java regexes applied to the whole value (``fullmatch``). `compile_pattern` translates
them for the ``regex`` package: Java's POSIX classes (``\\p{ASCII}``, ``\\p{Print}``,
``\\p{Alnum}`` ...) become their ASCII sets, ``\\d \\w \\s`` (and negations) their ASCII sets as in
Java, ``.`` excludes Java's line terminators, ``\\z`` is ``\\Z``, ``\\uD800\\uDC00`` surrogate
pairs become the code point, and a quantified ``$`` (``${1,128}``) drops its quantifier. The
``regex`` package is used rather than ``re`` because it does not backtrack exponentially on the
models' nested-star patterns; values longer than 256 characters are matched with a timeout and a
timeout counts as a mismatch. Match results for short values are memoised per pattern.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import regex

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


def matcher(pattern: str) -> Callable[[str], bool] | None:
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
