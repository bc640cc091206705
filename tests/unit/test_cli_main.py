"""emulator.cli.main: botocore's own errors end in one line and status 1 (no traceback)."""

from __future__ import annotations

import argparse
import logging

import pytest
from botocore.exceptions import ParamValidationError

from emulator import cli


def test_param_validation_error_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse(args: argparse.Namespace) -> int:
        raise ParamValidationError(
            report="Invalid value for parameter X, value: 0, valid min value: 1\nInvalid type for Y"
        )

    monkeypatch.setattr(cli, "cmd_ls", refuse)
    assert cli.main(["ls", "--endpoint-url", "http://127.0.0.1:1"]) == 1
    err = capsys.readouterr().err
    assert err == (
        "smlocal: Parameter validation failed: Invalid value for parameter X, value: 0, "
        "valid min value: 1 Invalid type for Y\n"
    )


def test_httpx_loggers_are_quiet_unless_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "cmd_ls", lambda args: 0)
    for name in cli.QUIET_LOGGERS:
        monkeypatch.setattr(logging.getLogger(name), "level", logging.NOTSET)
    assert cli.main(["ls"]) == 0
    assert all(logging.getLogger(n).level == logging.WARNING for n in cli.QUIET_LOGGERS)
