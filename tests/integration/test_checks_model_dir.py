"""The model-dir.* contract checks.

model-dir.read-only FAILS on its broken twins: tests/fixtures/twins/model-dir.read-only (writes into
/opt/ml/model at start and crashes with EROFS), .silent (writes at start and swallows the error),
.lazy (writes on the first invocation inside try/except OSError: pass), .reworded (crashes on the
write with its own words); a server that logs the EROFS failure but stays healthy fails too; the good
echo image PASSES. model-dir.image-files warns on tests/fixtures/twins/model-dir.image-files (code and
weights baked under /opt/ml/model) and passes the echo image without a warning.
"""

from __future__ import annotations

import os
import shutil
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

import docker
import pytest

from contract_tests.check_config import CheckConfig
from contract_tests.checks import write_probe
from contract_tests.checks.model_dir import erofs_lines, shadowed
from contract_tests.checks.write_probe import changes, overlay_changes, snapshot
from contract_tests.registry import select
from contract_tests.result import CAUSE_CONTAINER_REMOVED, CheckResult, Outcome
from contract_tests.runner import removed_message, run_checks
from contract_tests.target import Target
from emulator.runtime import labels
from emulator.runtime.images import build_image
from tests.fixtures.twins import FAST_LIMITS

pytestmark = pytest.mark.docker

RunOne = Callable[..., CheckResult]
TwinImage = Callable[[str], str]

CHECK = "model-dir.read-only"
EROFS_LINE = "OSError: [Errno 30] Read-only file system: '/opt/ml/model/compiled-cache.bin'"


def test_twin_writing_the_model_dir_fails_with_the_log_line(run_one: RunOne, twin_image: TwinImage) -> None:
    result = run_one(CHECK, twin_image(CHECK))
    assert result.id == CHECK
    assert result.outcome is Outcome.FAILED, f"{result.outcome}: {result.message}"
    message = result.message
    assert "exited with code 1 during startup" in message
    assert f"`{EROFS_LINE}`" in message  # the log line, quoted
    assert "/opt/ml/model" in message and "read-only" in message
    assert "Fix: Do not write to /opt/ml/model" in message
    assert result.evidence["exit_code"] == 1
    assert result.evidence["erofs_lines"] == [EROFS_LINE]


def test_good_image_passes(run_one: RunOne, echo_image: str) -> None:
    result = run_one(CHECK, echo_image)
    assert result.id == CHECK
    assert result.outcome is Outcome.PASSED, f"{result.outcome}: {result.message}"
    assert "read-only" in result.message
    assert "a container with a writable overlay of it started, answered one invocation (HTTP 200) and " in (
        result.message
    )
    assert result.evidence["probe_healthy"] is True and result.evidence["probe_changes"] == []
    assert result.warnings == ()


def test_twin_swallowing_the_write_error_at_start_fails(run_one: RunOne, twin_image: TwinImage) -> None:
    result = run_one(CHECK, twin_image("model-dir.read-only.silent"))
    assert result.outcome is Outcome.FAILED, f"{result.outcome}: {result.message}"
    assert result.message.startswith(
        "the container writes to /opt/ml/model, which SageMaker mounts read-only: a container given a "
        "writable overlay of it created /opt/ml/model/.ready (file) (during startup and one invocation, "
        "HTTP 200)."
    )
    assert "Its logs report" not in result.message  # nothing in the logs: the probe alone saw it
    assert "Fix: Do not write to /opt/ml/model" in result.message
    assert result.evidence["probe_changes"] == ["created /opt/ml/model/.ready (file)"]
    assert result.evidence["erofs_lines"] == []


def test_twin_writing_silently_on_the_first_invocation_fails(run_one: RunOne, twin_image: TwinImage) -> None:
    result = run_one(CHECK, twin_image("model-dir.read-only.lazy"))
    assert result.outcome is Outcome.FAILED, f"{result.outcome}: {result.message}"
    assert "created /opt/ml/model/compiled-cache.bin (file)" in result.message
    assert "(during startup and one invocation, HTTP 200)" in result.message
    assert result.evidence["probe_changes"] == ["created /opt/ml/model/compiled-cache.bin (file)"]


