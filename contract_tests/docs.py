"""docs/contract.md, generated from the check registry: `python3 -m contract_tests.docs > docs/contract.md`.

One section per check with the anchor its results link to (Check.anchor), its rule, its fix and how
to run it alone. tests/unit/test_report.py fails when the committed file differs from render().
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from contract_tests.registry import Check, all_checks
from emulator.config import ContractLimits

COMMAND = "python3 -m contract_tests.docs > docs/contract.md"

#: Section headings of the check groups (the id's prefix); a group missing here is headed by its name.
GROUPS = {
    "image": "Image configuration",
    "start": "Startup and health checks",
    "accept": "Accepting connections",
    "invocations": "Invocations",
    "model-dir": "The model directory",
    "shutdown": "Shutdown",
}


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _limits() -> list[str]:
    limits = ContractLimits()
    rows = [
        (
            "startup deadline: first 200 from `GET /ping`",
            f"{limits.startup_timeout_s:g} s",
            "--startup-timeout",
        ),
        ("each `GET /ping` answered within", f"{limits.ping_timeout_s:g} s", "--ping-timeout"),
        ("a new connection accepted within", f"{limits.accept_timeout_s * 1000:g} ms", "--accept-timeout"),
        ("`POST /invocations` answered within", f"{limits.invocation_timeout_s:g} s", "--invocation-timeout"),
        ("SIGTERM to SIGKILL", f"{limits.stop_grace_s:g} s", "--stop-grace"),
        ("request and response body cap", f"{limits.max_request_bytes:,} bytes", ""),
        ("container port (unless `SAGEMAKER_BIND_TO_PORT` is set)", str(limits.container_port), ""),
    ]
    out = ["| limit | SageMaker's value | `smlocal check` option |", "|---|---|---|"]
    out += [f"| {what} | {value} | {f'`{opt}`' if opt else ''} |" for what, value, opt in rows]
    return out


def _section(check: Check) -> list[str]:
    return [
        f'<a id="{check.anchor}"></a>',
        "",
        f"### `{check.id}`: {check.title}",
        "",
        f"**Rule.** {check.requirement.strip() or '(not stated yet)'}",
        "",
        f"**Fix.** {check.fix.strip() or '(not stated yet)'}",
        "",
        f"**Run it alone.** `smlocal check IMAGE --check {check.id}` or "
        f"`pytest --sagemaker-image IMAGE -k {check.id}`",
        "",
    ]


def render(checks: Sequence[Check] | None = None) -> str:
    checks = all_checks() if checks is None else checks
    lines = [
        "# The SageMaker hosting contract, check by check",
        "",
        f"<!-- Generated from the check registry (contract_tests/checks/) by `{COMMAND}`.",
        "     Do not edit by hand: tests/unit/test_report.py fails when it and the registry differ. -->",
        "",
        "SageMaker hosting runs an inference image as `docker run IMAGE serve`, with the model data",
        "extracted to a read-only `/opt/ml/model`, sends `GET /ping` until it answers 200, forwards",
        "`POST /invocations` to port 8080, and stops the container with SIGTERM, then SIGKILL after the",
        "grace period. Each rule of that contract is one check below; a check FAILS on an image that",
        "breaks its rule and says what was seen and what to change. An image that passes them all",
        "starts, answers and stops under SageMaker as it does under `smlocal serve`.",
        "",
        "## Running the checks",
        "",
        "```bash",
        "smlocal check IMAGE                                          # every check; exit 1 if one failed",
        "smlocal check IMAGE --check start.healthy --check shutdown   # some checks, or whole groups",
        "smlocal check IMAGE --model-data model.tar.gz --env K=V      # as the model will be deployed",
        "smlocal check IMAGE --json report.json --junit report.xml    # reports for CI",
        "pytest --sagemaker-image IMAGE -k smlocal-contract           # the checks as pytest items",
        "```",
        "",
        "The image must be local (`smlocal check` never pulls). Outcomes: **passed**; **failed** (the",
        "image breaks the rule); **skipped** (the check cannot apply, e.g. the container never became",
        "healthy: see `start.healthy`); **error** (no verdict on the image: a bug in the checker, with",
        "its traceback in the reports, or the check's container removed by someone else while it ran,",
        "which the error names). `smlocal check` exits 0 when no check failed or errored, 1 when one",
        "did, 2 on a usage error (unknown check id, image not found locally) and 3 when no Docker engine",
        "answers.",
        "",
        "With smlocal installed, pytest gains `--sagemaker-image IMAGE` (and `--sagemaker-model-data`,",
        "`--sagemaker-startup-timeout`, `--sagemaker-env K=V`): one item per check, named",
        "`smlocal-contract::<check id>`, all sharing one set of containers.",
        "",
        "The checks use SageMaker's limits; tests and impatient users lower them:",
        "",
        *_limits(),
        "",
        "## The checks",
        "",
    ]
    if not checks:
        lines += ["No checks are registered yet.", ""]
    else:
        lines += ["| check | rule |", "|---|---|"]
        lines += [f"| [`{c.id}`](#{c.anchor}) | {_cell(c.title)} |" for c in checks]
        lines.append("")
    group = None
    for check in checks:
        if check.group != group:
            group = check.group
            lines += [f"## {GROUPS.get(group, group)} (`{group}`)", ""]
        lines += _section(check)
    return "\n".join(lines).rstrip("\n") + "\n"


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
