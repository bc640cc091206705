"""Reports (console, JSON, JUnit), exit codes, the `check` command line, the pytest plugin without
Docker, and docs/contract.md being what the registry generates. Hand-made CheckResults only."""

from __future__ import annotations

import dataclasses
import io
import json
import math
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from contract_tests import docs, report
from contract_tests.cli import check_config, selected
from contract_tests.console import print_report
from contract_tests.registry import Check, all_checks
from contract_tests.result import CheckFailed, CheckResult, CheckSkipped, Outcome
from emulator.cli import build_parser, main
from emulator.config import ContractLimits
from tests.unit.check_results import result

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]


@dataclasses.dataclass(frozen=True)
class _Probe:
    status: int
    body: bytes


@pytest.fixture
def results() -> list[CheckResult]:
    return [
        result(Outcome.PASSED, "image.root", message="runs as root", warnings=("image is 11 GB",)),
        result(
            Outcome.FAILED,
            "start.healthy",
            evidence={
                "status": 503,
                "body": b"\x00starting <slowly> & \xff",
                "model_dir": Path("/opt/ml/model"),
                "codes": {503, 500},
                "elapsed_s": math.inf,
                "probe": _Probe(503, b"no"),
                "outcome": Outcome.FAILED,
                "cause": ValueError("bad"),
                "log_tail": "\x1b[31mERROR\x1b[0m model not loaded\nTraceback: <frame> & more",
            },
        ),
        result(Outcome.SKIPPED, "shutdown.idle"),
        result(
            Outcome.ERROR,
            "invocations.timely",
            evidence={
                "traceback": 'Traceback (most recent call last):\n  File "x.py"\nRuntimeError: checker bug'
            },
        ),
    ]


# --- exit codes and summary ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("outcomes", "code"),
    [
        ([], 0),
        ([Outcome.PASSED], 0),
        ([Outcome.PASSED, Outcome.SKIPPED], 0),
        ([Outcome.SKIPPED], 0),
        ([Outcome.PASSED, Outcome.FAILED], 1),
        ([Outcome.ERROR, Outcome.PASSED], 1),
        ([Outcome.FAILED, Outcome.ERROR, Outcome.SKIPPED], 1),
    ],
)
def test_exit_code(outcomes: list[Outcome], code: int) -> None:
    assert report.exit_code([result(o) for o in outcomes]) == code


def test_summary(results: list[CheckResult]) -> None:
    assert report.summary(results) == "1 passed, 1 failed, 1 error, 1 skipped in 0.5 s"
    assert report.summary([]) == "no checks in 0.0 s"


# --- JSON ---------------------------------------------------------------------------------------------


def test_json_shape_and_coercion(results: list[CheckResult], tmp_path: Path) -> None:
    path = tmp_path / "out.json"
    report.write_json(results, path)
    data = json.loads(path.read_text())["results"]
    assert [d["id"] for d in data] == [r.id for r in results]
    keys = {
        "id",
        "title",
        "outcome",
        "duration_s",
        "message",
        "evidence",
        "doc_url",
        "warnings",
        "headline_warnings",
        "fix",
    }
    assert all(set(d) == keys for d in data)
    assert [d["outcome"] for d in data] == ["passed", "failed", "skipped", "error"]
    assert data[0]["warnings"] == ["image is 11 GB"] and data[0]["duration_s"] == 0.123
    evidence = data[1]["evidence"]
    assert evidence["status"] == 503
    assert evidence["body"].startswith("\x00starting <slowly> & ")
    assert evidence["model_dir"] == "/opt/ml/model"
    assert sorted(evidence["codes"]) == [500, 503]
    assert evidence["elapsed_s"] == "inf"
    assert evidence["probe"] == {"status": 503, "body": "no"}
    assert evidence["outcome"] == "failed"
    assert evidence["cause"] == "ValueError: bad"
    assert "Traceback (most recent call last)" in data[3]["evidence"]["traceback"]
    json.dumps(data, allow_nan=False)  # strict JSON


def test_json_safe_leaves_plain_data_alone() -> None:
    plain = {"a": [1, 2.5, None, True, "x"], "b": {"c": "d"}}
    assert report.json_safe(plain) == plain
    assert report.json_safe((1, object.__name__)) == [1, "object"]


# --- JUnit --------------------------------------------------------------------------------------------


