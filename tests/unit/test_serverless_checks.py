"""How the serverless checks read a log: serverless.writes-outside-tmp's refused writes and their paths,
serverless.no-gpu's words of a program that wanted a GPU."""

from __future__ import annotations

import pytest

from contract_tests.checks.serverless import gpu_words, write_errors, written_path


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


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: CUDA error: no CUDA-capable device is detected",
        "RuntimeError: Found no NVIDIA driver on your system.",
        "OSError: libcuda.so.1: cannot open shared object file: No such file or directory",
        "torch.cuda.is_available() is False",
        "NVML: Failed to initialize NVML: Driver/library version mismatch",
        "ValueError: no GPU found",
        "CUDA_ERROR_NO_DEVICE",
    ],
)
def test_words_of_a_program_that_wanted_a_gpu(line: str) -> None:
    assert gpu_words(line)


@pytest.mark.parametrize(
    "line", ["KeyError: 'inputs'", "echo: exiting at start with 4", "MemoryError", "GPUtil-free server"]
)
def test_other_errors_name_no_gpu(line: str) -> None:
    assert not gpu_words(line)
