"""Reading a container's log for the start.* checks: the cause a failed start's log names, and the log
tail as a message shows it.
"""

from __future__ import annotations

import re

_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b.*$")


def python_error(logs: str) -> str | None:
    """The first exception a Python traceback in the log ended with (`ModuleNotFoundError: No module
    named 'x'`), None without one. A server manager's own halt that follows (gunicorn's HaltServer,
    'Worker failed to boot') is passed over: the cause is the worker's error before it."""
    in_traceback = False
    for line in logs.splitlines():
        if line.startswith("Traceback (most recent call last):"):
            in_traceback = True
        elif in_traceback and not line.startswith((" ", "\t")) and line.strip():
            in_traceback = False
            if _EXCEPTION_LINE.match(line) and "HaltServer" not in line:
                return line.strip()
    return None


def log_block(text: str) -> str:
    """The log tail, indented, with runs of one repeated line (a ping log, say) shown once."""
    lines = text.rstrip().splitlines()
    if not lines:
        return "The container wrote no log lines."
    shown: list[str] = []
    run = 1
    for i, line in enumerate(lines):
        if i + 1 < len(lines) and lines[i + 1] == line:
            run += 1
            continue
        shown.append(f"    {line}" + (f"  [{run} times]" if run > 1 else ""))
        run = 1
    return "Last log lines:\n" + "\n".join(shown)
