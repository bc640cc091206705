"""Running checks: each one timed, its outcome recorded; the target cleaned up whatever happens."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence

from contract_tests.registry import Check
from contract_tests.result import CAUSE_CONTAINER_REMOVED, CheckFailed, CheckResult, CheckSkipped, Outcome
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
    if outcome in (Outcome.FAILED, Outcome.ERROR):
        gone = _removed(target)
        if gone:  # what the check saw was someone else's doing: no verdict on the image
            context.evidence.update(cause=CAUSE_CONTAINER_REMOVED, verdict_withdrawn=message)
            outcome, message = Outcome.ERROR, removed_message(gone)
    return CheckResult(
        id=check.id,
        title=check.title,
        outcome=outcome,
        duration_s=time.monotonic() - started,
        message=message,
        evidence=context.evidence,
        doc_url="" if context.evidence.get("cause") == CAUSE_CONTAINER_REMOVED else check.doc_url,
        warnings=tuple(context.warnings),
        headline_warnings=tuple(context.headline_warnings),
    )


def _removed(target: Target) -> list[str]:
    try:
        return target.removed_containers()
    except Exception:  # noqa: BLE001 - the engine itself failing is not this diagnosis
        return []


def removed_message(names: Sequence[str]) -> str:
    return (
        f"Container {', '.join(names)} was removed by someone else while the check ran (docker rm, "
        "`smlocal down --all`, another run's cleanup): no verdict on the image; run the checks again."
    )


def skipped_after(check: Check, cause: CheckResult) -> CheckResult:
    """A check not run because an earlier one found the run disturbed from outside."""
    return CheckResult(
        id=check.id,
        title=check.title,
        outcome=Outcome.SKIPPED,
        duration_s=0.0,
        message=f"not run: a container of this run was removed by someone else (see {cause.id})",
        doc_url=check.doc_url,
    )


def run_checks(
    checks: Sequence[Check], target: Target, on_result: Callable[[CheckResult], None] | None = None
) -> list[CheckResult]:
    results: list[CheckResult] = []
    disturbed: CheckResult | None = None
    try:
        for check in checks:
            if disturbed is None:
                result = run_check(check, target)
                if result.evidence.get("cause") == CAUSE_CONTAINER_REMOVED:
                    disturbed = result  # one ERROR names the cause; the rest would only repeat it
            else:
                result = skipped_after(check, disturbed)
            results.append(result)
            if on_result is not None:
                on_result(result)
    finally:
        target.close()
    return results
