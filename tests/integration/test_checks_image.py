"""The image.* contract checks: each FAILS on its broken twin (tests/fixtures/twins/image.*) and
PASSES on the good echo image. image.size has no twin image: a lowered limit makes it fail under
--profile serverless and warn otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from contract_tests.check_config import SERVERLESS_IMAGE_LIMIT_BYTES, parse_size
from contract_tests.result import CheckResult, Outcome

pytestmark = pytest.mark.docker

RunOne = Callable[..., CheckResult]
TwinImage = Callable[[str], str]
ROOT = Path(__file__).parents[2]


def _failed(result: CheckResult, check_id: str) -> str:
    assert result.id == check_id
    assert result.outcome is Outcome.FAILED, f"{result.outcome}: {result.message}"
    return result.message


def _passed(result: CheckResult, check_id: str) -> str:
    assert result.id == check_id
    assert result.outcome is Outcome.PASSED, f"{result.outcome}: {result.message} {result.evidence}"
    return result.message


class TestExecForm:
    def test_shell_form_entrypoint_fails(self, run_one: RunOne, twin_image: TwinImage) -> None:
        result = run_one("image.exec-form", twin_image("image.exec-form"))
        message = _failed(result, "image.exec-form")
        assert '["/bin/sh", "-c", "python3 -u /opt/program/server.py"]' in message
        assert "shell form" in message
        # the fix names the exec form of the same command
        assert '["python3", "-u", "/opt/program/server.py"]' in message
        assert result.evidence["entrypoint"] == ["/bin/sh", "-c", "python3 -u /opt/program/server.py"]

    def test_good_image_passes_with_server_as_pid1(self, run_one: RunOne, echo_image: str) -> None:
        result = run_one("image.exec-form", echo_image)
        message = _passed(result, "image.exec-form")
        assert result.evidence["pid1"] == "python3 -u /opt/program/server.py serve"
        assert "PID 1 is `python3 -u /opt/program/server.py serve`" in message
        assert result.warnings == ()

    def test_exec_form_wrapper_leaving_a_shell_as_pid1_fails(
        self, run_one: RunOne, twin_image: TwinImage
    ) -> None:
        """The run-time half: exec-form ENTRYPOINT, but PID 1 of the running container is `sh -c`."""
        result = run_one("image.exec-form", twin_image("image.exec-form.shell-pid1"))
        message = _failed(result, "image.exec-form")
        pid1 = result.evidence["pid1"]
        assert pid1.startswith("/bin/sh -c python3 -u /opt/program/server.py")
        assert f"`{pid1}`" in message
        assert "PID 1" in message

    def test_no_entrypoint_and_no_serve_on_path_fails(self, run_one: RunOne, twin_image: TwinImage) -> None:
        result = run_one("image.exec-form", twin_image("image.exec-form.no-serve"))
        message = _failed(result, "image.exec-form")
        assert "no ENTRYPOINT" in message
        assert "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" in message

    def test_no_entrypoint_and_serve_on_path_passes(self, run_one: RunOne, twin_image: TwinImage) -> None:
        result = run_one("image.exec-form", twin_image("image.exec-form.serve-on-path"))
        message = _passed(result, "image.exec-form")
        assert "/usr/local/bin/serve" in message
        assert result.evidence["pid1"] == "python3 -u /opt/program/server.py serve"


class TestNoTini:
    def test_tini_entrypoint_fails(self, run_one: RunOne, twin_image: TwinImage) -> None:
        message = _failed(run_one("image.no-tini", twin_image("image.no-tini")), "image.no-tini")
        assert "/usr/bin/tini" in message
        assert '["/usr/bin/tini", "--", "python3", "-u", "/opt/program/server.py"]' in message

    def test_good_image_passes(self, run_one: RunOne, echo_image: str) -> None:
        message = _passed(run_one("image.no-tini", echo_image), "image.no-tini")
        assert "`python3`" in message


class TestRoot:
    def test_non_root_user_fails(self, run_one: RunOne, twin_image: TwinImage) -> None:
        result = run_one("image.root", twin_image("image.root"))
        message = _failed(result, "image.root")
        assert "'nobody'" in message
        assert "USER root" in message
        assert result.evidence["user"] == "nobody"

    def test_good_image_passes(self, run_one: RunOne, echo_image: str) -> None:
        assert "root" in _passed(run_one("image.root", echo_image), "image.root")


class TestNoNvidiaDriver:
    def test_bundled_driver_fails(self, run_one: RunOne, twin_image: TwinImage) -> None:
        result = run_one("image.no-nvidia-driver", twin_image("image.no-nvidia-driver"))
        message = _failed(result, "image.no-nvidia-driver")
        assert "2 NVIDIA driver file(s)" in message
        assert "/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05" in message
        assert "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1" in message
        # the toolkit library, its link stub and the forward-compat package are allowed
        assert sorted(result.evidence["driver_files"]) == [
            "/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05",
            "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
        ]

    def test_good_image_passes(self, run_one: RunOne, echo_image: str) -> None:
        _passed(run_one("image.no-nvidia-driver", echo_image), "image.no-nvidia-driver")


class TestSize:
    """image.size FAILS over its limit under the serverless profile (SageMaker serverless refuses such
    images) and warns under realtime: its twin is a lowered limit on the echo image."""

    def test_over_the_limit_under_the_serverless_profile_fails(
        self, run_one: RunOne, echo_image: str
    ) -> None:
        result = run_one("image.size", echo_image, image_size_limit_bytes=1024, profile="serverless")
        message = _failed(result, "image.size")
        size = result.evidence["size_bytes"]
        assert size > 1024
        assert message.startswith(
            f"image size {size / 1024**2:.2f} MB ({size} bytes) is over the configured limit "
            "(--image-size-limit; SageMaker serverless' own is 10.00 GB) of 1.00 KB (1024 bytes), and this "
            "run checks a serverless deployment (--profile serverless): SageMaker serverless inference "
            "refuses container images over 10.00 GB."
        )
        assert result.evidence["limit_bytes"] == 1024 and result.evidence["profile"] == "serverless"

    def test_over_the_limit_under_the_realtime_profile_warns(self, run_one: RunOne, echo_image: str) -> None:
        result = run_one("image.size", echo_image, image_size_limit_bytes=1024)
        message = _passed(result, "image.size")
        size = result.evidence["size_bytes"]
        assert f"({size} bytes) is over the configured limit" in message
        assert message.endswith("(a warning under the realtime profile)")
        (warning,) = result.warnings
        assert f"({size} bytes)" in warning and "1024 bytes" in warning
        assert "real-time endpoints set no image size limit" in warning
        assert "--profile serverless makes this a failure" in warning

    def test_good_image_passes_without_warning(self, run_one: RunOne, echo_image: str) -> None:
        for profile in ("realtime", "serverless"):
            result = run_one("image.size", echo_image, profile=profile)
            message = _passed(result, "image.size")
            assert result.warnings == ()
            assert f"({result.evidence['size_bytes']} bytes)" in message
            assert "within SageMaker serverless inference's limit of 10.00 GB" in message

    def test_the_cli_limit_and_profile_fail_it(self, echo_image: str, tmp_path: Path) -> None:
        out = tmp_path / "report.json"
        cli = [sys.executable, "-m", "contract_tests.cli", echo_image, "--check", "image.size"]
        done = subprocess.run(
            [*cli, "--profile", "serverless", "--image-size-limit", "1MB", "--json", str(out)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 1, done.stdout + done.stderr
        (result,) = json.loads(out.read_text())["results"]
        assert result["outcome"] == "failed" and result["evidence"]["limit_bytes"] == 1024**2
        assert "of 1.00 MB (1048576 bytes), and this run checks a serverless deployment" in result["message"]
        warned = subprocess.run(
            [*cli, "--image-size-limit", "1MB"], capture_output=True, text=True, timeout=120
        )
        assert warned.returncode == 0, warned.stdout + warned.stderr
        bad = subprocess.run([*cli, "--image-size-limit", "ten"], capture_output=True, text=True, timeout=120)
        assert bad.returncode == 2
        assert "smlocal check: --image-size-limit: not a size: 'ten' (e.g. 10GB, 500MB, 2048)" in bad.stderr


def test_parse_size() -> None:
    assert parse_size("10GB") == 10 * 1024**3 == SERVERLESS_IMAGE_LIMIT_BYTES
    assert parse_size("500MB") == parse_size("500m") == parse_size("500 MiB") == 500 * 1024**2
    assert parse_size("1.5GiB") == 1536 * 1024**2 and parse_size("2048") == parse_size("2k") == 2048
    for bad in ("", "GB", "ten", "-1GB", "10XB", "1e3", "10bb", "0"):
        with pytest.raises(ValueError):
            parse_size(bad)


def test_the_pytest_plugin_takes_the_profile_and_limit(echo_image: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPATH": str(ROOT)}
    base = [sys.executable, "-m", "pytest", "-p", "contract_tests.plugin", "-p", "no:cacheprovider", "-v"]
    base += ["--sagemaker-image", echo_image, "-k", "image.size"]
    run = subprocess.run(
        [*base, "--sagemaker-profile", "serverless", "--sagemaker-image-size-limit", "1MB"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "smlocal-contract::image.size FAILED" in run.stdout
    assert "of 1.00 MB (1048576 bytes), and this run checks a serverless deployment" in run.stdout
