"""constraints.txt is what every install of this repository uses, and it pins everything that install
brings: the README's commands, .ci/run and tox install with it; each requirement of pyproject.toml (all
extras) and everything installed beneath them is pinned, within pyproject's ranges; under CI the suite
runs on exactly those releases. The client envs' locks pin their clients as .ci/clients/NAME.txt does.
(A fresh venv gave 3 failures and 2 errors on the README's command when releases moved: docs/ci.md.)"""

from __future__ import annotations

import configparser
import os
import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
CONSTRAINTS = ROOT / "constraints.txt"
CLIENTS = ROOT / ".ci" / "clients"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)$")


def pins(path: Path) -> dict[NormalizedName, str]:
    found: dict[NormalizedName, str] = {}
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        match = PIN.match(line.strip())
        assert match, f"{path.name}: not an exact pin: {line!r}"
        found[canonicalize_name(match[1])] = match[2]
    return found


def project_requirements(extras: tuple[str, ...] | None = None) -> list[Requirement]:
    """pyproject.toml's dependencies and those of `extras` (default: every extra)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    listed = list(project["dependencies"])
    optional = project["optional-dependencies"]
    wanted = list(optional) if extras is None else list(extras)
    for extra in wanted:  # an extra may name others: "smlocal[testcontainers]"
        for r in optional[extra]:
            if r.startswith("smlocal"):
                wanted.extend(e for e in Requirement(r).extras if e not in wanted)
            else:
                listed.append(r)
    return [Requirement(r) for r in listed]


def _applies(req: Requirement, extras: set[str]) -> bool:
    if req.marker is None:
        return True
    return any(req.marker.evaluate({"extra": extra}) for extra in extras or {""})


def installed_closure(roots: list[Requirement]) -> dict[NormalizedName, str]:
    """The installed distributions these requirements bring (markers and extras followed): name ->
    installed version. Requirements that are not installed here are left out (a dev tool in CI)."""
    seen: dict[NormalizedName, str] = {}
    todo = [(r, set(r.extras)) for r in roots if _applies(r, set())]
    while todo:
        req, extras = todo.pop()
        name = canonicalize_name(req.name)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        if name in seen and not extras:
            continue
        seen[name] = dist.version
        for text in dist.requires or []:
            sub = Requirement(text)
            if _applies(sub, extras):
                todo.append((sub, set(sub.extras)))
    return seen


def test_every_install_command_uses_the_constraints() -> None:
    readme = [line for line in (ROOT / "README.md").read_text().splitlines() if "pip install -e" in line]
    readme += [line for line in (ROOT / "README.md").read_text().splitlines() if "pip install -c" in line]
    assert readme and all("-c constraints.txt" in line for line in readme), readme
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if "pip install" in line]
    assert ci and all("-c constraints.txt" in line for line in ci), ci
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    assert tox["testenv"]["setenv"].split("=", 1) == ["PIP_CONSTRAINT ", " {toxinidir}/constraints.txt"]


def test_each_requirement_of_pyproject_is_pinned_within_its_range() -> None:
    pinned = pins(CONSTRAINTS)
    for req in project_requirements():
        name = canonicalize_name(req.name)
        assert name in pinned, f"{req.name} is not in constraints.txt: bash .ci/refresh-constraints"
        assert req.specifier.contains(pinned[name], prereleases=True), (req, pinned[name])
    assert pinned[canonicalize_name("torch")] == "2.13.0"  # the CPU wheel's release, no local label


def test_everything_installed_beneath_them_is_pinned() -> None:
    pinned = pins(CONSTRAINTS)
    missing = sorted(set(installed_closure(project_requirements())) - set(pinned))
    assert missing == [], f"installed by smlocal's requirements, not pinned: {missing}"


@pytest.mark.skipif(not os.environ.get("CI"), reason="CI installs with the constraints (.ci/run)")
def test_under_ci_the_suite_runs_on_the_pinned_releases() -> None:
    pinned = pins(CONSTRAINTS)
    drifted = {  # what .ci/run installs: the test and sample extras
        name: (version, pinned.get(name))
        for name, version in installed_closure(project_requirements(("test", "sample"))).items()
        if pinned.get(name) not in (version, version.split("+")[0])
    }
    assert drifted == {}, f"installed (version, pin): {drifted}"


@pytest.mark.parametrize("client", sorted(p.stem for p in CLIENTS.glob("*.txt") if p.stem != "constraints"))
def test_each_client_env_has_a_lock_that_pins_its_client_and_no_torch(client: str) -> None:
    lock = pins(CLIENTS / f"{client}.lock")
    for line in (CLIENTS / f"{client}.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            match = PIN.match(line.strip())
            assert match, line
            assert lock.get(canonicalize_name(match[1])) == match[2], (client, line)
    assert "torch" not in lock
