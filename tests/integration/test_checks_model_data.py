"""model-data.extracts: model data that cannot be fetched or extracted is a FAILED check with SageMaker's
text (the emulator's own: emulator/model_data/sources.py), not an ERROR and not a usage error; the
checks that need a container are SKIPPED pointing to it. A good archive passes, locally and from S3
(moto's server on 127.0.0.1, through boto3's default session, as `smlocal check` reaches S3)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from contract_tests.check_config import CheckConfig
from contract_tests.registry import select
from contract_tests.result import CheckResult, Outcome
from contract_tests.runner import run_checks
from contract_tests.target import Target
from emulator.model_data.sources import extract_failed_message, not_found_message
from tests.fixtures import archive_bombs as bombs
from tests.fixtures.s3server import ACCESS_KEY, REGION, SECRET_KEY
from tests.fixtures.twins import FAST_LIMITS

pytestmark = pytest.mark.docker

RunOne = Callable[..., CheckResult]
CHECK = "model-data.extracts"


def _archive(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _failed(result: CheckResult) -> str:
    assert result.id == CHECK
    assert result.outcome is Outcome.FAILED, f"{result.outcome}: {result.message}"
    return result.message


@pytest.fixture
def s3_env(s3_server: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """boto3's default session pointed at the moto server (what the tester's S3 client uses)."""
    env = {
        "AWS_ENDPOINT_URL_S3": s3_server,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": REGION,
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return env


def test_a_corrupt_archive_fails_with_sagemakers_failure_reason(
    run_one: RunOne, echo_image: str, tmp_path: Path
) -> None:
    archive = tmp_path / "model.tar.gz"
    archive.write_bytes(b"this is not a gzip file\n" * 10)
    message = _failed(run_one(CHECK, echo_image, model_data=str(archive)))
    assert message.startswith(
        f"the endpoint would fail with the FailureReason: {extract_failed_message(str(archive))} (what failed: "
    )
    assert "No container was started; the checks that need one are skipped." in message
    assert "Fix: Package the model as a gzipped tar" in message


def test_a_missing_file_fails_as_create_model_refuses_it(
    run_one: RunOne, echo_image: str, tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere" / "model.tar.gz"
    result = run_one(CHECK, echo_image, model_data=str(missing))
    message = _failed(result)
    assert message.startswith(
        "SageMaker's CreateModel refuses this model data (ValidationException): "
        f"{not_found_message(str(missing))} No container was started"
    )
    assert result.evidence["stage"] == "CreateModel"
    assert result.evidence["sagemaker_message"] == not_found_message(str(missing))


def test_an_archive_bomb_fails(run_one: RunOne, echo_image: str, tmp_path: Path) -> None:
    archive = bombs.pax_bomb(tmp_path / "model.tar.gz", 2 * bombs.MIB)  # over the 1 MiB header limit
    result = run_one(CHECK, echo_image, model_data=str(archive))
    message = _failed(result)
    assert message.startswith(
        f"the endpoint would fail with the FailureReason: {extract_failed_message(str(archive))}"
    )
    assert (
        "PAX extended header of 2097152 bytes, over the limit of 1048576 bytes" in result.evidence["detail"]
    )


def test_a_missing_s3_object_fails(run_one: RunOne, echo_image: str, s3_env: Any, s3_bucket: str) -> None:
    uri = f"s3://{s3_bucket}/missing/model.tar.gz"
    result = run_one(CHECK, echo_image, model_data=uri)
    message = _failed(result)
    assert f"(ValidationException): {not_found_message(uri)} No container" in message


def test_a_good_archive_passes_locally_and_from_s3(
    run_one: RunOne, echo_image: str, tmp_path: Path, s3_env: Any, s3_client: Any, s3_bucket: str
) -> None:
    archive = _archive(tmp_path / "model.tar.gz", {"model.pth": b"weights", "code/inference.py": b"x = 1\n"})
    result = run_one(CHECK, echo_image, model_data=str(archive))
    assert result.outcome is Outcome.PASSED, f"{result.outcome}: {result.message}"
    assert result.message == f"{archive} extracted: 2 file(s), 13 bytes, mounted read-only at /opt/ml/model"
    s3_client.upload_file(str(archive), s3_bucket, "m/model.tar.gz")
    uri = f"s3://{s3_bucket}/m/model.tar.gz"
    result = run_one(CHECK, echo_image, model_data=uri)
    assert result.outcome is Outcome.PASSED, f"{result.outcome}: {result.message}"
    assert result.message.startswith(f"{uri} extracted: 2 file(s), 13 bytes")
    # and the container gets it: model-dir.read-only's probe copies it and sees no write
    result = run_one("model-dir.read-only", echo_image, model_data=str(archive))
    assert result.outcome is Outcome.PASSED, f"{result.outcome}: {result.message}"


def test_no_model_data_is_skipped(run_one: RunOne, echo_image: str) -> None:
    result = run_one(CHECK, echo_image)
    assert result.outcome is Outcome.SKIPPED
    assert result.message.startswith("no --model-data given: the container gets an empty /opt/ml/model")


def test_the_checks_needing_a_container_skip_pointing_to_it(echo_image: str, tmp_path: Path) -> None:
    archive = tmp_path / "model.tar.gz"
    archive.write_bytes(b"\x1f\x8b broken")
    checks = select(
        [CHECK, "image.exec-form", "start.healthy", "invocations.timely", "model-dir", "shutdown.idle"]
    )
    config = CheckConfig(
        image=echo_image, model_data=str(archive), limits=FAST_LIMITS, cache_dir=tmp_path / "c"
    )
    results = {r.id: r for r in run_checks(checks, Target(config))}
    assert results[CHECK].outcome is Outcome.FAILED
    assert results["image.exec-form"].outcome is Outcome.PASSED  # static; PID 1 unverified, said so
    assert "see model-data.extracts" in results["image.exec-form"].warnings[0]
    assert results["model-dir.image-files"].outcome is Outcome.PASSED
    for check_id in ("start.healthy", "invocations.timely", "model-dir.read-only", "shutdown.idle"):
        result = results[check_id]
        assert result.outcome is Outcome.SKIPPED, (check_id, result.outcome, result.message)
        assert result.message == (
            f"the model data cannot be used ({extract_failed_message(str(archive))}); see model-data.extracts"
        )


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "contract_tests.cli", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, **(env or {})},
    )


def test_the_cli_reports_bad_model_data_as_a_failed_check_not_a_usage_error(
    echo_image: str, tmp_path: Path
) -> None:
    archive = tmp_path / "model.tar.gz"
    archive.write_bytes(b"not gzip")
    out = tmp_path / "report.json"
    done = _cli(
        echo_image, "--model-data", str(archive), "--check", "model-data,start.healthy", "--json", str(out)
    )
    assert done.returncode == 1, done.stdout + done.stderr
    results = {r["id"]: r for r in json.loads(out.read_text())["results"]}
    assert results[CHECK]["outcome"] == "failed"
    assert extract_failed_message(str(archive)) in results[CHECK]["message"]
    assert results["start.healthy"]["outcome"] == "skipped"
    # a missing file: the same, exit 1
    assert _cli(echo_image, "--model-data", str(tmp_path / "none.tar.gz"), "--check", CHECK).returncode == 1


def test_the_cli_refuses_what_cannot_be_a_model_data_url_at_all(echo_image: str) -> None:
    done = _cli(echo_image, "--model-data", "http://example.com/model.tar.gz", "--check", CHECK)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "smlocal check: --model-data http://example.com/model.tar.gz: Model data URL "
        "http://example.com/model.tar.gz is not supported: use s3://, file:// or a local path."
    )
    done = _cli(echo_image, "--model-data", "s3://bucket-only/", "--check", CHECK)
    assert done.returncode == 2 and "does not name an S3 object" in done.stderr


def test_the_pytest_plugin_fails_the_check_not_the_session(echo_image: str, tmp_path: Path) -> None:
    archive = tmp_path / "model.tar.gz"
    archive.write_bytes(b"not gzip")
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPATH": str(Path(__file__).parents[2])}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "contract_tests.plugin", "-p", "no:cacheprovider", "-v"]
        + ["--sagemaker-image", echo_image, "--sagemaker-model-data", str(archive)]
        + ["-k", "model-data or start.healthy"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "smlocal-contract::model-data.extracts FAILED" in run.stdout
    assert "smlocal-contract::start.healthy SKIPPED" in run.stdout
    assert extract_failed_message(str(archive)) in run.stdout
