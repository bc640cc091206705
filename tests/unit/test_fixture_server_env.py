"""The environment of the server the pytest fixtures start: the clients' dummy credentials when the
environment has none at all, else the environment as it is (contract_tests/pytest_fixtures/server.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from contract_tests.pytest_fixtures.server import server_environment

CREDENTIAL_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
)


@pytest.fixture
def bare(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No credential anywhere: every variable unset, the shared files empty files of the test's own."""
    for name in CREDENTIAL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    credentials = tmp_path / "credentials"
    credentials.write_text("")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return credentials


def test_no_credentials_at_all_gives_the_clients_dummy_pair(bare: Path) -> None:
    env = server_environment()
    assert (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]) == ("smlocal", "smlocal")
    assert env["AWS_SHARED_CREDENTIALS_FILE"] == str(bare)  # the rest is passed on


def test_keys_in_the_environment_are_kept(bare: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAREAL")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "real-secret")
    env = server_environment()
    assert (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]) == ("AKIAREAL", "real-secret")


def test_a_profile_in_the_shared_file_is_kept(bare: Path) -> None:
    bare.write_text("[default]\naws_access_key_id = AKIAFILE\naws_secret_access_key = file-secret\n")
    assert "AWS_ACCESS_KEY_ID" not in server_environment()


@pytest.mark.parametrize(
    "variable", ["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_WEB_IDENTITY_TOKEN_FILE"]
)
def test_a_task_role_or_web_identity_is_kept(
    bare: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv(variable, "/v2/credentials/x")
    assert "AWS_ACCESS_KEY_ID" not in server_environment()
