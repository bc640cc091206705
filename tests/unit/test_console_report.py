"""The console report of `smlocal check` (contract_tests.console): a passing run fits one screen, a
skip reason shared by several checks is printed once, a failure keeps its whole message, fix first.
Hand-made CheckResults only; tests/integration/test_check_cli.py measures the real echo image."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from contract_tests import console, report
from contract_tests.result import CheckResult, Outcome
from tests.unit.check_results import result as check_result

NO_MME_LABEL = (
    "the image has no label com.amazonaws.sagemaker.capabilities.multi-models=true, so it cannot serve "
    "a multi-model endpoint: SageMaker fails a multi-model endpoint of it with ... To serve many models, "
    "implement the multi-model container API and add the label; the mme.* checks then verify it."
)


def result(outcome: Outcome, id: str = "start.healthy", **kw: Any) -> CheckResult:  # noqa: A002
    return check_result(outcome, id, **{"title": "a rule", **kw})


def render(results: list[CheckResult], checks: Any = None, width: int = 120) -> str:
    buffer = io.StringIO()
    console.print_report(results, Console(file=buffer, width=width, force_terminal=False), checks)
    return buffer.getvalue()


def progress(results: list[CheckResult], width: int = 120) -> str:
    buffer = io.StringIO()
    out = Console(file=buffer, width=width, force_terminal=False)
    groups = console.GroupProgress(out.print)
    for r in results:
        groups.add(r)
    groups.close()
    return buffer.getvalue()


def passing_run() -> list[CheckResult]:
    """The shape of a passing run on the echo image: passes with long messages, a group skipped for
    one shared reason, a lone skip."""
    long = "measured and fine, " * 12
    return [
        *(
            result(Outcome.PASSED, f"start.rule-{i}", message=f"check {i}: {long}\nsecond line")
            for i in range(6)
        ),
        result(Outcome.SKIPPED, "start.bind-to-port", message="no bind-to-port label: " + "why not, " * 30),
        *(result(Outcome.PASSED, f"invocations.rule-{i}", message=long) for i in range(12)),
        *(result(Outcome.SKIPPED, f"mme.rule-{i}", message=NO_MME_LABEL) for i in range(8)),
        *(result(Outcome.PASSED, f"shutdown.rule-{i}", message=long) for i in range(3)),
    ]


def test_a_passing_run_is_a_line_per_group_and_each_skip_reason_once() -> None:
    results = passing_run()
    out = progress(results) + render(results)
    lines = out.splitlines()
    # 4 group lines, the skipped heading, the two reasons (3 lines each at width 120), the summary line
    assert len(lines) == 4 + 1 + 3 + 3 + 1, out
    assert all(line == line.rstrip() for line in lines), out
    assert out.count("the image has no label com.amazonaws.sagemaker.capabilities.multi-models") == 1, out
    assert "mme.* (8 checks): the image has no label" in out
    assert "start.bind-to-port: no bind-to-port label" in out
    assert "skipped: bind-to-port" in lines[0]  # the group's line names its skipped check
    assert "measured and fine" not in out and "second line" not in out  # passes: in --json / --junit
    assert lines[-1] == "21 passed, 9 skipped in 3.7 s"
    assert all(len(line) <= 120 for line in lines)


def test_a_shared_reason_names_the_ids_when_it_covers_part_of_a_group() -> None:
    results = [
        result(Outcome.PASSED, "streaming.a"),
        result(Outcome.SKIPPED, "streaming.b", message="why"),
        result(Outcome.SKIPPED, "streaming.c", message="why"),
        result(Outcome.SKIPPED, "model-data.extracts", message="why"),
    ]
    assert console.skip_notes(results) == [("streaming.b, streaming.c, model-data.extracts", "why")]


def test_a_failing_run_keeps_each_failure_and_warning_whole_fix_first() -> None:
    long = "the whole message, " * 20 + "END OF MESSAGE"
    warned = "image is 11.2 GB: over SageMaker serverless's 10 GB image limit; " + "advice " * 20 + "END"
    results = [
        *passing_run(),
        result(Outcome.FAILED, "invocations.timely", message=f"{long}\nLast log lines:\nValueError: boom"),
        result(Outcome.ERROR, "invocations.keepalive"),
        result(Outcome.PASSED, "image.size", message="image size 11.2 GB", warnings=(warned,)),
    ]
    fixes = {"invocations.timely": "Load the model at startup."}
    assert long in render(results, fixes, width=1000)  # the whole message ...
    out = render(results, fixes)
    assert "END OF MESSAGE" in out and "ValueError: boom" in out  # ... wrapped at 120, never cut
    flat = " ".join(out.split())
    assert flat.index("Fix: Load the model at startup.") < flat.index("the whole message")
    assert "See docs/contract.md#invocations-timely" in out
    assert report.ERROR_NOTE.split(";")[0] in flat
    assert "warning: image is 11.2 GB" in out and "advice END" in flat
    for shown in ("invocations.timely", "invocations.keepalive", "image.size"):
        assert shown in out
    assert "start.rule-0" not in out  # a plain pass needs no row
    during = progress(results)
    assert "✗ invocations.timely" in during and "the whole message" in during  # its first line, live
    assert "warning: image is 11.2 GB" in during


@pytest.mark.parametrize("outcome", list(Outcome))
def test_progress_lines(outcome: Outcome) -> None:
    line = console.progress_line(result(outcome, warnings=("w",))).plain
    assert "start.healthy" in line and outcome.value in line and "warning: w" in line


def test_group_lines_count_outcomes_and_take_the_worst_mark() -> None:
    line = console.group_line(
        [result(Outcome.PASSED), result(Outcome.FAILED), result(Outcome.SKIPPED, "start.other")]
    ).plain
    assert line.startswith("✗ start ") and "1 passed, 1 failed, 1 skipped" in line
    assert line.endswith("skipped: other")
    assert console.group_line([result(Outcome.SKIPPED, "mme.a")]).plain.startswith("- mme ")


def test_console_survives_narrow_terminals_markup_and_empty_runs() -> None:
    odd = result(Outcome.FAILED, "x.[bold]y", message="[red]not markup[/red] \x1b[31m\n\nsecond", title="[/]")
    assert "1 passed, 1 failed" in render([result(Outcome.PASSED), odd], width=20)
    out = render([odd], width=200)
    assert "[red]not markup[/red]" in out and "x.[bold]y" in out  # shown as written, not as markup
    assert "no checks" in render([])
    assert "x.[bold]y" in progress([odd])


def test_fix_is_not_repeated_when_the_message_says_it() -> None:
    own = result(Outcome.FAILED, message="exited with 1\nFix: exec the server")
    assert report.explanation(own, "Use exec-form").count("Fix:") == 1
    assert render([own], {"start.healthy": "Use exec-form"}).count("Fix:") == 1
    assert "Fix: Use exec-form" in report.explanation(result(Outcome.FAILED), "Use exec-form")


def test_run_with_progress_prints_groups_as_they_end_and_the_last_one_when_interrupted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import contract_tests.runner

    done = [result(Outcome.PASSED, "image.a"), result(Outcome.PASSED, "start.a"), result(Outcome.FAILED)]

    def run_checks(checks: Any, target: Any, on_result: Any) -> list[CheckResult]:
        for r in done:
            on_result(r)
        raise KeyboardInterrupt  # Ctrl-C in the middle of the start group

    monkeypatch.setattr(contract_tests.runner, "run_checks", run_checks)
    buffer = io.StringIO()
    out = Console(file=buffer, width=120, force_terminal=False)
    with pytest.raises(KeyboardInterrupt):
        console.run_with_progress([], object(), out)  # type: ignore[arg-type]
    lines = buffer.getvalue().splitlines()
    assert [line.split()[:2] for line in lines[:2]] == [["✓", "image"], ["✗", "start"]], lines
    assert lines[2].lstrip().startswith("✗ start.healthy") and len(lines) == 3  # no live line off a terminal