def test_twin_crashing_on_the_write_in_its_own_words_fails(run_one: RunOne, twin_image: TwinImage) -> None:
    result = run_one(CHECK, twin_image("model-dir.read-only.reworded"))
    assert result.outcome is Outcome.FAILED, f"{result.outcome}: {result.message}"
    assert result.message.startswith(
        "the container exited with code 1 during startup with /opt/ml/model read-only, but with a "
        "writable overlay of it the container became healthy and wrote there: created "
        "/opt/ml/model/cache.bin (file)."
    )
    assert "startup: cannot create the model cache" in result.evidence["log_tail"]


def test_a_start_failure_of_another_kind_is_skipped(run_one: RunOne, echo_image: str) -> None:
    result = run_one(CHECK, echo_image, environment={"EXIT_AT_START": "4"})
    assert result.outcome is Outcome.SKIPPED, f"{result.outcome}: {result.message}"
    assert "exited with code 4" in result.message and "start." in result.message


LOGGING_DOCKERFILE = """\
ARG ECHO_IMAGE
FROM ${ECHO_IMAGE}
ENTRYPOINT ["/bin/sh", "-c", "touch /opt/ml/model/cache.bin || true; exec python3 -u /opt/program/server.py \\"$@\\"", "sh"]
"""


def test_healthy_container_that_logged_erofs_on_the_model_dir_fails(
    run_one: RunOne, echo_image: str, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    # A server that tries to write into /opt/ml/model, logs the failure and serves anyway.
    (tmp_path / "Dockerfile").write_text(LOGGING_DOCKERFILE)
    tag = "smlocal-twin/model-dir.read-only-logged:latest"
    build_image(tmp_path, tag, buildargs={"ECHO_IMAGE": echo_image}, client=docker_engine)
    result = run_one(CHECK, tag)
    assert result.outcome is Outcome.FAILED, f"{result.outcome}: {result.message}"
    line = "touch: cannot touch '/opt/ml/model/cache.bin': Read-only file system"
    assert "created /opt/ml/model/cache.bin (file)" in result.message  # the probe saw the write
    assert f"Its logs report: `{line}`" in result.message  # and the log line backs it up
    assert result.evidence["erofs_lines"] == [line]


def test_erofs_lines() -> None:
    logs = f"echo: starting\nTraceback (most recent call last):\n{EROFS_LINE}\nmkdir: /tmp: Read-only file system\n"
    assert erofs_lines(logs) == [EROFS_LINE, "mkdir: /tmp: Read-only file system"]
    assert erofs_lines(logs, "/opt/ml/model") == [EROFS_LINE]
    assert erofs_lines("all fine\n") == []


def test_changes_names_every_kind_of_write(tmp_path: Path) -> None:
    root = tmp_path / "model"
    (root / "code").mkdir(parents=True)
    (root / "code" / "inference.py").write_text("x")
    (root / "weights.bin").write_bytes(b"w")
    (root / "gone.txt").write_text("g")
    (root / "mode.txt").write_text("m")
    (root / "scratch").mkdir()
    before = snapshot(root)
    assert changes(before, snapshot(root)) == []
    (root / "code" / "cache.pyc").write_bytes(b"c")
    (root / "weights.bin").write_bytes(b"longer weights")
    (root / "gone.txt").unlink()
    (root / "mode.txt").chmod(0o600)
    (root / "scratch" / "lock").write_text("")
    (root / "scratch" / "lock").unlink()
    os.utime(root / "scratch", ns=(1, 1))  # an entry created and removed again moves the folder's mtime
    assert changes(before, snapshot(root)) == [
        "created /opt/ml/model/code/cache.pyc (file)",
        "removed /opt/ml/model/gone.txt",
        "changed the mode of /opt/ml/model/mode.txt (644 -> 600)",
        "created and removed entries in /opt/ml/model/scratch",
        "modified /opt/ml/model/weights.bin (1 -> 14 bytes)",
    ]


def test_shadowed_lists_leaves_under_the_model_dir() -> None:
    paths = [
        "/opt",
        "/opt/ml",
        "/opt/ml/model",
        "/opt/ml/model/code",
        "/opt/ml/model/code/inference.py",
        "/opt/ml/model/a",
        "/opt/ml/model/a-b",
        "/opt/ml/model/a/x",
        "/opt/ml/modelx/y",
        "/opt/program/s.py",
    ]
    assert shadowed(paths) == ["/opt/ml/model/a-b", "/opt/ml/model/a/x", "/opt/ml/model/code/inference.py"]
    assert shadowed(["/opt/ml/model", "/usr/bin/python3"]) == []


class TestImageFiles:
    ID = "model-dir.image-files"

    def test_files_baked_under_the_model_dir_warn_in_the_headline(
        self, run_one: RunOne, twin_image: TwinImage
    ) -> None:
        result = run_one(self.ID, twin_image(self.ID))
        assert result.id == self.ID
        assert result.outcome is Outcome.PASSED, f"{result.outcome}: {result.message}"  # a warning
        assert result.message == (
            "2 path(s) under /opt/ml/model in the image are hidden by the model mount (a warning)"
        )
        (warning,) = result.warnings
        assert result.headline_warnings == (warning,)
        assert warning == (
            "the image ships 2 path(s) under /opt/ml/model, hidden at run time by the model mount: "
            "/opt/ml/model/code/inference.py, /opt/ml/model/model.pth; ship code under /opt/program and "
            "model files in model.tar.gz"
        )
        assert result.evidence["shadowed"] == ["/opt/ml/model/code/inference.py", "/opt/ml/model/model.pth"]

    def test_good_image_passes_without_a_warning(self, run_one: RunOne, echo_image: str) -> None:
        result = run_one(self.ID, echo_image)
        assert result.outcome is Outcome.PASSED, f"{result.outcome}: {result.message}"
        assert result.message == "nothing under /opt/ml/model in the image"
        assert result.warnings == () and result.evidence["shadowed"] == []


def test_the_write_probe_container_removed_by_someone_else_is_one_error(
    echo_image: str, tmp_path: Path, docker_engine: docker.DockerClient
) -> None:
    """The probe's own container, removed mid-probe (docker rm -f), is the run's one ERROR naming it."""
    config = CheckConfig(
        image=echo_image,
        environment={"STARTUP_DELAY_S": "1.5"},  # the probe container waits 1.5 s for its /ping 200
        limits=FAST_LIMITS,
        cache_dir=tmp_path / "check",
    )
    target = Target(config)
    target.startup()  # the shared container, healthy: the probe is the next container started
    removed: list[str] = []

    def remove_the_probe() -> None:
        owner = f"{labels.OWNER}=check-{os.getpid()}"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not removed:
            for container in docker_engine.containers.list(all=True, filters={"label": owner}):
                mounts = container.attrs.get("Mounts") or []
                if any(m.get("Destination") == "/opt/ml/model" and m.get("RW") for m in mounts):
                    container.remove(force=True, v=True)  # docker rm -fv: its overlay volume too
                    removed.append(container.name)
            time.sleep(0.05)

    remover = threading.Thread(target=remove_the_probe)
    remover.start()
    try:
        (result,) = run_checks(select([CHECK]), target)
    finally:
        remover.join()
    assert removed, "the probe container was there to remove"
    assert result.outcome is Outcome.ERROR, f"{result.outcome}: {result.message}"
    assert result.message == removed_message(removed)
    assert result.evidence["cause"] == CAUSE_CONTAINER_REMOVED


def test_a_model_dir_over_2_gib_is_still_probed_and_the_probe_gives_the_verdict(
    run_one: RunOne, twin_image: TwinImage, tmp_path: Path
) -> None:
    # real LLM sizes: 3 GiB of weights (sparse: no disk, no time). The overlay copies nothing, so the
    # probe runs and sees the lazy twin's silent write, which no log line reports.
    model = tmp_path / "model"
    model.mkdir()
    with open(model / "weights.bin", "wb") as weights:
        weights.truncate(3 * 1024**3)
    result = run_one(CHECK, twin_image("model-dir.read-only.lazy"), model_data=str(model))
    assert result.outcome is Outcome.FAILED, f"{result.outcome}: {result.message}"
    assert result.evidence["probe_changes"] == ["created /opt/ml/model/compiled-cache.bin (file)"]
    assert "a container given a writable overlay of it created /opt/ml/model/compiled-cache.bin" in (
        result.message
    )
    assert result.warnings == ()
    assert (model / "weights.bin").stat().st_size == 3 * 1024**3 and sorted(model.iterdir()) == [
        model / "weights.bin"  # the model itself was never written
    ]


def test_without_an_overlay_the_probe_copies_a_small_model_dir(
    run_one: RunOne, echo_image: str, tmp_path: Path
) -> None:
    model = tmp_path / "a,b"  # a path the overlay's options cannot carry: the copy is the fallback
    model.mkdir()
    (model / "weights.bin").write_bytes(b"w" * 100)
    result = run_one(CHECK, echo_image, model_data=str(model))
    assert result.outcome is Outcome.PASSED, f"{result.outcome}: {result.message}"
    assert result.message.endswith(
        "a container with a writable copy of it started, answered one invocation (HTTP 200) and changed "
        "nothing there"
    )


def test_an_overlay_the_engine_cannot_mount_falls_back_to_the_copy_and_leaves_no_volume(
    run_one: RunOne,
    echo_image: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    docker_engine: docker.DockerClient,
) -> None:
    made = write_probe._overlay_folder

    def without_work_dir(source: Path, work: Path) -> Path | None:
        upper = made(source, work)
        (work / "work").rmdir()  # the engine's mount of the overlay then fails
        return upper

    monkeypatch.setattr(write_probe, "_overlay_folder", without_work_dir)
    volumes = {v.id for v in docker_engine.volumes.list()}
    result = run_one(CHECK, echo_image)
    assert result.outcome is Outcome.PASSED, f"{result.outcome}: {result.message}"
    assert (
        "a container with a writable copy of it started, answered one invocation (HTTP 200)" in result.message
    )
    assert {v.id for v in docker_engine.volumes.list()} - volumes == set()  # the failed start's volume too


def test_without_an_overlay_a_model_dir_over_the_copy_limit_is_read_from_the_logs_only(
    run_one: RunOne, echo_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "a,b"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"w" * 100)
    monkeypatch.setattr(write_probe, "PROBE_COPY_LIMIT_BYTES", 99)
    result = run_one(CHECK, echo_image, model_data=str(model))  # a local folder: mounted as it is
    assert result.outcome is Outcome.PASSED, f"{result.outcome}: {result.message}"
    assert result.message.endswith("no write failure there in its logs (write probe not run)")
    assert result.warnings == (
        "write probe not run: the model dir's path cannot be an overlay's layer, and the model dir holds "
        "100 bytes, over the 99-byte copy limit; only the logs were read for failed writes to /opt/ml/model",
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="a whiteout is a character device: mknod needs root")
def test_overlay_changes_reads_every_kind_of_write_from_the_upper_folder(tmp_path: Path) -> None:
    lower, upper = tmp_path / "lower", tmp_path / "upper"
    (lower / "code").mkdir(parents=True)
    for name in ("weights.bin", "gone.txt", "mode.txt", "opened.txt"):
        (lower / name).write_text(name)
    (lower / "code" / "inference.py").write_text("x")
    (upper / "code").mkdir(parents=True)
    shutil.copystat(lower / "code", upper / "code")
    (upper / "code" / "cache.pyc").write_bytes(b"c")  # created
    os.mknod(upper / "gone.txt", 0o600 | stat.S_IFCHR, os.makedev(0, 0))  # a whiteout: removed
    (upper / "weights.bin").write_text("longer weights")  # copied up and changed
    shutil.copy2(lower / "mode.txt", upper / "mode.txt")
    (upper / "mode.txt").chmod(0o600)
    shutil.copy2(lower / "opened.txt", upper / "opened.txt")  # copied up, left as it was
    assert overlay_changes(lower, upper) == [
        "created /opt/ml/model/code/cache.pyc (file)",
        "removed /opt/ml/model/gone.txt",
        "changed the mode of /opt/ml/model/mode.txt (644 -> 600)",
        "modified /opt/ml/model/weights.bin (11 -> 14 bytes)",
        "opened /opt/ml/model/opened.txt for writing or changed its owner or times (content and mode "
        "unchanged)",
    ]


def test_a_slow_invocation_costs_at_most_the_probe_wait_and_its_write_is_seen(
    run_one: RunOne, twin_image: TwinImage
) -> None:
    # the lazy twin writes, then answers after 30 s: the probe waits FAST_LIMITS' 2 s, not 30
    result = run_one(CHECK, twin_image("model-dir.read-only.lazy"), environment={"INVOKE_SLEEP_S": "30"})
    assert result.outcome is Outcome.FAILED, f"{result.outcome}: {result.message}"
    assert (
        "created /opt/ml/model/compiled-cache.bin (file) (during startup and one invocation, no answer "
        in (result.message)
    )
    assert "within 2 s)" in result.message
    assert result.duration_s < 15
