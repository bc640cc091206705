"""start.no-exit's reading of a Python traceback in a failed start's log."""

from __future__ import annotations

from contract_tests.checks.start_logs import python_error

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
