"""The image.* contract checks: each FAILS on its broken twin (tests/fixtures/twins/image.*) and
PASSES on the good echo image. image.size has no twin image: a lowered limit makes it warn."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from contract_tests.result import CheckResult, Outcome

pytestmark = pytest.mark.docker

RunOne = Callable[..., CheckResult]
TwinImage = Callable[[str], str]


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
    """image.size never fails (over 10 GB is a warning by the issue's words): its twin is a lowered limit."""

    def test_over_the_serverless_limit_warns(self, run_one: RunOne, echo_image: str) -> None:
        result = run_one("image.size", echo_image, serverless_image_limit_bytes=1024)
        message = _passed(result, "image.size")
        size = result.evidence["size_bytes"]
        assert size > 1024
        assert f"({size} bytes)" in message
        (warning,) = result.warnings
        assert f"({size} bytes)" in warning
        assert "serverless" in warning and "1024 bytes" in warning

    def test_good_image_passes_without_warning(self, run_one: RunOne, echo_image: str) -> None:
        result = run_one("image.size", echo_image)
        message = _passed(result, "image.size")
        assert result.warnings == ()
        assert f"({result.evidence['size_bytes']} bytes)" in message
        assert "within the serverless limit of 10.00 GB" in message
