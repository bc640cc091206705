"""The layer rules of pyproject.toml's [tool.importlinter] contracts hold, and they can fail.

`lint-imports` reads the contracts from pyproject.toml and the packages from the import path; the second
test runs it on a copy of the tree with one import that breaks a rule (emulator.model reaching into
hosting), so a contract that cannot fail would show here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}  # the tree at `root`, not an installed copy
    return subprocess.run(
        [sys.executable, "-c", LINT, "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_the_layer_contracts_are_kept() -> None:
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_a_deliberate_violation_breaks_them(tmp_path: Path) -> None:
    for package in ("emulator", "contract_tests"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "emulator" / "model" / "violation.py").write_text("import emulator.hosting.service\n")
    done = lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "model imports nothing but model, errors and config BROKEN" in done.stdout
    assert "emulator.model.violation -> emulator.hosting.service" in done.stdout
