"""Reports of a contract run: the console table, JSON (`--json`) and JUnit XML (`--junit`).

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

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

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

OUTCOME_STYLE = {
    Outcome.PASSED: "green",
    Outcome.FAILED: "bold red",
    Outcome.ERROR: "bold magenta",
    Outcome.SKIPPED: "yellow",
}

OUTCOME_MARK = {Outcome.PASSED: "✓", Outcome.FAILED: "✗", Outcome.ERROR: "!", Outcome.SKIPPED: "-"}

ERROR_NOTE = (
    "An ERROR is a bug in the checker, not a verdict on the image; "
    "the traceback is in the evidence (--json / --junit)."
)

# XML 1.0 allows tab, newline, carriage return and printable characters; container logs bring ANSI
# escapes and other control characters, which no parser accepts even when escaped.
_XML_INVALID = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


# A failure message that already says what to change (checks often end theirs with `Fix: ...`).
_FIX_LINE = re.compile(r"^\s*Fix:", re.MULTILINE)


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


def result_json(result: CheckResult) -> dict[str, Any]:
    """CheckResult.to_json with every evidence value made JSON-serialisable."""
    data: dict[str, Any] = json_safe(result.to_json())
    return data


def results_json(results: Iterable[CheckResult]) -> list[dict[str, Any]]:
    return [result_json(r) for r in results]


def write_json(results: Iterable[CheckResult], path: str | Path) -> None:
    Path(path).write_text(json.dumps(results_json(results), indent=2) + "\n", encoding="utf-8")


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


def explanation(result: CheckResult, fix: str = "") -> str:
    """What a reader needs for a failure or error: the message, the fix unless the message says it,
    where the rule is documented."""
    parts = [result.message]
    if result.outcome is Outcome.ERROR:
        if result.evidence.get("cause") != CAUSE_CONTAINER_REMOVED:  # that one is no checker bug
            parts.append(ERROR_NOTE)
    elif fix and fix not in result.message and not _FIX_LINE.search(result.message):
        parts.append(f"Fix: {fix}")
    if result.doc_url:
        parts.append(f"See {result.doc_url}")
    return "\n".join(parts)


def _fixes(checks: Iterable[Check] | Mapping[str, str] | None) -> Mapping[str, str]:
    if checks is None:
        return {}
    if isinstance(checks, Mapping):
        return checks
    return {c.id: c.fix for c in checks}


# --- console ----------------------------------------------------------------------------------------


def progress_line(result: CheckResult) -> Text:
    """One line for a finished check, printed while the run goes on: `✓ start.healthy  passed  0.84 s`."""
    style = OUTCOME_STYLE[result.outcome]
    line = Text()
    line.append(f"{OUTCOME_MARK[result.outcome]} ", style=style)
    line.append(f"{result.id:<28} ")
    line.append(f"{result.outcome.value:<8}", style=style)
    line.append(f"{result.duration_s:6.2f} s", style="dim")
    if result.outcome is not Outcome.PASSED:
        line.append(f"  {first_line(result.message)}", style="dim")
    for warning in result.warnings:
        line.append(f"\n  warning: {warning}", style="yellow")
    return line


def details(result: CheckResult, fix: str = "") -> Text:
    """The table's last column: the explanation of a failure or error, the reason of a skip, the short
    message of a pass; warnings after it, whatever the outcome."""
    text = Text()
    if result.outcome in (Outcome.FAILED, Outcome.ERROR):
        message, _, rest = explanation(result, fix).partition("\n")
        text.append(message)
        for line in rest.splitlines():
            style = "cyan" if line.startswith("See ") else "italic" if line.startswith("Fix: ") else "dim"
            text.append("\n" + line, style=style)
    elif result.message and result.message != "ok":
        text.append(result.message, style="dim" if result.outcome is Outcome.PASSED else "")
    for warning in result.warnings:
        text.append(("\n" if text else "") + f"warning: {warning}", style="yellow")
    return text


def results_table(
    results: Sequence[CheckResult], checks: Iterable[Check] | Mapping[str, str] | None = None
) -> Table:
    fixes = _fixes(checks)
    table = Table(title="SageMaker hosting contract", title_justify="left")
    table.add_column("check", no_wrap=True)
    table.add_column("outcome", no_wrap=True)
    table.add_column("time", justify="right", no_wrap=True)
    table.add_column("details", overflow="fold", ratio=1)
    for r in results:
        table.add_row(
            escape(r.id),
            Text(r.outcome.value.upper(), style=OUTCOME_STYLE[r.outcome]),
            f"{r.duration_s:.2f} s",
            details(r, fixes.get(r.id, "")),
        )
    return table


def print_report(
    results: Sequence[CheckResult],
    console: Console,
    checks: Iterable[Check] | Mapping[str, str] | None = None,
) -> None:
    console.print(results_table(results, checks))
    style = (
        "bold red"
        if exit_code(results) != EXIT_OK
        else "bold yellow"
        if headline_warnings(results)
        else "green"
    )
    console.print(Text(summary(results), style=style))


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
    classname = group and name = id; <failure>, <error> or <skipped> as the outcome says."""
    fixes = _fixes(checks)
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
    if properties:
        props = ET.SubElement(suite, "properties")
        for key, value in properties.items():
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
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(
    results: Sequence[CheckResult],
    path: str | Path,
    checks: Iterable[Check] | Mapping[str, str] | None = None,
    properties: Mapping[str, str] | None = None,
) -> None:
    Path(path).write_text(junit_xml(results, checks, properties=properties), encoding="utf-8")
