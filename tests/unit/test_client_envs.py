"""The client environments' lookup: a missing one skips with the reason (fails under CI), and the
client processes' environment never carries the user's AWS settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.client_envs import AwsTrap, client_env, client_environ


def test_a_missing_env_skips_naming_it_and_the_command_that_makes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SMLOCAL_CLIENT_ENVS", str(tmp_path))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        client_env("sdk-v2", "sagemaker.model")
    assert str(skipped.value) == (
        f"no sdk-v2 client environment: {tmp_path}/sdk-v2/bin/python is missing "
        "(make it with `bash .ci/client-envs sdk-v2`)"
    )


def test_under_ci_a_missing_env_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SMLOCAL_CLIENT_ENVS", str(tmp_path))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as failed:
        client_env("aws-cli", "awscli")
    assert str(failed.value).startswith("CI makes the client environments first (.ci/run): no aws-cli client")


def test_an_env_without_the_package_skips_saying_what_it_cannot_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    bin_dir = tmp_path / "sdk-v3" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(sys.executable)  # a Python without sagemaker
    monkeypatch.setenv("SMLOCAL_CLIENT_ENVS", str(tmp_path))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        client_env("sdk-v3", "sagemaker_not_here.core")
    assert str(skipped.value).endswith(
        "cannot import sagemaker_not_here.core: ModuleNotFoundError: No module named 'sagemaker_not_here'"
    )


def test_client_processes_get_only_their_own_aws_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_PROFILE", "users-own")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "secret")
    env = client_environ(tmp_path / "home", tmp_path / "bin", AwsTrap(url="http://127.0.0.1:9"))
    assert "AWS_PROFILE" not in env and "AWS_SESSION_TOKEN" not in env
    assert env["HOME"] == str(tmp_path / "home")
    assert (
        Path(env["AWS_CONFIG_FILE"]).read_text() == Path(env["AWS_SHARED_CREDENTIALS_FILE"]).read_text() == ""
    )
    assert env["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9"
    assert env["PATH"].startswith(f"{tmp_path / 'bin'}:")
