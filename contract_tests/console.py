"""The console report of `smlocal check`: one line per group while the run goes on, then what needs
reading, then the summary line.

A passing run fits one screen: a check that passed without a warning is counted in its group's line
and nowhere else (its message is in --json and --junit), and a skip reason shared by several checks
(the image has no multi-models label: eight mme.* checks) is printed once, under the ids it covers.
What a failing run needs stays whole: each FAILED or ERROR check, and each check with a warning, gets
a row of the table with its full message, fix first (report.explain). Works on CheckResults alone (and
the Checks for their `fix` text), so it is tested with hand-made results and no Docker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from contract_tests.registry import Check
from contract_tests.report import (
    EXIT_OK,
    exit_code,
    explain,
    first_line,
    fixes_of,
    headline_warnings,
    summary,
)
from contract_tests.result import CheckResult, Outcome

if TYPE_CHECKING:
    from contract_tests.target import Target

OUTCOME_STYLE = {
    Outcome.PASSED: "green",
    Outcome.FAILED: "bold red",
    Outcome.ERROR: "bold magenta",
    Outcome.SKIPPED: "yellow",
}

OUTCOME_MARK = {Outcome.PASSED: "✓", Outcome.FAILED: "✗", Outcome.ERROR: "!", Outcome.SKIPPED: "-"}

#: The order in which a group's line counts its outcomes, and the worst first: the group's mark.
_ORDER = (Outcome.PASSED, Outcome.FAILED, Outcome.ERROR, Outcome.SKIPPED)
_WORST = (Outcome.ERROR, Outcome.FAILED, Outcome.PASSED, Outcome.SKIPPED)


def group_of(check_id: str) -> str:
    """`invocations` for `invocations.serves` (Check.group, from the id alone)."""
    return check_id.split(".", 1)[0]


def needs_reading(result: CheckResult) -> bool:
    """Whether a result gets a row of the table: it failed, errored, or carries a warning."""
    return result.outcome in (Outcome.FAILED, Outcome.ERROR) or bool(result.warnings)


# --- while the run goes on --------------------------------------------------------------------------


def progress_line(result: CheckResult) -> Text:
    """One line for a check that needs reading, under its group's line: `  ✗ start.healthy  failed
    6.01 s  no 200 from /ping ...`, then a line per warning. A skip gives no reason here: each reason
    is printed once, after the run (skip_notes)."""
    style = OUTCOME_STYLE[result.outcome]
    line = Text("  ")
    line.append(f"{OUTCOME_MARK[result.outcome]} ", style=style)
    line.append(f"{result.id:<30} ")
    line.append(f"{result.outcome.value:<8}", style=style)
    line.append(f"{result.duration_s:6.2f} s", style="dim")
    if result.outcome in (Outcome.FAILED, Outcome.ERROR):
        line.append(f"  {first_line(result.message)}", style="dim")
    for warning in result.warnings:
        line.append(f"\n    warning: {warning}", style="yellow")
    return line


def group_line(results: Sequence[CheckResult]) -> Text:
    """`✓ start          5 passed, 1 skipped   0.19 s  skipped: bind-to-port` for one group's results
    (one group, run order): the skipped ones named unless the whole group was skipped."""
    outcomes = {r.outcome for r in results}
    mark = next(o for o in _WORST if o in outcomes)
    counted = [(o, sum(r.outcome is o for r in results)) for o in _ORDER]
    line = Text()
    line.append(f"{OUTCOME_MARK[mark]} ", style=OUTCOME_STYLE[mark])
    line.append(f"{group_of(results[0].id):<14} ", style="bold")
    line.append(", ".join(f"{n} {o.value}" for o, n in counted if n).ljust(24))
    line.append(f"{sum(r.duration_s for r in results):7.2f} s", style="dim")
    skipped = [r.id.split(".", 1)[-1] for r in results if r.outcome is Outcome.SKIPPED]
    if skipped and len(skipped) < len(results):
        line.append(f"  skipped: {', '.join(skipped)}", style="yellow")
    return line


class GroupProgress:
    """Prints a group's line (and the lines of its checks that did not simply pass) when the group
    is done: when a result of another group arrives, and at close(). `print` is the console's."""

    def __init__(self, print: Callable[[RenderableType], None]) -> None:
        self._print = print
        self._group: list[CheckResult] = []

    def add(self, result: CheckResult) -> None:
        if self._group and group_of(self._group[0].id) != group_of(result.id):
            self.close()
        self._group.append(result)

    def close(self) -> None:
        if not self._group:
            return
        self._print(group_line(self._group))
        for result in self._group:
            if needs_reading(result):  # a skip is counted (and named) on the group's line
                self._print(progress_line(result))
        self._group = []


# --- after the run ----------------------------------------------------------------------------------


def details(result: CheckResult, fix: str = "") -> RenderableType:
    """The table's last column: a failure or error expanded, fix first (explain()); a pass or skip its
    message's first line; then every warning, one `warning: ...` line each, wrapped, not cut (a
    warning says what to change)."""
    parts: list[Text] = []
    if result.outcome in (Outcome.FAILED, Outcome.ERROR):
        explained = explain(result, fix)
        if explained.fix:
            parts.append(Text(f"Fix: {explained.fix}", style="bold"))
        if explained.seen:
            seen, _, more = explained.seen.partition("\n")
            parts.append(Text(seen))
            if more.strip():
                parts.append(Text(more.strip("\n"), style="dim"))
        if explained.note:
            parts.append(Text(explained.note, style="dim"))
        if explained.see:
            parts.append(Text(f"See {explained.see}", style="cyan"))
    elif result.message and result.message != "ok":
        parts.append(Text(first_line(result.message), style="dim", no_wrap=True, overflow="ellipsis"))
    loud = set(result.headline_warnings)
    parts.extend(
        Text(f"warning: {w}", style="bold yellow" if w in loud else "yellow") for w in result.warnings
    )
    return Group(*parts)


def results_table(
    results: Sequence[CheckResult], checks: Iterable[Check] | Mapping[str, str] | None = None
) -> Table:
    """One row per result given (print_report gives the ones that need reading)."""
    fixes = fixes_of(checks)
    table = Table(title="SageMaker hosting contract: to read", title_justify="left")
    table.add_column("check", no_wrap=True)
    table.add_column("outcome", no_wrap=True)
    table.add_column("time", justify="right", no_wrap=True)
    table.add_column("details", overflow="fold", ratio=1)
    for r in results:
        table.add_row(
            escape(r.id),
            Text(r.outcome.value.upper(), style=OUTCOME_STYLE[r.outcome]),
            f"{r.duration_s:.2f} s",
            details(r, fixes.get(r.id, "")),
        )
    return table


def skip_notes(results: Sequence[CheckResult]) -> list[tuple[str, str]]:
    """`(who, why)` once per distinct skip reason, in run order: who is `mme.* (8 checks)` when the
    reason covers a whole group of the run, else the ids it covers, comma-separated."""
    by_reason: dict[str, list[str]] = {}
    for r in results:
        if r.outcome is Outcome.SKIPPED:
            by_reason.setdefault(r.message.strip(), []).append(r.id)
    groups: dict[str, list[str]] = {}
    for r in results:
        groups.setdefault(group_of(r.id), []).append(r.id)
    notes = []
    for reason, ids in by_reason.items():
        whole = [g for g, members in groups.items() if len(members) > 1 and set(members) <= set(ids)]
        rest = [i for i in ids if group_of(i) not in whole]
        who = [f"{g}.* ({len(groups[g])} checks)" for g in whole] + rest
        notes.append((", ".join(who), reason))
    return notes


def print_report(
    results: Sequence[CheckResult],
    console: Console,
    checks: Iterable[Check] | Mapping[str, str] | None = None,
    before_summary: Sequence[RenderableType] = (),
) -> None:
    """The table of the results that need reading (none: no table), each skip reason once, what
    `before_summary` holds (the cold-start profile), the summary line."""
    shown = [r for r in results if needs_reading(r)]
    if shown:
        console.print(results_table(shown, checks))
    notes = skip_notes(results)
    if notes:
        console.print(Text("skipped (each check's own status is in --json and --junit):", style="yellow"))
        for who, why in notes:
            line = Text()
            line.append(who, style="bold")
            line.append(f": {why}")
            for wrapped in line.wrap(console, max(console.width - 2, 20)):  # indented, no padding
                wrapped.rstrip()
                console.print(Text("  ") + wrapped, soft_wrap=True)
    for renderable in before_summary:
        console.print(renderable)
    style = (
        "bold red"
        if exit_code(results) != EXIT_OK
        else "bold yellow"
        if headline_warnings(results)
        else "green"
    )
    console.print(Text(summary(results), style=style))


# --- the run ----------------------------------------------------------------------------------------


def run_with_progress(checks: Sequence[Check], target: Target, console: Console) -> list[CheckResult]:
    """run_checks with a live line for the running check (a spinner, on a terminal only) and, as each
    group finishes, its line (GroupProgress: what CI logs keep)."""
    from rich.progress import MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from contract_tests.runner import run_checks

    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    # off the terminal (CI logs) no live line: it would only leave a blank line behind
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as progress:

        def describe(index: int) -> str:
            if index >= len(checks):
                return "done"
            return f"running [bold]{escape(checks[index].id)}[/] ({escape(checks[index].title)})"

        task = progress.add_task(describe(0), total=len(checks))
        groups = GroupProgress(progress.console.print)
        done = 0

        def on_result(result: CheckResult) -> None:
            nonlocal done
            done += 1
            groups.add(result)
            progress.update(task, advance=1, description=describe(done))

        try:
            return run_checks(checks, target, on_result=on_result)
        finally:
            groups.close()  # an interrupted run still shows the group it was in
