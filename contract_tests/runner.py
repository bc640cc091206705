"""Running checks: each one timed, its outcome recorded; the target cleaned up whatever happens."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence

from contract_tests.registry import Check
from contract_tests.result import CheckFailed, CheckResult, CheckSkipped, Outcome
from contract_tests.target import CheckContext, Target


def run_check(check: Check, target: Target) -> CheckResult:
    context = CheckContext(target)
    started = time.monotonic()
    try:
        message = check.func(context) or "ok"
        outcome = Outcome.PASSED
    except CheckFailed as failed:
        outcome, message = Outcome.FAILED, failed.message
        context.evidence.update(failed.evidence)
    except CheckSkipped as skipped:
        outcome, message = Outcome.SKIPPED, skipped.message
    except Exception as exc:  # noqa: BLE001 - an unexpected exception is a bug in the checker: ERROR
        outcome, message = Outcome.ERROR, f"{type(exc).__name__}: {exc}"
        context.evidence["traceback"] = traceback.format_exc()
    return CheckResult(
        id=check.id,
        title=check.title,
        outcome=outcome,
        duration_s=time.monotonic() - started,
        message=message,
        evidence=context.evidence,
        doc_url=check.doc_url,
        warnings=tuple(context.warnings),
    )


def run_checks(
    checks: Sequence[Check], target: Target, on_result: Callable[[CheckResult], None] | None = None
) -> list[CheckResult]:
    results = []
    try:
        for check in checks:
            result = run_check(check, target)
            results.append(result)
            if on_result is not None:
                on_result(result)
    finally:
        target.close()
    return results