def test_junit_is_valid_xml_with_the_right_counts(results: list[CheckResult], tmp_path: Path) -> None:
    path = tmp_path / "out.xml"
    report.write_junit(results, path, {"start.healthy": "Answer 200 & <soon>."}, properties={"image": "a&b"})
    root = ET.parse(path).getroot()
    (suite,) = root.iter("testsuite")
    assert suite.get("name") == "smlocal-contract"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == (
        "4",
        "1",
        "1",
        "1",
    )
    cases = suite.findall("testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases] == [
        ("image", "image.root"),
        ("start", "start.healthy"),
        ("shutdown", "shutdown.idle"),
        ("invocations", "invocations.timely"),
    ]
    assert cases[0].get("time") == "0.123"
    assert cases[0].find("failure") is None and cases[0].find("skipped") is None
    assert "warning: image is 11 GB" in (cases[0].findtext("system-out") or "")

    failure = cases[1].find("failure")
    assert failure is not None
    assert failure.get("message") == "no 200 from /ping within 6 s: last answer HTTP 503"
    text = failure.text or ""
    assert "Fix: Answer 200 & <soon>." in text and "See docs/contract.md#start-healthy" in text
    assert "status: 503" in text and "model not loaded" in text and "<frame> & more" in text
    assert "\x1b" not in text and "\x00" not in text  # not representable in XML 1.0: shown as \x1b

    skipped = cases[2].find("skipped")
    assert skipped is not None and skipped.get("message") == "the container never became healthy"
    error = cases[3].find("error")
    assert error is not None and error.get("message") == "RuntimeError: checker bug"
    assert "Traceback (most recent call last)" in (error.text or "")
    assert suite.find("properties/property[@name='image']").get("value") == "a&b"  # type: ignore[union-attr]


def test_junit_of_nothing() -> None:
    suite = ET.fromstring(report.junit_xml([])).find("testsuite")
    assert suite is not None and suite.get("tests") == "0"


# --- the `smlocal check` command line (no Docker: it stops before starting anything) ------------------


def test_check_config_defaults_to_sagemaker_limits() -> None:
    args = build_parser().parse_args(["check", "img:1"])
    config = check_config(args)
    assert config.image == "img:1" and config.limits == ContractLimits()
    assert config.limits.startup_timeout_s == 480
    assert config.payload == b"{}" and config.content_type == "application/json"


def test_check_config_from_options(tmp_path: Path) -> None:
    payload = tmp_path / "p.csv"
    payload.write_bytes(b"1,2,3")
    args = build_parser().parse_args(
        ["check", "img", "--startup-timeout", "6", "--ping-timeout", "1", "--accept-timeout", "0.5"]
        + ["--invocation-timeout", "2", "--stop-grace", "3", "--payload", str(payload)]
        + ["--content-type", "text/csv", "--env", "A=1", "--env", "B=x=y", "--model-data", "s3://b/m.tar.gz"]
    )
    config = check_config(args)
    assert config.limits == ContractLimits().replace(
        startup_timeout_s=6.0,
        ping_timeout_s=1.0,
        accept_timeout_s=0.5,
        invocation_timeout_s=2.0,
        stop_grace_s=3.0,
    )
    assert config.payload == b"1,2,3" and config.content_type == "text/csv"
    assert dict(config.environment) == {"A": "1", "B": "x=y"} and config.model_data == "s3://b/m.tar.gz"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--check", "no.such-check"], "unknown check id(s) no.such-check"),
        (["--check", "image.root,nope"], "unknown check id(s) nope"),
        (["--env", "NOEQUALS"], "--env takes KEY=VALUE"),
        (["--payload", "/no/such/file"], "--payload /no/such/file"),
        (["--stop-grace", "0"], "--stop-grace must be a positive"),
        (["--json", "/no/such/dir/out.json"], "--json /no/such/dir/out.json"),
    ],
)
def test_usage_errors_exit_2_before_touching_docker(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "img:1", *argv]) == 2
    assert says in capsys.readouterr().err


def test_selection_by_id_group_and_comma_list() -> None:
    checks = all_checks()
    if not checks:
        pytest.skip("no checks registered")
    first, groups = checks[0], {c.group for c in checks}
    assert [c.id for c in selected([first.id])] == [first.id]
    assert {c.group for c in selected([first.group])} == {first.group}
    assert len(selected([])) == len(checks)
    assert {c.group for c in selected([",".join(sorted(groups))])} == groups


