"""Outcomes of a contract check, modelled on pytest's: passed, failed, skipped, error.

A check *fails* by raising CheckFailed with what it saw and what to change; it is *skipped* when it
cannot apply (CheckSkipped); any other exception is an ERROR, reserved for bugs in the checker.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class Outcome(enum.StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    ERROR = "error"


class CheckFailed(Exception):
    """The image breaks the rule. `message` says what was seen and what to change."""

    def __init__(self, message: str, **evidence: Any) -> None:
        super().__init__(message)
        self.message = message
        self.evidence = evidence


#: evidence["cause"] of an ERROR that is no verdict and no checker bug: the run was disturbed from outside.
CAUSE_CONTAINER_REMOVED = "container-removed"


class CheckSkipped(Exception):
    """The check does not apply, or cannot run because an earlier step failed."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class CheckResult:
    id: str
    title: str
    outcome: Outcome
    duration_s: float
    message: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    doc_url: str = ""
    warnings: tuple[str, ...] = ()
    #: Warnings the summary line repeats (a subset of `warnings`).
    headline_warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.outcome in (Outcome.PASSED, Outcome.SKIPPED)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "outcome": self.outcome.value,
            "duration_s": round(self.duration_s, 3),
            "message": self.message,
            "evidence": dict(self.evidence),
            "doc_url": self.doc_url,
            "warnings": list(self.warnings),
            "headline_warnings": list(self.headline_warnings),
        }
