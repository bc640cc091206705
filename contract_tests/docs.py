"""docs/contract.md, generated from the check registry: `python3 -m contract_tests.docs > docs/contract.md`.

One section per check with the anchor its results link to (Check.anchor), its rule, its fix, the trap
it catches as a before/after example (Check.before/after; optional) and how to run it alone; an index
of those traps near the top, and how to read the report. tests/unit/test_report.py fails when the
committed file differs from render().
"""

from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Sequence

from contract_tests import report
from contract_tests.check_config import SERVERLESS_MAX_PAYLOAD_BYTES, SERVERLESS_STARTUP_TIMEOUT_S
from contract_tests.checks.stream_calls import STREAM_TOTAL_FACTOR
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
    "model-data": "Model data",
    "mme": "Multi-model endpoints",
    "streaming": "Response streaming",
    "serverless": "Serverless inference",
    "shutdown": "Shutdown",
}


#: Options a group's checks need to run at all: (smlocal check's, the pytest plugin's).
_RUN_WITH = {
    "streaming": (" --streaming --stream-body JSON", " --sagemaker-streaming --sagemaker-stream-body JSON"),
    "serverless": (" --profile serverless", " --sagemaker-profile serverless"),
    "image.architecture": (" --instance-type TYPE", " --sagemaker-instance-type TYPE"),
    "image.registry": (" --deploy-as URI", " --sagemaker-deploy-as URI"),
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
        (
            "a streamed answer (`streaming.*`): no body byte for at most / the whole answer within [U]",
            f"{limits.invocation_timeout_s:g} s / {limits.invocation_timeout_s * STREAM_TOTAL_FACTOR:g} s",
            "--invocation-timeout",
        ),
        ("SIGTERM to SIGKILL", f"{limits.stop_grace_s:g} s", "--stop-grace"),
        ("request and response body cap", f"{limits.max_request_bytes:,} bytes", ""),
        (
            "serverless (`serverless.*`): body cap / first 200 from `GET /ping`",
            f"{SERVERLESS_MAX_PAYLOAD_BYTES:,} bytes / {SERVERLESS_STARTUP_TIMEOUT_S:g} s",
            "",
        ),
        ("container port (unless `SAGEMAKER_BIND_TO_PORT` is set)", str(limits.container_port), ""),
    ]
    out = ["| limit | SageMaker's value | `smlocal check` option |", "|---|---|---|"]
    out += [f"| {what} | {value} | {f'`{opt}`' if opt else ''} |" for what, value, opt in rows]
    return out


#: Dockerfile instructions: a snippet that starts with one is shown as a Dockerfile.
_DOCKERFILE = {
    "FROM", "RUN", "CMD", "ENTRYPOINT", "COPY", "ADD", "ENV", "ARG", "USER", "WORKDIR", "EXPOSE",
    "LABEL", "STOPSIGNAL", "HEALTHCHECK", "SHELL", "VOLUME", "ONBUILD",
}  # fmt: skip
_PYTHON = re.compile(r"^\s*(?:def|class|import|from|async def|@|if __name__)\b", re.MULTILINE)


def language(snippet: str) -> str:
    """The code block's language for a before/after snippet: dockerfile, sh, python, or none."""
    text = snippet.strip()
    if text.startswith("#!"):
        return "python" if "python" in text.splitlines()[0] else "sh"
    first = next(
        (ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")), ""
    )
    if first.split(" ", 1)[0] in _DOCKERFILE:
        return "dockerfile"
    if _PYTHON.search(text):
        return "python"
    return ""


def code_block(snippet: str) -> list[str]:
    """`snippet` fenced (with more backticks than it holds in a row), its language guessed."""
    text = textwrap.dedent(snippet).strip("\n")
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall("`+", text)), default=0))
    return [f"{fence}{language(text)}", *text.splitlines(), fence]


