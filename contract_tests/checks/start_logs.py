"""Reading a container's log for the start.* checks: the cause a failed start's log names (a Python
error, else its last error-looking lines), the log tail as a message shows it, and start.no-exit's
verdict on a container that exited, which leads with that cause.
"""

from __future__ import annotations

import re

from contract_tests.checks.start_run import dur, plural
from contract_tests.result import CheckFailed
from contract_tests.running import Startup
from contract_tests.target import CheckContext

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


#: What an error looks like in a log line, whatever wrote it: a shell, a script's own message, a runtime.
_ERROR_WORDS = re.compile(
    r"(?-i:[A-Z]\w*(?:Error|Exception))\b|\busage:|\b(?:errors?|exception|fatal|fail(?:s|ed|ure)?|panic|"
    r"abort(?:ed|ing)?|denied|refused|invalid|missing|unknown|unable|cannot|can't|could(?: not|n't)|"
    r"not found|no such|no \S+(?: \S+)? found)\b",
    re.IGNORECASE,
)
#: At most this many error-looking lines in a row lead a message.
CAUSE_LINES = 3
#: Only the last lines of the log are searched: a program gives up right after saying why, and an early
#: error-looking line (`no GPU found, using CPU`) is no reason for an exit.
CAUSE_WINDOW = 10
#: A line marked with a level below warning is no error, whatever its words.
_QUIET_LEVEL = re.compile(r"\b(?:INFO|DEBUG|TRACE)\b")


def _looks_like_error(line: str) -> bool:
    return bool(_ERROR_WORDS.search(line)) and not _QUIET_LEVEL.search(line)


def error_lines(logs: str) -> list[str]:
    """The last error-looking line among the log's last CAUSE_WINDOW lines, with the error-looking lines
    right before it (up to CAUSE_LINES): what a program says last before it gives up. [] when none of
    those lines looks like an error."""
    lines = [line.strip() for line in logs.splitlines() if line.strip()][-CAUSE_WINDOW:]
    last = next((i for i in range(len(lines) - 1, -1, -1) if _looks_like_error(lines[i])), None)
    if last is None:
        return []
    first = last
    while first > 0 and last - first + 1 < CAUSE_LINES and _looks_like_error(lines[first - 1]):
        first -= 1
    return lines[first : last + 1]


ENTRYPOINT_FIX = (
    "The ENTRYPOINT must accept the argument `serve` and keep the HTTP server running in the foreground."
)


def exited_verdict(ctx: CheckContext, startup: Startup) -> CheckFailed:
    """start.no-exit's verdict on a container that exited before its first 200. It leads with the cause
    the container's own log names (the first exception of a Python traceback, else its last error-looking
    line(s)), then the hint that follows from it; the ENTRYPOINT is blamed alone only when the log names
    nothing (a script that finds no model folder and exits 0 has the right ENTRYPOINT)."""
    code = startup.exit_code
    logs = startup.all_logs or startup.logs
    hint = ""
    if code in (126, 127):
        hint = f" Exit code {code} is the shell's 'command not executable/not found'."
    elif code == 0:
        hint = " Exit code 0: the program ended by its own decision, not by a crash or a signal."
    seen = (
        f"`docker run {ctx.config.image} serve` exited with code {code} after {dur(startup.elapsed_s)}, "
        f"before GET /ping ever answered 200 ({plural(startup.attempts, 'attempt')}).{hint}"
    )
    error = python_error(logs)
    cause = [error] if error is not None else error_lines(logs)
    if error is not None:
        ctx.evidence["python_error"] = error
        fix = (
            f"The log shows a Python error at start: `{error}`. Fix that first (a package missing from "
            "the image, an import or a file that fails at start): the ENTRYPOINT itself may be right. "
            + ENTRYPOINT_FIX
        )
    elif cause:
        fix = f"The container's log says `{' / '.join(cause)}`: {_cause_hint(ctx, ' '.join(cause))}"
    else:
        return CheckFailed(
            f"{seen} {log_block(startup.logs)}\n{ENTRYPOINT_FIX}", exit_code=code, logs=startup.logs
        )
    ctx.evidence["cause"] = cause
    return CheckFailed(
        f"The container's log says: {' / '.join(cause)}\n{seen} Fix: {fix}\n{log_block(startup.logs)}",
        exit_code=code,
        logs=startup.logs,
    )


def _cause_hint(ctx: CheckContext, cause: str) -> str:
    """What the container's own error line points at: the model data, the `serve` argument, or neither."""
    if "/opt/ml/model" in cause or re.search(r"\bmodel\b", cause, re.IGNORECASE):
        given = (
            "No --model-data was given, so /opt/ml/model was empty: give the model data the image serves "
            "with --model-data. "
            if not ctx.config.model_data
            else ""
        )
        return (
            f"that is about the model data, not the ENTRYPOINT. {given}SageMaker extracts model.tar.gz into "
            "/opt/ml/model as it was packed: put the folders and files the server looks for at those paths "
            "in the archive (compare `tar tzf model.tar.gz` with what the server expects), or make the "
            "server find them where they are."
        )
    if re.search(r"\bserve\b", cause):
        return f"the program does not take SageMaker's `serve` argument. {ENTRYPOINT_FIX}"
    return f"fix that first; the ENTRYPOINT itself may be right. {ENTRYPOINT_FIX}"
