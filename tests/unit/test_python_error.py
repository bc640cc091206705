"""start.no-exit's reading of a failed start's log: a traceback's cause, else its last error lines."""

from __future__ import annotations

from contract_tests.checks.start_logs import error_lines, python_error

GUNICORN = """[INFO] Starting gunicorn 23.0.0
[ERROR] Exception in worker process
Traceback (most recent call last):
  File "/usr/lib/python3/dist-packages/gunicorn/arbiter.py", line 608, in spawn_worker
    worker.init_process()
  File "/opt/program/app.py", line 3, in <module>
    import numpy
ModuleNotFoundError: No module named 'numpy'
[INFO] Worker exiting (pid: 8)
Traceback (most recent call last):
  File "/usr/lib/python3/dist-packages/gunicorn/arbiter.py", line 209, in run
gunicorn.errors.HaltServer: <HaltServer 'Worker failed to boot.' 3>
"""


def test_the_cause_is_the_first_exception_not_the_halt() -> None:
    assert python_error(GUNICORN) == "ModuleNotFoundError: No module named 'numpy'"


def test_a_halt_alone_or_no_traceback_names_nothing() -> None:
    assert python_error(GUNICORN.split("[INFO] Worker exiting")[1]) is None
    assert python_error("echo: exiting at start with 3\n") is None
    assert python_error("") is None


def test_a_dotted_exception_with_no_message() -> None:
    log = 'Traceback (most recent call last):\n  File "x.py", line 1\nmodel.errors.LoadError\n'
    assert python_error(log) == "model.errors.LoadError"


def test_the_last_error_looking_lines_lead() -> None:
    serve = (
        "serve: looking for a model folder in /opt/ml/model\nserve: no model folder found in /opt/ml/model\n"
    )
    assert error_lines(serve) == ["serve: no model folder found in /opt/ml/model"]
    assert error_lines(GUNICORN) == ["gunicorn.errors.HaltServer: <HaltServer 'Worker failed to boot.' 3>"]
    shell = "start\nE: cannot open /opt/ml/model/config.json\nFATAL: no weights\n"
    assert error_lines(shell) == ["E: cannot open /opt/ml/model/config.json", "FATAL: no weights"]
    assert error_lines("usage: serve [--port N]\n") == ["usage: serve [--port N]"]


def test_lines_without_an_error_name_nothing() -> None:
    assert error_lines("echo: exiting at start with 3\n") == []
    assert error_lines("a terror and a mirror\nall 3 models loaded\n") == []
    assert error_lines("") == []


def test_only_the_end_of_the_log_and_no_info_lines_count() -> None:
    early = "cuda: no GPU found, using CPU\n" + "".join(f"loading shard {i}\n" for i in range(12))
    assert error_lines(early + "done\n") == []
    assert error_lines("[INFO] no GPU found, using CPU\nstarting\n") == []
    assert error_lines("2026-12-03 INFO missing optional config, using defaults\nstopped\n") == []