def _example(check: Check) -> list[str]:
    lines: list[str] = []
    if check.before.strip():
        lines += ["**Before (breaks the rule):**", "", *code_block(check.before), ""]
    if check.after.strip():
        lines += ["**After:**", "", *code_block(check.after), ""]
    return lines


def has_example(check: Check) -> bool:
    return bool(check.before.strip() or check.after.strip())


def _section(check: Check) -> list[str]:
    cli, plugin = _RUN_WITH.get(check.id) or _RUN_WITH.get(check.group, ("", ""))
    return [
        f'<a id="{check.anchor}"></a>',
        "",
        f"### `{check.id}`: {check.title}",
        "",
        f"**Rule.** {check.requirement.strip() or '(not stated yet)'}",
        "",
        f"**Fix.** {check.fix.strip() or '(not stated yet)'}",
        "",
        *_example(check),
        f"**Run it alone.** `smlocal check IMAGE{cli} --check {check.id}` or "
        f"`pytest --sagemaker-image IMAGE{plugin} -k {check.id}`",
        "",
    ]


def _traps(checks: Sequence[Check]) -> list[str]:
    """The index of the checks whose sections show a trap, before and after."""
    shown = [c for c in checks if has_example(c)]
    if not shown:
        return []
    return [
        "## Traps real images fall into",
        "",
        "Mistakes bring-your-own-container images make, each with the check that catches it; its",
        "section shows the mistake (before) and the same thing fixed (after).",
        "",
        *(f"- [`{c.id}`](#{c.anchor}): {c.title}" for c in shown),
        "",
    ]


