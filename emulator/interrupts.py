"""Ctrl-C and SIGTERM from a command's first instant: a signal is handled, or held until it can be.

`smlocal check` ends on Ctrl-C with exit status 130 and on SIGTERM with 143, its containers removed.
Between the process's start and the moment those handlers are in place, Python's own handling would
decide instead: SIGTERM's default action kills the process (-15), and a SIGINT while the interpreter
starts (the default action: -2) or while it imports (a KeyboardInterrupt traceback, then -2) ends it
before the command can answer. Nothing has been created then, so nothing is left behind, but the exit
status is not the documented one; a test that signals a run it just started saw -2 instead of 130.

The window is closed by holding the signals, not by racing them. A launcher that needs the documented
status for any signal it sends (the tests, a supervisor) starts the process with SIGINT and SIGTERM
blocked (`hold_signals` as a Popen `preexec_fn`, or its own `pthread_sigmask`; the mask survives
exec); the kernel keeps a signal sent early pending, and the command delivers it to its handlers by
calling `release_signals` once they are installed. A command that installs no handler of its own
releases them at once (emulator.cli.main), so a held start never leaves a process deaf to Ctrl-C.
Without a launcher's block the behaviour is Python's until the handlers are in place.

Once running, a step that must not be cut in two runs under `deferred()`: a Ctrl-C in the middle of a
container's create-and-start let the engine create the container after the run's cleanup had looked
for it (a `created` container left, 1 of 9 early-signalled runs); deferred, the signal is handled as
soon as the step is done and the container is the run's to remove.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

#: The signals smlocal's commands answer with their own handlers (exit 130 and 143 for `check`).
HANDLED_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)
#: Exit statuses of a run ended by Ctrl-C and by SIGTERM (128 + the signal's number, as shells report).
EXIT_INTERRUPTED = 128 + signal.SIGINT
EXIT_TERMINATED = 128 + signal.SIGTERM


def hold_signals() -> None:
    """Block SIGINT and SIGTERM in the calling thread (a Popen preexec_fn: in the child, before exec);
    a signal sent meanwhile stays pending until `release_signals`."""
    if hasattr(signal, "pthread_sigmask"):  # not on Windows, where there is no signal mask to inherit
        signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED_SIGNALS)


def release_signals() -> None:
    """Unblock SIGINT and SIGTERM in the calling thread; one that was held is delivered now, to the
    handlers installed at this point. A no-op where they were not blocked."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED_SIGNALS)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block has ended, then go to the handlers that were there before
    (KeyboardInterrupt, a command's SIGTERM handler; the default action is taken by re-raising the
    signal): one step runs whole, a Ctrl-C is delayed by that step's time only. From the main thread
    only (elsewhere Python runs no handler, and there is nothing to defer); blocks nest."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[tuple[int, FrameType | None]] = []

    def record(signum: int, frame: FrameType | None) -> None:
        caught.append((signum, frame))

    previous = {signum: signal.signal(signum, record) for signum in HANDLED_SIGNALS}
    try:
        yield
    finally:
        for handled, handler in previous.items():
            signal.signal(handled, signal.SIG_DFL if handler is None else handler)
        if caught:
            signum, frame = caught[0]
            _deliver(previous[signal.Signals(signum)], signum, frame)


def interrupt_handled() -> None:
    """Say to CPython that the KeyboardInterrupt being handled was handled. CPython marks a
    KeyboardInterrupt raised inside code that exec() or eval() runs from a string as uncaught, even
    when the program catches it, and a process started with `python -m` then ends by raising SIGINT
    with its default action (status -2) instead of exiting with the program's status. dataclasses and
    namedtuple build their methods that way, so a Ctrl-C during an import often lands there: a
    signalled `python -m emulator.cli check` printed "interrupted" and died of SIGINT, 3 of 24 runs.
    The next exec() of a string clears the mark; call this where a KeyboardInterrupt becomes a
    command's exit status."""
    exec("pass")  # clears CPython's "uncaught KeyboardInterrupt" mark (pythonrun.c, run_eval_code_obj)


def _deliver(handler: Callable[[int, FrameType | None], Any] | int | None, signum: int, frame: Any) -> None:
    if callable(handler):
        handler(signum, frame)
    elif handler in (signal.SIG_DFL, None):
        signal.raise_signal(signum)  # its default action, now
    # SIG_IGN: ignored, as it would have been
