"""model-dir checks: the container works with /opt/ml/model mounted read-only (hosting contract §3.2)."""

from __future__ import annotations

from contract_tests.registry import check
from contract_tests.result import CheckFailed, CheckSkipped
from contract_tests.target import CheckContext

MODEL_DIR = "/opt/ml/model"
#: strerror(EROFS), as every libc and language runtime prints it.
EROFS_TEXT = "read-only file system"

READ_ONLY_FIX = (
    f"Do not write to {MODEL_DIR}: SageMaker mounts it read-only. Write caches, compiled models and "
    "unpacked files to a writable directory such as /tmp (or copy the model there first)."
)


def erofs_lines(logs: str, path: str | None = None) -> list[str]:
    """The log lines that report EROFS ("Read-only file system"), optionally only those naming `path`."""
    return [
        line.strip()
        for line in logs.splitlines()
        if EROFS_TEXT in line.lower() and (path is None or path in line)
    ]


@check(
    "model-dir.read-only",
    "works with /opt/ml/model mounted read-only",
    f"The model artifacts are mounted at {MODEL_DIR} read-only; the container must not write there "
    "(hosting contract §3.2: 'Do not write to this directory').",
    READ_ONLY_FIX,
)
def read_only(ctx: CheckContext) -> str:
    startup = ctx.target.startup()  # the shared container: /opt/ml/model is always mounted read-only
    if not startup.healthy:
        lines = erofs_lines(startup.all_logs or startup.logs)
        if not lines:
            raise CheckSkipped(
                f"the container did not become healthy for another reason ({startup.last_observation}); "
                "see the start.* checks"
            )
        seen = (
            f"the container exited with code {startup.exit_code} during startup"
            if startup.exited
            else f"the container did not become healthy within {startup.elapsed_s:.1f} s"
        )
        raise CheckFailed(
            f"{seen}, and its logs report a write to the read-only {MODEL_DIR}: `{lines[-1]}`. "
            f"Last log lines:\n{startup.logs}\nFix: {READ_ONLY_FIX}",
            erofs_lines=lines,
            exit_code=startup.exit_code,
            log_tail=startup.logs,
        )
    container = ctx.target.healthy()
    lines = erofs_lines(container.logs(), MODEL_DIR)
    if lines:
        raise CheckFailed(
            f"the container became healthy, but its logs report a failed write to the read-only "
            f"{MODEL_DIR}: `{lines[-1]}` ({len(lines)} such line(s)); whatever it meant to write there "
            f"is missing. Fix: {READ_ONLY_FIX}",
            erofs_lines=lines,
        )
    return (
        f"healthy after {startup.first_healthy_s or startup.elapsed_s:.2f} s with {MODEL_DIR} mounted "
        "read-only; no write failure there in its logs"
    )
