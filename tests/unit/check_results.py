"""CheckResults made by hand for the report tests: each outcome with a typical message."""

from __future__ import annotations

from typing import Any

from contract_tests.result import CheckResult, Outcome

MESSAGES = {
    Outcome.PASSED: "first 200 after 0.4 s",
    Outcome.FAILED: "no 200 from /ping within 6 s: last answer HTTP 503",
    Outcome.SKIPPED: "the container never became healthy",
    Outcome.ERROR: "RuntimeError: checker bug",
}


def result(
    outcome: Outcome,
    id: str = "start.healthy",  # noqa: A002 - the CheckResult field's name
    title: str = "GET /ping answers 200 within the startup timeout",
    **kw: Any,
) -> CheckResult:
    """A result of check `id` with `outcome`, its typical message and a docs link; `kw` overrides."""
    defaults: dict[str, Any] = {
        "title": title,
        "duration_s": 0.1234,
        "message": MESSAGES[outcome],
        "doc_url": f"docs/contract.md#{id.replace('.', '-')}",
    }
    defaults.update(kw)
    return CheckResult(id=id, outcome=outcome, **defaults)
