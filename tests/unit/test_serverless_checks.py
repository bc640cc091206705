"""serverless.writes-outside-tmp's reading of a log: which lines report a refused write, and the path."""

from __future__ import annotations

import pytest

from contract_tests.checks.serverless import write_errors, written_path


@pytest.mark.parametrize(
    ("line", "path"),
    [
        ("OSError: [Errno 30] Read-only file system: '/opt/program/state.bin'", "/opt/program/state.bin"),
        (
            "PermissionError: [Errno 13] Permission denied: '/root/.cache/huggingface'",
            "/root/.cache/huggingface",
        ),
        (
            'nginx: [emerg] open() "/var/run/nginx.pid" failed (30: Read-only file system)',
            "/var/run/nginx.pid",
        ),
        ("mkdir: cannot create directory '/var/lib/model': Read-only file system", "/var/lib/model"),
        ("touch: /opt/program/lock: Read-only file system", "/opt/program/lock"),
        (
            "java.io.FileNotFoundException: /home/model-server/logs/ts_log.log (Permission denied)",
            "/home/model-server/logs/ts_log.log",
        ),
        ("EROFS: read-only file system, open `/app/cache.json`", "/app/cache.json"),
        ("write failed: Read-only file system", None),
    ],
)
def test_the_path_of_a_refused_write(line: str, path: str | None) -> None:
    assert write_errors(line) == [line]
    assert written_path(line) == path


def test_lines_that_are_no_refused_write_or_under_tmp_are_ignored() -> None:
    log = "\n".join(
        [
            "echo: listening on 8080",
            "OSError: [Errno 30] Read-only file system: '/tmp/x'",  # /tmp is writable: not this
            "PermissionError: [Errno 13] Permission denied: '/tmp'",
            "GET /ping 200",
            "  OSError: [Errno 30] Read-only file system: '/opt/a'  ",
        ]
    )
    assert write_errors(log) == ["OSError: [Errno 30] Read-only file system: '/opt/a'"]
