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

import pytest

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
    (tmp_path / "emulator" / "model" / "violation.py").write_text(
        "import emulator.hosting.endpoints.service\n"
    )
    done = lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "model imports nothing but model, errors and config BROKEN" in done.stdout
    assert "emulator.model.violation -> emulator.hosting.endpoints.service" in done.stdout


ROOMS = (
    "hosting's rooms: scaling -> endpoints | monitoring -> multi_model | async_inference | serverless -> fleet "
    "-> executors | state_files BROKEN"
)
VIOLATIONS = [
    # (module added, its import, the contract it breaks, the import line reported)
    (
        "emulator/wire/violation.py",
        "import emulator.runtime.labels\n",
        "wire reaches containers and model data through hosting only BROKEN",
        "emulator.wire.violation -> emulator.runtime.labels",
    ),
    (
        "emulator/hosting/fleet/violation.py",
        "import emulator.hosting.endpoints.service\n",
        ROOMS,
        "emulator.hosting.fleet.violation -> emulator.hosting.endpoints.service",
    ),
    (
        "emulator/hosting/multi_model/violation.py",
        "import emulator.hosting.endpoints.service\n",
        ROOMS,
        "emulator.hosting.multi_model.violation -> emulator.hosting.endpoints.service",
    ),
    (
        "emulator/hosting/serverless/violation.py",
        "import emulator.hosting.endpoints.service\n",
        ROOMS,
        "emulator.hosting.serverless.violation -> emulator.hosting.endpoints.service",
    ),
    (
        "emulator/hosting/monitoring/violation.py",
        "import emulator.hosting.scaling.autoscaler\n",
        ROOMS,
        "emulator.hosting.monitoring.violation -> emulator.hosting.scaling.autoscaler",
    ),
    (
        "contract_tests/violation.py",
        "import emulator.hosting.endpoints.service\n",
        "contract_tests -> runtime and model_data (and model, config, errors) only BROKEN",
        "contract_tests.violation -> emulator.hosting.endpoints.service",
    ),
    (
        "emulator/model_data/violation.py",
        "import emulator.runtime.labels\n",
        "model data imports no higher layer (and not the engine) BROKEN",
        "emulator.model_data.violation -> emulator.runtime.labels",
    ),
    (
        "emulator/runtime/violation.py",
        "import emulator.model_data.store\n",
        "layers: wire -> hosting -> runtime | model_data -> model BROKEN",
        "emulator.runtime.violation -> emulator.model_data.store",
    ),
]


@pytest.mark.parametrize(("path", "line", "contract", "reported"), VIOLATIONS, ids=[v[0] for v in VIOLATIONS])
def test_each_rule_breaks_on_its_violation(
    tmp_path: Path, path: str, line: str, contract: str, reported: str
) -> None:
    for package in ("emulator", "contract_tests"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / path).write_text(line)
    done = lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert " ".join(contract.split()) in " ".join(done.stdout.split())  # the report wraps long names
    assert reported in done.stdout


def test_an_import_circle_breaks_them(tmp_path: Path) -> None:
    """fleet.variants -> fleet.deployer (deployer imports variants): the circle the plan module broke."""
    for package in ("emulator", "contract_tests"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    variants = tmp_path / "emulator" / "hosting" / "fleet" / "variants.py"
    variants.write_text(variants.read_text() + "\nimport emulator.hosting.fleet.deployer  # noqa\n")
    done = lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no import circles BROKEN" in done.stdout
    assert "- .variants -> .deployer (1 import)" in done.stdout  # within emulator.hosting.fleet