def _reading() -> list[str]:
    return [
        "## Reading the report",
        "",
        "`smlocal check` prints one line per group of checks as the group finishes (`✓ invocations",
        "12 passed  1.51 s`; the skipped ones named), and under it a line for each check that failed,",
        "errored or warned (its first line and every warning: what a CI log keeps). Then a table of",
        "those checks only, each expanded: a warning is a yellow `warning: ...` line; a failed check",
        "shows its **fix first** (`Fix: ...`), then what was seen (with the container's last log lines",
        "where they matter), then the link to its section here. Each reason for a skip is printed once,",
        "under the checks it covers (`mme.* (8 checks): the image has no label ...`). A passed check",
        "without a warning is only counted: its message is in `--json` and `--junit`, which list every",
        "check with its own status and message, so that a passing run fits one screen (31 lines for",
        "the good echo image at 120 columns). The last line sums up the run",
        "(`18 passed, 1 failed in 14.2 s`) and repeats each **headline warning**: what must not be",
        "missed though no check failed, such as a model whose serving was never verified.",
        "",
        "Outcomes: **passed**; **failed** (the image breaks the rule: SageMaker would refuse it or",
        "serving would break); **skipped** (the check cannot apply, e.g. the container never became",
        "healthy: see `start.healthy`); **error** (no verdict on the image: a bug in the checker, with",
        "its traceback in the reports, or the check's container removed by someone else while it ran,",
        "which the error names). A **warning** is attached to a result of any outcome: something",
        "SageMaker itself would not refuse but that costs you (a slow path, a limit of one deployment",
        "type). `smlocal check` exits 0 when no check failed or errored (warnings and skips included:",
        "read the summary line), 1 when one did, 2 on a usage error (unknown check id, image not found",
        "locally) and 3 when no Docker engine answers.",
        "",
        f'`--json FILE` writes an object (`"version": {report.JSON_VERSION}`): `exit_code`, `summary` (the',
        "console's last line), `counts`, `headline_warnings` (strings), `warnings` (`id`, `warning`,",
        "`headline`), `properties` (`image`, `image_id`) and `results`, one per check in run order",
        "(`id`, `title`, `outcome`, `duration_s`, `message`, `fix` for a failed one, `evidence`,",
        "`doc_url`, `warnings`, `headline_warnings`). Version 1 (before issue 10) was the bare list that",
        "is now `results`: `jq '.results'` reads a new report as an old one. `--junit FILE` writes one",
        '`<testsuite name="smlocal-contract">`, one `<testcase>` per check (classname the group),',
        "failures' text fix first then the evidence; each headline warning is a",
        '`<property name="warning">` of the suite and a line of its `<system-err>`; the suite\'s',
        "`<system-out>` is the summary line.",
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
        "grace period. smlocal starts each checked container that way, with the environment and hostname",
        "a SageMaker endpoint's container gets (`SAGEMAKER_SAFE_PORT_RANGE`, `model.aws.local`: see",
        "[api-coverage.md](api-coverage.md)). Each rule of that contract is one check below; a check",
        "FAILS on an image that breaks its rule and says what was seen and what to change. An image that",
        "passes them all starts, answers and stops under SageMaker as it does under `smlocal serve`.",
        "",
        *_traps(checks),
        "## Running the checks",
        "",
        "```bash",
        "smlocal check IMAGE                                          # every check; exit 1 if one failed",
        "smlocal check IMAGE --check start.healthy --check shutdown   # some checks, or whole groups",
        "smlocal check IMAGE --model-data model.tar.gz --env K=V      # as the model will be deployed",
        "smlocal check IMAGE --model-data m.tar.gz --multi-model-data s3://b/models/  # multi-models label",
        "smlocal check IMAGE --json report.json --junit report.xml    # reports for CI",
        "smlocal check IMAGE --streaming --stream-body '{...}'        # the image streams (streaming.*)",
        "smlocal check IMAGE --profile serverless                     # for serverless (serverless.*)",
        "smlocal check IMAGE --instance-type ml.m5.large --deploy-as URI  # the preflight: a verdict line",
        "pytest --sagemaker-image IMAGE -k smlocal-contract           # the checks as pytest items",
        "```",
        "",
        "With `--instance-type TYPE` every container gets the type's memory limit, CPU share and GPUs",
        "(an engine without the NVIDIA runtime starts it on CPU) and `image.architecture` judges the image",
        "against the type; `--deploy-as URI` (with `--region`, `--repository-access-mode`) makes",
        "`image.registry` judge the reference CreateModel will get. Either ends the report with one line:",
        "`SageMaker would accept this image (as URI), its model data and TYPE: yes`, or `no:` and the",
        "checks that fail ([cloud-parity.md](cloud-parity.md#smlocal-check---instance-type-the-preflight)).",
        "",
        "The image must be local (`smlocal check` never pulls). How to read what it prints, its",
        "outcomes, warnings and exit codes: [Reading the report](#reading-the-report).",
        "",
        "**Inference components.** An inference component's copy is started and judged exactly as an",
        "endpoint's instance (its memory limit is the component's reservation instead of the instance",
        "type's): the checks below are the ones that matter, and none is specific to components. A base",
        "image for adapter components must also answer SageMaker's adapter API (`POST /adapters`,",
        "`DELETE /adapters/{name}`, `X-Amzn-SageMaker-Adapter-Identifier`:",
        "[inference-components.md](inference-components.md#adapters)); no check covers it yet.",
        "",
        "With smlocal installed, pytest gains `--sagemaker-image IMAGE` (and `--sagemaker-model-data`,",
        "`--sagemaker-multi-model-data`,",
        "`--sagemaker-startup-timeout`, `--sagemaker-env K=V`, `--sagemaker-streaming`,",
        "`--sagemaker-stream-body JSON`, `--sagemaker-profile serverless`, `--sagemaker-instance-type`,",
        "`--sagemaker-deploy-as`, `--sagemaker-region`, `--sagemaker-repository-access-mode`): one item",
        "per check, named",
        "`smlocal-contract::<check id>`, all sharing one set of containers. The suite is no file: pytest",
        "prints its items by that name whichever folder it runs in (a sub-folder of the rootdir",
        "included), and locates their skips at `smlocal-contract:1`.",
        "",
        "The checks use SageMaker's limits; tests and impatient users lower them:",
        "",
        *_limits(),
        "",
        *_reading(),
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
