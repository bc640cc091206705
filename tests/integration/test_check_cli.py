"""`smlocal check` and the pytest plugin end to end: real processes against the good image and a twin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import docker
import pytest

from contract_tests import report
from contract_tests.registry import all_checks
from emulator.runtime import labels

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
#: Two cheap checks: an image inspection and the shared container's start.
CHEAP = ("image.root", "start.healthy")


def smlocal_check(*args: str, cwd: Path, columns: int = 200) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run `smlocal check ARGS`; returns the finished process and its pid (the containers' owner label)."""
    env = {**os.environ, "COLUMNS": str(columns), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "emulator.cli", "check", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=env,
    )
    out, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), proc.pid


def assert_no_containers_left(client: docker.DockerClient, pid: int) -> None:
    left = client.containers.list(all=True, filters={"label": f"{labels.OWNER}=check-{pid}"})
    assert not left, f"smlocal check left containers: {[c.name for c in left]}"


def test_check_good_image_fits_one_screen_and_writes_complete_reports(
    echo_image: str, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    """Every check on the good image (issue 24 item 6): a passing run prints at most 40 lines at CI's
    width, the multi-models note once; the JSON and JUnit reports still list each check's own status."""
    run, pid = smlocal_check(
        echo_image,
        "--startup-timeout",
        "30",
        "--json",
        "out.json",
        "--junit",
        "out.xml",
        cwd=tmp_path,
        columns=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) <= 40, run.stdout  # 246 before
    assert max(len(line) for line in lines) <= 120, run.stdout
    assert run.stdout.count("capabilities.multi-models=true, so it cannot serve") == 1, run.stdout
    assert "mme.* (8 checks): the image has no label" in run.stdout
    assert "✓ image " in run.stdout and "skipped: bind-to-port" in run.stdout
    assert_no_containers_left(docker_engine, pid)

    document = json.loads((tmp_path / "out.json").read_text())
    data = document["results"]
    assert lines[-3] == document["summary"] and document["exit_code"] == 0  # then the two reports
    assert [d["id"] for d in data] == [c.id for c in all_checks()]
    outcomes = {d["id"]: d["outcome"] for d in data}
    assert outcomes["image.root"] == outcomes["start.healthy"] == "passed"
    mme = [d for d in data if d["id"].startswith("mme.")]
    assert len(mme) == 8 and all(d["outcome"] == "skipped" and "multi-models" in d["message"] for d in mme)
    for d in data:
        assert d["doc_url"] == f"docs/contract.md#{d['id'].replace('.', '-')}"
        assert d["title"] and d["message"] and d["duration_s"] >= 0 and d["warnings"] == []

    suite = ET.parse(tmp_path / "out.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("name") == "smlocal-contract"
    counts = document["counts"]
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == (
        str(len(data)),
        "0",
        "0",
        str(counts["skipped"]),
    )
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert list(cases) == [d["id"] for d in data]
    assert cases["image.root"].get("classname") == "image" and cases["image.root"].find("skipped") is None
    skipped = cases["mme.load"].find("skipped")
    assert skipped is not None and skipped.get("message") == next(
        d["message"] for d in mme if d["id"] == "mme.load"
    )


def test_check_twin_exits_1_with_the_failure_in_every_report(
    twin_image: Callable[[str], str], docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    image = twin_image("image.root")
    run, pid = smlocal_check(
        image, "--check", "image", "--json", "out.json", "--junit", "out.xml", cwd=tmp_path
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "FAILED" in run.stdout and "docs/contract.md#image-root" in run.stdout
    assert_no_containers_left(docker_engine, pid)
    data = {d["id"]: d for d in json.loads((tmp_path / "out.json").read_text())["results"]}
    assert data["image.root"]["outcome"] == "failed"
    # the console keeps the finding whole (a table cell wraps it: read the cells' text in order)
    cells = " ".join(run.stdout.replace("│", " ").split())
    seen, _ = report.split_fix(data["image.root"]["message"])
    assert " ".join(seen.split()) in cells and " ".join(data["image.root"]["fix"].split()) in cells, (
        run.stdout
    )
    assert "✗ image " in run.stdout and "✗ image.root" in run.stdout  # the group's line, then the check's
    failure = next(
        c for c in ET.parse(tmp_path / "out.xml").getroot().iter("testcase") if c.get("name") == "image.root"
    ).find("failure")
    assert failure is not None and failure.get("message") == data["image.root"]["message"].splitlines()[0]


def test_unknown_check_id_exits_2(echo_image: str, tmp_path: Path) -> None:
    run, _ = smlocal_check(echo_image, "--check", "start.nonsense", cwd=tmp_path)
    assert run.returncode == 2
    assert "unknown check id(s) start.nonsense" in run.stderr and "start.healthy" in run.stderr


def test_missing_image_exits_2_with_a_clear_message(
    docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    run, _ = smlocal_check("smlocal-test/does-not-exist:nope", "--json", "out.json", cwd=tmp_path)
    assert run.returncode == 2
    assert "image smlocal-test/does-not-exist:nope not found locally" in run.stderr
    assert "Traceback" not in run.stderr and not (tmp_path / "out.json").exists()


def test_pytest_plugin_runs_checks_as_items(
    echo_image: str, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "contract_tests.plugin", "-p", "no:cacheprovider"]
        + ["--sagemaker-image", echo_image, "--sagemaker-startup-timeout", "30", "-v"]
        + ["-k", " or ".join(CHEAP)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    for check_id in CHEAP:
        assert f"smlocal-contract::{check_id} PASSED" in run.stdout
    assert " 2 passed, " in run.stdout and " deselected" in run.stdout


def test_pytest_plugin_items_keep_their_names_from_another_folder(
    twin_image: Callable[[str], str], docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    """Run from a sub-folder of a project whose pytest settings make the rootdir (issue 24 item 13): the
    items read `smlocal-contract::<check id>` in every line pytest prints, not `../../smlocal-contract`."""
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    here = tmp_path / "tests" / "contract"
    here.mkdir(parents=True)
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    base = [sys.executable, "-m", "pytest", "-p", "contract_tests.plugin", "-p", "no:cacheprovider"]
    base += ["--sagemaker-image", twin_image("image.root"), "-k", "image.root or image.no-tini or mme.load"]
    outputs = {}
    for mode in ("--collect-only -q", "-rA", "-rA -vv"):
        run = subprocess.run(
            [*base, *mode.split()], capture_output=True, text=True, cwd=here, env=env, timeout=300
        )
        assert f"rootdir: {tmp_path}" in run.stdout or mode.startswith("--collect"), run.stdout
        assert "../" not in run.stdout, run.stdout
        outputs[mode] = run.stdout
    assert outputs["--collect-only -q"].splitlines()[:3] == [
        "smlocal-contract::image.no-tini",
        "smlocal-contract::image.root",
        "smlocal-contract::mme.load",
    ]
    quiet = outputs["-rA"]
    assert "\nsmlocal-contract .Fs" in quiet  # the progress line
    assert "\nPASSED smlocal-contract::image.no-tini\n" in quiet
    assert "\nFAILED smlocal-contract::image.root - Fix: " in quiet
    assert "\nSKIPPED [1] smlocal-contract:1: mme.load: the image has no label" in quiet
    verbose = outputs["-rA -vv"]
    assert "\nsmlocal-contract::image.root FAILED" in verbose and " <- " not in verbose
    assert "\nsmlocal-contract::mme.load SKIPPED" in verbose


# --- an image that serves nothing (every invocation answers 500) is never green ----------------------


def test_check_an_image_answering_500_with_payload_exits_1(
    twin_image: Callable[[str], str], docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    (tmp_path / "in.json").write_text('{"instances": [1]}')
    (tmp_path / "in.csv").write_text("1,2\n")
    image = twin_image("invocations.serves")
    run, pid = smlocal_check(
        image,
        "--payload", "in.json",
        "--payload", "in.csv", "--content-type", "text/csv", "--accept", "text/csv",
        "--json", "out.json",
        cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr
    assert_no_containers_left(docker_engine, pid)
    data = {d["id"]: d for d in json.loads((tmp_path / "out.json").read_text())["results"]}
    serves = data["invocations.serves"]
    assert serves["outcome"] == "failed", serves
    assert serves["message"].startswith(
        "no invocation succeeded: POST /invocations with --payload in.json (18 bytes, application/json): HTTP 500"
    )
    assert "--payload in.csv (4 bytes, text/csv, Accept text/csv): HTTP 500" in serves["message"]
    assert [a["status"] for a in serves["evidence"]["answers"]] == [500, 500]
    assert "1 failed" in run.stdout and "invocations.serves" in run.stdout


def test_check_an_image_answering_500_without_payload_warns_in_the_summary(
    twin_image: Callable[[str], str], docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    run, pid = smlocal_check(twin_image("invocations.serves"), "--json", "out.json", cwd=tmp_path)
    assert_no_containers_left(docker_engine, pid)
    summary = run.stdout.strip().splitlines()[-2]  # the last line names the JSON report
    assert summary.endswith(
        "; warning: no successful invocation: the model's serving was not verified; give --payload"
    ), run.stdout
    data = {d["id"]: d for d in json.loads((tmp_path / "out.json").read_text())["results"]}
    assert data["invocations.serves"]["headline_warnings"] == [
        "no successful invocation: the model's serving was not verified; give --payload"
    ]
    assert " passed" in summary and run.returncode == 0  # a warning: SageMaker itself would accept the image


def test_pytest_plugin_takes_payloads(
    twin_image: Callable[[str], str], docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    (tmp_path / "in.csv").write_text("1,2\n")
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "contract_tests.plugin", "-p", "no:cacheprovider"]
        + ["--sagemaker-image", twin_image("invocations.serves"), "--sagemaker-startup-timeout", "30"]
        + [
            "--sagemaker-payload",
            "in.csv",
            "--sagemaker-content-type",
            "text/csv",
            "-k",
            "invocations.serves",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert (
        "no invocation succeeded: POST /invocations with --sagemaker-payload in.csv (4 bytes, text/csv)"
        in (run.stdout)
    )
    bad = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "contract_tests.plugin", "-p", "no:cacheprovider"]
        + ["--sagemaker-image", "img:1", "--sagemaker-payload", "/no/such/file"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    assert bad.returncode == 4, bad.stdout + bad.stderr  # pytest's usage error
    assert "--sagemaker-payload /no/such/file: No such file or directory" in bad.stderr