# --- the pytest plugin (no Docker: fake checks and a fake target) --------------------------------------


def _ok(ctx: Any) -> str:
    ctx.warn("image is 11 GB")
    return "fine"


def _bad(ctx: Any) -> str:
    raise CheckFailed("saw HTTP 500 on /ping", status=500)


def _skip(ctx: Any) -> str:
    raise CheckSkipped("does not apply here")


def _boom(ctx: Any) -> str:
    raise RuntimeError("checker bug")


FAKE_CHECKS = [
    Check("fake.ok", "passes", "rule 1", _ok, "fix 1"),
    Check("fake.bad", "fails", "rule 2", _bad, "Answer 200 on /ping."),
    Check("fake.skip", "skips", "rule 3", _skip),
    Check("other.boom", "errors", "rule 4", _boom),
]


class _FakeTarget:
    closed = 0

    def close(self) -> None:
        type(self).closed += 1


@pytest.fixture(autouse=True)
def _no_plugin_autoload(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner pytest runs load the plugin with -p only (autoloaded too, it would be registered twice)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


def test_plugin_is_an_installed_pytest11_entry_point() -> None:
    from importlib.metadata import entry_points

    found = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert found.get("smlocal") == "contract_tests.plugin", "run `pip install -e . --no-deps` to register it"


@pytest.fixture
def fake_contract(monkeypatch: pytest.MonkeyPatch) -> type[_FakeTarget]:
    import contract_tests.plugin
    import contract_tests.registry

    _FakeTarget.closed = 0
    target = _FakeTarget()
    monkeypatch.setattr(contract_tests.registry, "all_checks", lambda: list(FAKE_CHECKS))
    monkeypatch.setattr(contract_tests.plugin.ContractSession, "new_target", lambda self: target)
    return _FakeTarget


def test_plugin_adds_nothing_without_the_option(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_one():\n    pass\n")
    run = pytester.runpytest("-p", "contract_tests.plugin", "--collect-only", "-q")
    assert run.outlines[0] == "test_plugin_adds_nothing_without_the_option.py::test_one"
    assert "smlocal-contract" not in run.stdout.str()
    run = pytester.runpytest("-p", "contract_tests.plugin")
    run.assert_outcomes(passed=1)
    assert "--sagemaker-image" in pytester.runpytest("-p", "contract_tests.plugin", "--help").stdout.str()


def test_plugin_import_is_cheap() -> None:
    code = "import sys, contract_tests.plugin; print(sorted(m for m in ('docker', 'httpx', 'contract_tests.target', 'contract_tests.registry') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_plugin_items_and_outcomes(pytester: pytest.Pytester, fake_contract: type[_FakeTarget]) -> None:
    run = pytester.runpytest("-p", "contract_tests.plugin", "--sagemaker-image", "fake:1", "-rA")
    run.assert_outcomes(passed=1, failed=2, skipped=1)
    out = run.stdout.str()
    for check_id in ("fake.ok", "fake.bad", "other.boom"):
        assert f"smlocal-contract::{check_id}" in out
    assert "SKIPPED [1] smlocal-contract:1: fake.skip: does not apply here" in out
    assert "saw HTTP 500 on /ping" in out and "Fix: Answer 200 on /ping." in out and "status: 500" in out
    assert "raise CheckFailed" not in out  # a contract failure is not a Python traceback
    assert "RuntimeError: checker bug" in out and "bug in the checker" in out
    assert "does not apply here" in out
    assert "smlocal contract warnings" in out and "fake.ok: image is 11 GB" in out
    assert fake_contract.closed == 1


def test_plugin_items_are_selectable_with_k(
    pytester: pytest.Pytester, fake_contract: type[_FakeTarget]
) -> None:
    run = pytester.runpytest(
        "-p", "contract_tests.plugin", "--sagemaker-image", "fake:1", "-k", "fake.ok", "-v"
    )
    run.assert_outcomes(passed=1, deselected=3)
    run.stdout.fnmatch_lines(["smlocal-contract::fake.ok PASSED*"])
    run = pytester.runpytest("-p", "contract_tests.plugin", "--sagemaker-image", "fake:1", "-k", "other")
    run.assert_outcomes(failed=1, deselected=3)


# --- docs/contract.md ---------------------------------------------------------------------------------


def test_committed_contract_doc_is_the_generated_one() -> None:
    committed = (ROOT / "docs" / "contract.md").read_text(encoding="utf-8")
    assert committed == docs.render(), f"docs/contract.md is stale: regenerate it with `{docs.COMMAND}`"


def test_every_check_has_its_anchor_and_text() -> None:
    text = docs.render()
    checks = all_checks()
    assert len({c.anchor for c in checks}) == len(checks)
    for c in checks:
        assert f'<a id="{c.anchor}"></a>' in text and f"### `{c.id}`: {c.title}" in text
        assert c.requirement.strip() and c.fix.strip(), f"{c.id} has no requirement or fix"
        assert f"--check {c.id}`" in text and c.doc_url == f"docs/contract.md#{c.anchor}"


def test_render_of_hand_made_checks() -> None:
    text = docs.render(FAKE_CHECKS)
    assert (
        text.index('<a id="fake-ok"></a>') < text.index("## other (`other`)") < text.index("### `other.boom`")
    )
    assert "**Fix.** Answer 200 on /ping." in text
    assert "No checks are registered yet." in docs.render([])


def test_summary_line_repeats_headline_warnings() -> None:
    quiet = CheckResult("a.b", "t", Outcome.PASSED, 1.0, "ok", warnings=("small",))
    loud = CheckResult(
        "invocations.serves",
        "t",
        Outcome.PASSED,
        1.0,
        "ok",
        warnings=("w", "never served"),
        headline_warnings=("never served",),
    )
    assert report.summary([quiet]) == "1 passed in 1.0 s"
    assert report.summary([quiet, loud]) == "2 passed in 2.0 s; warning: never served"
    assert report.headline_warnings([quiet, loud]) == ["never served"]


# --- issue 10: a report people read -------------------------------------------------------------------


def render(results: list[CheckResult], checks: Any = None, width: int = 100) -> str:
    buffer = io.StringIO()
    print_report(results, Console(file=buffer, width=width, force_terminal=False), checks)
    return buffer.getvalue()


def test_failure_shows_fix_first_then_what_was_seen_then_the_docs() -> None:
    failed = result(
        Outcome.FAILED,
        "invocations.timely",
        message="POST /invocations got a timeout after 60 s; SageMaker allows 60 s. Fix: load the model "
        "at startup.\nLast log lines:\nValueError: boom",
    )
    text = report.explanation(failed, "the check's generic fix")
    assert text.splitlines() == [
        "Fix: load the model at startup.",
        "POST /invocations got a timeout after 60 s; SageMaker allows 60 s.",
        "Last log lines:",
        "ValueError: boom",
        "See docs/contract.md#invocations-timely",
    ]
    # a message without its own fix gets the check's, still first
    plain = report.explanation(result(Outcome.FAILED), "Answer 200 on /ping.")
    assert plain.splitlines()[0] == "Fix: Answer 200 on /ping."
    assert plain.splitlines()[1] == "no 200 from /ping within 6 s: last answer HTTP 503"
    out = render([failed], width=120)  # the console keeps the whole message, in this order
    assert out.index("Fix: load the model") < out.index("got a timeout") < out.index("ValueError: boom")
    assert out.index("ValueError: boom") < out.index("See docs/contract.md#invocations-timely")
    assert out.count("Fix:") == 1


@pytest.mark.parametrize(
    ("message", "seen", "fix"),
    [
        ("saw X. Fix: do Y", "saw X.", "do Y"),
        ("saw X\nlogs:\nline\nFix: do Y", "saw X\nlogs:\nline", "do Y"),
        ("saw X. Fix: do Y\nLast log lines:\nz", "saw X.\nLast log lines:\nz", "do Y"),
        ("saw X; no fix here", "saw X; no fix here", ""),
        ("a HotFix: is not a fix", "a HotFix: is not a fix", ""),
        ("saw X. Fix:", "saw X. Fix:", ""),
    ],
)
def test_split_fix(message: str, seen: str, fix: str) -> None:
    assert report.split_fix(message) == (seen, fix)


def test_junit_failure_text_is_fix_first(tmp_path: Path) -> None:
    failed = result(Outcome.FAILED, message="saw HTTP 500. Fix: return 200", evidence={"status": 500})
    suite = ET.fromstring(report.junit_xml([failed], {"start.healthy": "generic"})).find("testsuite")
    assert suite is not None
    failure = suite.find("testcase/failure")
    assert failure is not None and failure.get("message") == "saw HTTP 500. Fix: return 200"
    assert (failure.text or "").splitlines()[:3] == [
        "Fix: return 200",
        "saw HTTP 500.",
        "See docs/contract.md#start-healthy",
    ]
    assert "status: 500" in (failure.text or "")


def _headline_run() -> list[CheckResult]:
    never = "no successful invocation: the model's serving was not verified; give --payload"
    return [
        result(Outcome.PASSED, "image.size", message="small", warnings=("image is 11 GB",)),
        result(
            Outcome.PASSED,
            "invocations.serves",
            message="ok",
            warnings=("only 500s", never),
            headline_warnings=(never,),
        ),
        result(Outcome.FAILED, "start.healthy", message="saw 503. Fix: load faster"),
    ]


def test_json_report_is_versioned_with_headline_warnings_on_top(tmp_path: Path) -> None:
    path = tmp_path / "out.json"
    report.write_json(_headline_run(), path, {"start.healthy": "generic"}, properties={"image": "img:1"})
    data = json.loads(path.read_text())
    never = "no successful invocation: the model's serving was not verified; give --payload"
    assert list(data)[:5] == ["version", "exit_code", "summary", "counts", "headline_warnings"]
    assert data["version"] == report.JSON_VERSION == 2
    assert data["exit_code"] == 1
    assert data["summary"] == f"2 passed, 1 failed in 0.4 s; warning: {never}"
    assert data["counts"] == {"passed": 2, "failed": 1, "skipped": 0, "error": 0}
    assert data["headline_warnings"] == [never]
    assert data["warnings"] == [
        {"id": "image.size", "warning": "image is 11 GB", "headline": False},
        {"id": "invocations.serves", "warning": "only 500s", "headline": False},
        {"id": "invocations.serves", "warning": never, "headline": True},
    ]
    assert data["properties"] == {"image": "img:1"}
    rows = {row["id"]: row for row in data["results"]}
    assert rows["invocations.serves"]["headline_warnings"] == [never]
    assert rows["start.healthy"]["fix"] == "load faster" and rows["image.size"]["fix"] == ""
    assert json.loads(json.dumps(report.report_json([])))["results"] == []


def test_junit_carries_headline_warnings_on_the_suite() -> None:
    never = "no successful invocation: the model's serving was not verified; give --payload"
    root = ET.fromstring(report.junit_xml(_headline_run(), properties={"image": "img:1"}))
    suite = root.find("testsuite")
    assert suite is not None
    props = [(p.get("name"), p.get("value")) for p in suite.findall("properties/property")]
    assert props == [("image", "img:1"), ("warning", f"invocations.serves: {never}")]
    assert suite.findtext("system-err") == f"warning: invocations.serves: {never}"
    assert suite.findtext("system-out") == f"2 passed, 1 failed in 0.4 s; warning: {never}"
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert cases["invocations.serves"].findtext("system-err") == f"warning: {never}"
    assert cases["image.size"].find("system-err") is None
    assert "warning: only 500s" in (cases["invocations.serves"].findtext("system-out") or "")
    # the schema's order: properties, the testcases, then the suite's system-out and system-err
    assert [child.tag for child in suite][0] == "properties"
    assert [child.tag for child in suite][-2:] == ["system-out", "system-err"]
    quiet = ET.fromstring(report.junit_xml(_headline_run()[:1])).find("testsuite")
    assert quiet is not None and quiet.find("properties") is None and quiet.find("system-err") is None


def _loud(ctx: Any) -> str:
    ctx.warn("only error answers seen")
    ctx.warn("no successful invocation: serving not verified", headline=True)
    return "ok"


def test_plugin_summary_shows_headline_warnings_first(
    pytester: pytest.Pytester, fake_contract: type[_FakeTarget], monkeypatch: pytest.MonkeyPatch
) -> None:
    import contract_tests.registry

    checks = [*FAKE_CHECKS[:1], Check("fake.loud", "warns", "rule", _loud, "fix")]
    monkeypatch.setattr(contract_tests.registry, "all_checks", lambda: list(checks))
    run = pytester.runpytest("-p", "contract_tests.plugin", "--sagemaker-image", "fake:1")
    run.assert_outcomes(passed=2)
    lines = run.stdout.lines
    start = next(i for i, line in enumerate(lines) if "smlocal contract warnings" in line)
    assert lines[start + 1 : start + 4] == [
        "fake.loud: no successful invocation: serving not verified",
        "fake.ok: image is 11 GB",
        "fake.loud: only error answers seen",
    ]


def test_plugin_failure_text_is_fix_first(
    pytester: pytest.Pytester, fake_contract: type[_FakeTarget]
) -> None:
    run = pytester.runpytest("-p", "contract_tests.plugin", "--sagemaker-image", "fake:1", "-k", "fake.bad")
    run.assert_outcomes(failed=1, deselected=3)
    out = run.stdout.str()
    assert out.index("Fix: Answer 200 on /ping.") < out.index("saw HTTP 500 on /ping")
    assert out.index("saw HTTP 500 on /ping") < out.index("See docs/contract.md#fake-bad")
    assert out.index("See docs/contract.md#fake-bad") < out.index("status: 500")


def _trap(ctx: Any) -> str:
    return "ok"


TRAP_CHECKS = [
    Check(
        "trap.both",
        "has both",
        "rule",
        _trap,
        "fix",
        before='\n    # breaks it\n    CMD ["python3", "server.py"]\n',
        after='ENTRYPOINT ["python3", "server.py"]',
    ),
    Check("trap.none", "has none", "rule", _trap, "fix"),
    Check("trap.after-only", "has after", "rule", _trap, "fix", after="def ping():\n    return '', 200"),
    Check("trap.fence", "has backticks", "rule", _trap, "fix", before="echo ```not a fence```\nexec serve"),
]


def test_docs_render_before_after_examples_and_the_traps_index() -> None:
    text = docs.render(TRAP_CHECKS)
    index = text.index("## Traps real images fall into")
    assert index < text.index("## Running the checks") < text.index("## The checks")
    listed = text[index : text.index("## Running the checks")]
    assert "[`trap.both`](#trap-both): has both" in listed and "[`trap.after-only`]" in listed
    assert "trap.none" not in listed and "[`trap.fence`]" in listed

    both = text[text.index('<a id="trap-both">') : text.index('<a id="trap-none">')]
    assert both.index("**Fix.**") < both.index("**Before (breaks the rule):**") < both.index("**After:**")
    assert '```dockerfile\n# breaks it\nCMD ["python3", "server.py"]\n```' in both  # dedented, fenced
    assert '```dockerfile\nENTRYPOINT ["python3", "server.py"]\n```' in both
    assert both.index("**After:**") < both.index("**Run it alone.**")
    none = text[text.index('<a id="trap-none">') : text.index('<a id="trap-after-only">')]
    assert "Before" not in none and "After" not in none and "```" not in none
    after_only = text[text.index('<a id="trap-after-only">') : text.index('<a id="trap-fence">')]
    assert "Before" not in after_only and "```python\ndef ping():\n    return '', 200\n```" in after_only
    assert "````\necho ```not a fence```\nexec serve\n````" in text  # a longer fence than the snippet's
    assert "## Traps" not in docs.render(FAKE_CHECKS)  # no examples, no index


@pytest.mark.parametrize(
    ("snippet", "lang"),
    [
        ("FROM python:3.11\nRUN pip install x", "dockerfile"),
        ('# a comment\nENTRYPOINT ["serve"]', "dockerfile"),
        ("#!/bin/sh\nexec serve", "sh"),
        ("#!/usr/bin/env python3\nprint(1)", "python"),
        ("import os\nos.exit(1)", "python"),
        ("@app.get('/ping')\ndef ping(): ...", "python"),
        ("gunicorn -w 1 app:app", ""),
    ],
)
def test_docs_example_language(snippet: str, lang: str) -> None:
    assert docs.language(snippet) == lang


def test_registered_traps_are_listed_and_shown() -> None:
    text = docs.render()
    for c in all_checks():
        if docs.has_example(c):
            section = text[text.index(f'<a id="{c.anchor}"></a>') :]
            assert f"- [`{c.id}`](#{c.anchor})" in text
            assert section.index("**Before (breaks the rule):**" if c.before.strip() else "**After:**") < (
                section.index("**Run it alone.**")
            )
    examples = {c.id for c in all_checks() if docs.has_example(c)}
    assert {f"start.{r}" for r in ("no-exit", "listens", "healthy", "ping-fast", "ping-body")} <= examples
    assert "accept.concurrent" in examples
