"""The ordered registry of contract checks: `@check(id, title, requirement)` on a function.

A check function takes the CheckContext and returns a short message on success; it raises
CheckFailed (with evidence) when the image breaks the rule. Ids are stable (`group.rule`) and each has
an anchor in docs/contract.md.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from contract_tests.target import CheckContext

CheckFunction = Callable[["CheckContext"], str | None]

DOCS = "docs/contract.md"

_REGISTRY: dict[str, Check] = {}


@dataclass(frozen=True)
class Check:
    id: str
    title: str
    requirement: str
    func: CheckFunction
    #: How to fix an image that breaks the rule (docs/contract.md; failure messages say it too).
    fix: str = ""
    #: A trap real images fall into, as docs/contract.md shows it: what breaks the rule ...
    before: str = ""
    #: ... and the same thing fixed (both short snippets: a Dockerfile line, a few lines of code).
    after: str = ""

    @property
    def group(self) -> str:
        return self.id.split(".", 1)[0]

    @property
    def anchor(self) -> str:
        return self.id.replace(".", "-")

    @property
    def doc_url(self) -> str:
        return f"{DOCS}#{self.anchor}"


def check(
    id: str, title: str, requirement: str, fix: str = "", before: str = "", after: str = ""
) -> Callable[[CheckFunction], CheckFunction]:
    """Register a check. `requirement` states the rule (with its source); `fix` says how to comply;
    `before`/`after` are an example of the trap and its fix for docs/contract.md."""

    def register(func: CheckFunction) -> CheckFunction:
        if id in _REGISTRY:
            raise ValueError(f"check id {id} registered twice")
        _REGISTRY[id] = Check(id, title, requirement, func, fix, before, after)
        return func

    return register


#: Check modules in the order their checks run: cheap inspection first, destructive last.
CHECK_MODULES = (
    "contract_tests.checks.model_data",
    "contract_tests.checks.image",
    "contract_tests.checks.image_platform",
    "contract_tests.checks.startup",
    "contract_tests.checks.bind_port",
    "contract_tests.checks.accept",
    "contract_tests.checks.invocations",
    "contract_tests.checks.envelope",
    "contract_tests.checks.media",
    "contract_tests.checks.keepalive",
    "contract_tests.checks.model_dir",
    "contract_tests.checks.mme",
    "contract_tests.checks.mme_serving",
    "contract_tests.checks.streaming",
    "contract_tests.checks.serverless",
    "contract_tests.checks.shutdown",
)


def all_checks() -> list[Check]:
    for module in CHECK_MODULES:
        importlib.import_module(module)
    order = {name.rsplit(".", 1)[-1]: i for i, name in enumerate(CHECK_MODULES)}
    return sorted(_REGISTRY.values(), key=lambda c: order.get(_module_of(c), len(order)))


def _module_of(c: Check) -> str:
    return c.func.__module__.rsplit(".", 1)[-1]


def select(ids: list[str] | None) -> list[Check]:
    """The checks named (exact ids or group prefixes such as `shutdown`), in registry order."""
    checks = all_checks()
    if not ids:
        return checks
    unknown = [i for i in ids if not any(c.id == i or c.group == i for c in checks)]
    if unknown:
        known = ", ".join(c.id for c in checks)
        raise KeyError(f"unknown check id(s) {', '.join(unknown)}; known: {known}")
    return [c for c in checks if c.id in ids or c.group in ids]
