"""Reports of a contract run: JSON (`--json`), JUnit XML (`--junit`) and the text both share with the
console (contract_tests.console) and the pytest plugin: summary line, exit code, fix-first explanations.

Everything here works on CheckResults alone (plus, optionally, the Checks for their `fix` text), so it
is tested with hand-made results and no Docker.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import math
import re
import socket
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePath
from typing import Any

from contract_tests.registry import Check
from contract_tests.result import CAUSE_CONTAINER_REMOVED, CheckResult, Outcome

#: The JUnit testsuite every report uses (CI tools group the checks under it).
SUITE_NAME = "smlocal-contract"

#: `smlocal check` exits with this when every check passed or was skipped ...
EXIT_OK = 0
#: ... with this when a check failed or errored ...
EXIT_FAILED = 1
#: ... and with this on a usage error (unknown check id, image not found locally, bad option).
EXIT_USAGE = 2
#: No Docker engine could be reached: nothing was checked.
EXIT_NO_ENGINE = 3

ERROR_NOTE = (
    "An ERROR is a bug in the checker, not a verdict on the image; "
    "the traceback is in the evidence (--json / --junit)."
)

# XML 1.0 allows tab, newline, carriage return and printable characters; container logs bring ANSI
# escapes and other control characters, which no parser accepts even when escaped.
_XML_INVALID = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


# What to change, as checks write it inside their failure messages: `... was seen. Fix: do this.` (to the
# end of that line; log lines may follow it). At a line's start or after a space, never inside a word.
_FIX_IN_MESSAGE = re.compile(r"(?:^|(?<=\s))Fix:[ \t]*(?P<fix>[^\n]*)", re.MULTILINE)


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def exit_code(results: Iterable[CheckResult]) -> int:
    """0 when no check failed or errored (skipped is fine), else 1."""
    return EXIT_OK if all(r.ok for r in results) else EXIT_FAILED


def counts(results: Iterable[CheckResult]) -> dict[Outcome, int]:
    found = {outcome: 0 for outcome in Outcome}
    for r in results:
        found[r.outcome] += 1
    return found


def headline_warnings(results: Iterable[CheckResult]) -> list[str]:
    """The warnings the summary line repeats (CheckContext.warn(..., headline=True)), in run order."""
    return [w for r in results for w in r.headline_warnings]


def summary(results: Sequence[CheckResult]) -> str:
    """`12 passed, 1 failed, 2 skipped in 14.2 s` (outcomes with a zero count left out), then each
    headline warning: `...; warning: no successful invocation: ...`."""
    found = counts(results)
    order = (Outcome.PASSED, Outcome.FAILED, Outcome.ERROR, Outcome.SKIPPED)
    shown = [
        f"{found[o]} {o.value}{'s' if o is Outcome.ERROR and found[o] > 1 else ''}" for o in order if found[o]
    ] or ["no checks"]
    total = sum(r.duration_s for r in results)
    line = f"{', '.join(shown)} in {total:.1f} s"
    return "; ".join([line, *(f"warning: {w}" for w in headline_warnings(results))])


# --- JSON -------------------------------------------------------------------------------------------


def json_safe(value: Any) -> Any:
    """`value` as plain JSON data: evidence may hold bytes, paths, enums, dataclasses, sets, floats..."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, enum.Enum):
        return json_safe(value.value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return json_safe({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
        return [json_safe(v) for v in items]
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    return str(value)


#: `--json`'s format: version 1 was the bare list of results; version 2 wraps it in an object whose top
#: level says what a CI reader needs first (exit code, summary, headline warnings). docs/contract.md.
JSON_VERSION = 2


def result_json(result: CheckResult, fix: str = "") -> dict[str, Any]:
    """CheckResult.to_json with every evidence value made JSON-serialisable, and `fix`: what to change
    for a FAILED result (its message's own `Fix: ...`, else the check's `fix`), "" for the others."""
    data: dict[str, Any] = json_safe(result.to_json())
    data["fix"] = explain(result, fix).fix if result.outcome is Outcome.FAILED else ""
    return data


def results_json(
    results: Iterable[CheckResult], checks: Iterable[Check] | Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    fixes = fixes_of(checks)
    return [result_json(r, fixes.get(r.id, "")) for r in results]


def report_json(
    results: Sequence[CheckResult],
    checks: Iterable[Check] | Mapping[str, str] | None = None,
    properties: Mapping[str, str] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The `--json` document (JSON_VERSION 2): `version`, `exit_code`, `summary` (the console's last
    line), `counts`, `headline_warnings` (strings, run order) and `warnings` (`{"id", "warning",
    "headline"}`, every warning), the `properties` given (image, image id), the `extra` members
    (`cold_start`: the first container's profile, or null), then `results`: the list version 1 was,
    each with `fix` added for a FAILED one."""
    loud = headline_warnings(results)
    return {
        "version": JSON_VERSION,
        "exit_code": exit_code(results),
        "summary": summary(results),
        "counts": {o.value: n for o, n in counts(results).items()},
        "headline_warnings": loud,
        "warnings": [
            {"id": r.id, "warning": w, "headline": w in r.headline_warnings}
            for r in results
            for w in r.warnings
        ],
        **({"properties": dict(properties)} if properties else {}),
        **dict(extra or {}),
        "results": results_json(results, checks),
    }


def write_json(
    results: Sequence[CheckResult],
    path: str | Path,
    checks: Iterable[Check] | Mapping[str, str] | None = None,
    properties: Mapping[str, str] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> None:
    document = report_json(results, checks, properties, extra)
    Path(path).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


# --- text shared by the console, JUnit and the pytest plugin ----------------------------------------


def evidence_text(evidence: Mapping[str, Any], skip: Sequence[str] = ()) -> str:
    """`key: value` lines; multi-line values (logs, tracebacks) indented below their key."""
    lines = []
    for key, value in evidence.items():
        if key in skip:
            continue
        safe = json_safe(value)
        text = safe if isinstance(safe, str) else json.dumps(safe)
        if "\n" in text.rstrip("\n"):
            lines.append(f"{key}:")
            lines.extend(f"    {line}" for line in text.rstrip("\n").splitlines())
        else:
            lines.append(f"{key}: {text.rstrip()}")
    return "\n".join(lines)


def split_fix(message: str) -> tuple[str, str]:
    """`(what was seen, what to change)` from a failure message that says its fix (`... Fix: ...`), the
    fix being the rest of its line; `(message, "")` when it says none."""
    found = _FIX_IN_MESSAGE.search(message)
    if found is None or not found.group("fix").strip():
        return message, ""
    before = message[: found.start()].rstrip()
    after = message[found.end() :].strip("\n")
    seen = "\n".join(part for part in (before, after) if part.strip())
    return seen, found.group("fix").strip()


@dataclasses.dataclass(frozen=True)
class Explained:
    """A failure or error as a reader takes it in: what to change first, what was seen, where the
    rule is documented, and (for an ERROR) what an ERROR means."""

    fix: str
    seen: str
    note: str = ""
    see: str = ""

    def lines(self) -> list[str]:
        return [
            *([f"Fix: {self.fix}"] if self.fix else []),
            *([self.seen] if self.seen else []),
            *([self.note] if self.note else []),
            *([f"See {self.see}"] if self.see else []),
        ]


def explain(result: CheckResult, fix: str = "") -> Explained:
    """The parts of explanation(): a FAILED result's own fix (its message's `Fix: ...`) before the
    check's `fix`; an ERROR has no fix but the ERROR_NOTE (unless its container was removed)."""
    if result.outcome is Outcome.ERROR:
        removed = result.evidence.get("cause") == CAUSE_CONTAINER_REMOVED  # that one is no checker bug
        return Explained("", result.message, "" if removed else ERROR_NOTE, result.doc_url)
    if result.outcome is Outcome.FAILED:
        seen, own = split_fix(result.message)
        return Explained((own or fix).strip(), seen, see=result.doc_url)
    return Explained("", result.message, see=result.doc_url)


def explanation(result: CheckResult, fix: str = "") -> str:
    """What a reader needs for a failure or error, fix first: `Fix: ...` (the message's own, else
    `fix`), then what was seen (the message without its fix), then `See docs/contract.md#...`."""
    return "\n".join(explain(result, fix).lines())


def fixes_of(checks: Iterable[Check] | Mapping[str, str] | None) -> Mapping[str, str]:
    if checks is None:
        return {}
    if isinstance(checks, Mapping):
        return checks
    return {c.id: c.fix for c in checks}


# --- JUnit XML --------------------------------------------------------------------------------------


def xml_text(value: str) -> str:
    """`value` without the characters XML 1.0 cannot carry (escaping of <, &, quotes is ElementTree's)."""
    return _XML_INVALID.sub(lambda m: f"\\x{ord(m.group()):02x}", value)


def junit_xml(
    results: Sequence[CheckResult],
    checks: Iterable[Check] | Mapping[str, str] | None = None,
    suite_name: str = SUITE_NAME,
    properties: Mapping[str, str] | None = None,
) -> str:
    """One <testsuite> (inside <testsuites>, as pytest writes it); one <testcase> per check with
    classname = group and name = id; <failure>, <error> or <skipped> as the outcome says, a failure's
    text fix first (explanation()), then its evidence. Each headline warning is a
    `<property name="warning">` of the suite and a line of the suite's <system-err> (its testcase's
    too); the suite's <system-out> is the summary line."""
    fixes = fixes_of(checks)
    found = counts(results)
    total_time = sum(r.duration_s for r in results)
    attrs = {
        "name": suite_name,
        "tests": str(len(results)),
        "failures": str(found[Outcome.FAILED]),
        "errors": str(found[Outcome.ERROR]),
        "skipped": str(found[Outcome.SKIPPED]),
        "time": f"{total_time:.3f}",
        "timestamp": datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat(),
        "hostname": xml_text(socket.gethostname()),
    }
    root = ET.Element(
        "testsuites", {k: attrs[k] for k in ("name", "tests", "failures", "errors", "skipped", "time")}
    )
    suite = ET.SubElement(root, "testsuite", attrs)
    loud = [(r.id, w) for r in results for w in r.headline_warnings]
    named = [*(properties or {}).items(), *(("warning", f"{check_id}: {w}") for check_id, w in loud)]
    if named:
        props = ET.SubElement(suite, "properties")
        for key, value in named:
            ET.SubElement(props, "property", {"name": xml_text(key), "value": xml_text(value)})
    for r in results:
        case = ET.SubElement(
            suite,
            "testcase",
            {
                "classname": xml_text(r.id.split(".", 1)[0]),
                "name": xml_text(r.id),
                "time": f"{r.duration_s:.3f}",
            },
        )
        if r.outcome is Outcome.FAILED:
            failure = ET.SubElement(
                case, "failure", {"message": xml_text(first_line(r.message)), "type": "ContractViolation"}
            )
            body = explanation(r, fixes.get(r.id, ""))
            evidence = evidence_text(r.evidence)
            failure.text = xml_text(f"{body}\n\n{evidence}" if evidence else body)
        elif r.outcome is Outcome.ERROR:
            error = ET.SubElement(
                case, "error", {"message": xml_text(first_line(r.message)), "type": "CheckerError"}
            )
            error.text = xml_text(f"{explanation(r)}\n\n{evidence_text(r.evidence)}".rstrip())
        elif r.outcome is Outcome.SKIPPED:
            ET.SubElement(case, "skipped", {"message": xml_text(r.message)})
        out = [f"title: {r.title}"]
        if r.outcome is Outcome.PASSED and r.message:
            out.append(r.message)
        out.extend(f"warning: {w}" for w in r.warnings)
        ET.SubElement(case, "system-out").text = xml_text("\n".join(out))
        if r.headline_warnings:
            err = "\n".join(f"warning: {w}" for w in r.headline_warnings)
            ET.SubElement(case, "system-err").text = xml_text(err)
    # After the testcases (the JUnit schema's order): the console's summary line, then the headline
    # warnings on their own, where a CI page that shows the suite's output shows them.
    ET.SubElement(suite, "system-out").text = xml_text(summary(results))
    if loud:
        err = "\n".join(f"warning: {check_id}: {w}" for check_id, w in loud)
        ET.SubElement(suite, "system-err").text = xml_text(err)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(
    results: Sequence[CheckResult],
    path: str | Path,
    checks: Iterable[Check] | Mapping[str, str] | None = None,
    properties: Mapping[str, str] | None = None,
) -> None:
    Path(path).write_text(junit_xml(results, checks, properties=properties), encoding="utf-8")
