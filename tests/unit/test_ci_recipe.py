"""docs/ci.md's recipes run exactly tests/user_project/ci.sh, the script .ci/run runs on the sample.

The GitHub Actions workflow's `run:` steps (but the install) and the GitLab job's `script:` are the
script's commands in its order, their variables its defaults, the reports they keep the files the
commands write; the tox environment runs the script; the page's bash and Python blocks are the
script's and the sample test's own lines. So the page cannot say one thing while CI tests another.
"""

from __future__ import annotations

import configparser
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "ci.md"
PROJECT = ROOT / "tests" / "user_project"
SCRIPT = PROJECT / "ci.sh"
#: The one workflow step ci.sh leaves out: .ci/run has installed the smlocal under test already.
INSTALL_STEP = "Install smlocal and pytest"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks(language: str, page: Path = PAGE) -> list[str]:
    return [body for lang, body in FENCE.findall(page.read_text()) if lang == language]


def script_lines() -> tuple[dict[str, str], list[str]]:
    """ci.sh's variable defaults (`export NAME="${NAME:-default}"`) and its commands, in order."""
    defaults: dict[str, str] = {}
    commands: list[str] = []
    for line in SCRIPT.read_text().splitlines():
        if not line.strip() or line.startswith(("#", "set ", "cd ")):
            continue
        exported = re.fullmatch(r'export (\w+)="\$\{\1:-(.*)\}"', line)
        if exported:
            defaults[exported[1]] = exported[2]
        else:
            commands.append(line)
    return defaults, commands


def reports(commands: list[str]) -> set[str]:
    """The JUnit files the commands write (smlocal check --junit FILE, pytest --junitxml=FILE)."""
    found: set[str] = set()
    for command in commands:
        words = shlex.split(command)
        for i, word in enumerate(words):
            if word == "--junit":
                found.add(words[i + 1])
            elif word.startswith("--junitxml="):
                found.add(word.split("=", 1)[1])
    return found


def workflow(kind: str, page: Path = PAGE) -> dict[str, Any]:
    docs = [yaml.safe_load(body) for body in blocks("yaml", page)]
    github = [d for d in docs if "jobs" in d]
    gitlab = [d for d in docs if "jobs" not in d]
    assert len(github) == 1 and len(gitlab) == 1, "docs/ci.md has one GitHub and one GitLab YAML block"
    return github[0] if kind == "github" else gitlab[0]


def test_the_script_is_what_the_sample_project_runs() -> None:
    defaults, commands = script_lines()
    assert defaults == {"IMAGE": "my-model:ci", "BASE_IMAGE": "python:3.11-slim"}
    assert [c.split()[0] for c in commands] == ["tar", "docker", "smlocal", "python3"]
    assert commands[2].startswith('smlocal check "$IMAGE" ') and "--junit" in commands[2]
    assert reports(commands) == {"smlocal-check.xml", "pytest-report.xml"}
    assert SCRIPT.stat().st_mode & 0o111 and (PROJECT / "serve").stat().st_mode & 0o111


def check_github(page: Path) -> None:
    defaults, commands = script_lines()
    (job,) = workflow("github", page)["jobs"].values()
    assert job["runs-on"].startswith("ubuntu-")  # Docker is there on GitHub's Ubuntu runners
    assert job["env"] == defaults
    steps = job["steps"]
    runs = [s["run"] for s in steps if "run" in s and s.get("name") != INSTALL_STEP]
    assert runs == commands
    install = next(s for s in steps if s.get("name") == INSTALL_STEP)
    assert install["run"] == "python3 -m pip install smlocal pytest"
    assert steps.index(install) < steps.index(next(s for s in steps if s.get("run") == commands[0]))
    uploads = [s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert {u["with"]["path"] for u in uploads} == reports(commands)
    assert all(u.get("if") == "always()" for u in uploads), "reports are kept when the gate fails"
    gate = next(s for s in steps if s.get("run") == commands[2])
    gate_report = next(u for u in uploads if u["with"]["path"] == "smlocal-check.xml")
    tests = next(s for s in steps if s.get("run") == commands[3])
    assert steps.index(gate) < steps.index(gate_report) < steps.index(tests)


def check_gitlab(page: Path) -> None:
    defaults, commands = script_lines()
    (job,) = workflow("gitlab", page).values()
    assert job["variables"] == defaults
    assert job["script"] == commands
    assert job["before_script"][-1] == "python3 -m pip install smlocal pytest"
    assert job["artifacts"]["when"] == "always"
    assert set(job["artifacts"]["reports"]["junit"]) == reports(commands)


def test_the_github_workflow_runs_the_script_in_its_order_and_keeps_the_reports() -> None:
    check_github(PAGE)


def test_the_gitlab_job_runs_the_script_and_reports_junit_even_on_failure() -> None:
    check_gitlab(PAGE)


def test_the_tox_environment_runs_the_script() -> None:
    (ini,) = blocks("ini")
    parser = configparser.ConfigParser()
    parser.read_string(ini)
    env = parser["testenv:smlocal"]
    assert env["commands"].strip() == "bash ci.sh"
    assert env["allowlist_externals"].strip() == "bash"
    assert set(env["deps"].split()) == {"smlocal", "pytest"}
    passed = {name.strip() for name in env["passenv"].split(",")}
    assert set(script_lines()[0]) | {"DOCKER_HOST"} <= passed


def test_the_pages_shell_and_python_blocks_are_the_files_own_lines() -> None:
    (bash,) = blocks("bash")
    defaults, commands = script_lines()
    expected = [f'export {k}="${{{k}:-{v}}}"' for k, v in defaults.items()] + commands
    assert [line for line in bash.splitlines() if line.strip()] == expected
    (python,) = blocks("python")
    sample = {line.strip() for line in (PROJECT / "tests" / "test_model.py").read_text().splitlines()}
    missing = [line for line in python.splitlines() if line.strip() and line.strip() not in sample]
    assert missing == []


@pytest.mark.parametrize(
    ("old", "new", "check"),
    [
        ('-t "$IMAGE" .\n      - name', '-t "$IMAGE" --pull .\n      - name', check_github),  # a run: step
        ("        if: always()\n", "", check_github),  # the contract report lost when the gate fails
        ("    when: always\n", "    when: on_success\n", check_gitlab),
        ("junit: [smlocal-check.xml, ", "junit: [", check_gitlab),
        ("    - python3 -m pytest --junitxml=pytest-report.xml\n  artifacts", "  artifacts", check_gitlab),
    ],
)
def test_a_drifted_page_is_caught(old: str, new: str, check: Any, tmp_path: Path) -> None:
    """The checks can fail: each edit of a copy of the page breaks the check of its recipe."""
    page = PAGE.read_text()
    assert old in page
    drifted = tmp_path / "ci.md"
    drifted.write_text(page.replace(old, new, 1))
    check(PAGE)  # the page itself passes
    with pytest.raises(AssertionError):
        check(drifted)
