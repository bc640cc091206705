"""What a user installs (issue 24, items 10 and 13): the quick start's `pip install` brings what its
example imports, importing SageMakerContainer without it says what to install, and nothing a user
installs loads a pytest plugin besides smlocal's (pytest-asyncio's warns in every project that does not
set its loop scope)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from dataclasses import fields
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from contract_tests.containers import MISSING_TESTCONTAINERS
from emulator.runtime.base import ContainerState
from tests.unit.test_constraints import installed_closure

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "docs" / "quickstart-testcontainers.md"


def extras() -> dict[str, list[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found: dict[str, list[str]] = project["optional-dependencies"]
    return found


def user_requirements(*extra_names: str) -> list[Requirement]:
    """smlocal's dependencies and those of the named extras, as `pip install 'smlocal[...]'` takes them."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    listed = list(project["dependencies"])
    for name in extra_names:
        listed.extend(extras()[name])
    return [Requirement(r) for r in listed]


def test_the_quick_start_installs_the_extra_that_brings_testcontainers() -> None:
    (line,) = [ln for ln in QUICKSTART.read_text().splitlines() if ln.startswith("pip install")]
    match = re.fullmatch(r"pip install 'smlocal\[(\w+)\]'\s+#.*", line)
    assert match, line
    names = {canonicalize_name(Requirement(r).name) for r in extras()[match[1]]}
    assert "testcontainers" in names
    # the error a user meets without it names the same command
    assert MISSING_TESTCONTAINERS.endswith(f"pip install 'smlocal[{match[1]}]'")


def test_importing_sagemaker_container_without_testcontainers_says_what_to_install() -> None:
    hide = "import sys; sys.modules['testcontainers'] = None; import contract_tests.containers"
    proc = subprocess.run(
        [sys.executable, "-c", hide], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == f"ModuleNotFoundError: {MISSING_TESTCONTAINERS}"
    assert MISSING_TESTCONTAINERS == (
        "contract_tests.containers (SageMakerContainer) needs the testcontainers package, which "
        "smlocal installs only with its `testcontainers` extra: pip install 'smlocal[testcontainers]'"
    )
    assert "During handling" not in proc.stderr  # one error, not a chain


def _pytest_plugins(names: set[str]) -> set[str]:
    """The distributions among `names` that register a pytest plugin (a pytest11 entry point)."""
    found = set()
    for name in names:
        eps = metadata.distribution(name).entry_points
        if any(ep.group == "pytest11" for ep in eps):
            found.add(name)
    return found


def test_what_users_install_loads_no_pytest_plugin_but_smlocals() -> None:
    """smlocal, with or without its testcontainers extra: pytest-asyncio (the `test` extra's, this
    repository's own) is not among them, so a user's pytest run prints no loop-scope warning."""
    brought = set(installed_closure(user_requirements("testcontainers")))
    assert "testcontainers" in brought and "docker" in brought
    assert _pytest_plugins(brought) <= {"anyio"}  # anyio's plugin is silent unless a test asks for it
    assert "pytest-asyncio" in set(installed_closure(user_requirements("test")))  # the suite's own


def test_final_states_fields_are_each_documented() -> None:
    """docs/quickstart-testcontainers.md's table and quickstart-pytest.md's paragraph name every field
    of ContainerState (SageMakerContainer.final_state), and no other."""
    table = QUICKSTART.read_text().split("## How it ended: `.final_state` and `.final_logs`", 1)[1]
    table = table.split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `(\w+)` \|", table, re.M))
    assert documented == {f.name for f in fields(ContainerState)}
    pytest_page = (ROOT / "docs" / "quickstart-pytest.md").read_text()
    assert all(f"`{name}`" in pytest_page for name in documented)
