"""What a container does with SIGTERM, observed once per run and told apart by its process tree.

shutdown.idle and shutdown.early judge one trial on one fresh container (a failing image costs the
grace period twice, not once per check): SIGTERM right after the first /ping 200; if the container is
still running when the grace period ends, a second SIGTERM (it is idle and long past ready by then).
The process list is read before the first signal and whenever a grace period ends without an exit;
diagnose() says from it why the container did not stop. A shell PID 1 that does not forward the signal,
or a PID 1 that outlives its server, is such whenever the signal comes: then no second SIGTERM is sent.
"""

from __future__ import annotations

import re
import shlex
import time
import weakref
from dataclasses import dataclass

from contract_tests.result import CheckSkipped
from contract_tests.target import CheckContext, Target
from emulator.runtime.base import ProcessInfo

#: PID 1 programs that are shells: they run the server as a child and forward no signal unless told.
SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh", "ksh", "busybox"})
#: Programs that keep a container alive without serving anything (`tail -f /dev/null`, `sleep infinity`).
KEEPERS = frozenset({"tail", "sleep"})

EXITED = "exited"
NO_HANDLER_YET = "no-handler-yet"
PID1_LINGERS = "pid1-lingers"
SHELL_NO_FORWARD = "shell-no-forward"
IGNORED = "ignored"
#: Outcomes the process tree explains whenever the signal comes: no second SIGTERM is sent for them.
STRUCTURAL = frozenset({SHELL_NO_FORWARD, PID1_LINGERS})

IGNORED_FIX = (
    "Handle SIGTERM in the server (e.g. signal.signal(signal.SIGTERM, stop), or the framework's "
    "graceful shutdown) and exit; start it with an exec-form ENTRYPOINT so that it is PID 1 and "
    "receives SIGTERM."
)
SHELL_FIX = (
    'Make the server PID 1: `exec` it from the entry-point script (`exec python3 serve.py "$@"`) or '
    'use an exec-form ENTRYPOINT (["python3", "serve.py"]), so that it gets SIGTERM itself.'
)
LINGER_FIX = (
    "Let PID 1 end when the server does: `exec` the server (then it is PID 1), or have the script wait "
    "for it and exit with its status (`server & wait $!`), instead of keeping the container alive with "
    "`tail -f /dev/null` or a sleep loop."
)
EARLY_FIX = (
    "Install the SIGTERM handler before /ping answers 200: first thing at start, before loading the "
    "model (or answer /ping 503 until the model is loaded and the handler is in place)."
)


@dataclass(frozen=True)
class Diagnosis:
    outcome: str
    seen: str
    fix: str


@dataclass(frozen=True)
class Trial:
    grace_s: float
    #: seconds from the first /ping 200 to the first SIGTERM
    first_after_ready_s: float
    first_exit: int | None
    first_took_s: float
    before: tuple[ProcessInfo, ...]
    #: the processes when the first grace period ended without an exit (empty when it exited)
    after_first: tuple[ProcessInfo, ...]
    #: the second SIGTERM, sent only when the first did not stop the container (and the process tree
    #: did not show why: see STRUCTURAL)
    second_after_ready_s: float | None = None
    second_exit: int | None = None
    second_took_s: float | None = None
    after_second: tuple[ProcessInfo, ...] = ()
    log_tail: str = ""

    @property
    def exited_on_first(self) -> bool:
        return self.first_exit is not None

    @property
    def second_sent(self) -> bool:
        return self.second_after_ready_s is not None

    @property
    def ignores_always(self) -> bool:
        """Neither SIGTERM stopped it: it ignores SIGTERM whenever it comes."""
        return self.first_exit is None and self.second_exit is None


_TRIALS: weakref.WeakKeyDictionary[Target, Trial | CheckSkipped] = weakref.WeakKeyDictionary()


def known_trial(target: Target) -> Trial | None:
    """The trial of this run, if a shutdown check made one already (the in-flight check reuses it)."""
    found = _TRIALS.get(target)
    return found if isinstance(found, Trial) else None


def trial(ctx: CheckContext) -> Trial:
    """This run's SIGTERM trial, made once; CheckSkipped when its container never became healthy."""
    found = _TRIALS.get(ctx.target)
    if found is None:
        try:
            found = _run(ctx)
        except CheckSkipped as skipped:
            found = skipped
        _TRIALS[ctx.target] = found
    if isinstance(found, CheckSkipped):
        raise CheckSkipped(found.message)
    return found


def _run(ctx: CheckContext) -> Trial:
    grace = ctx.config.limits.stop_grace_s
    container = ctx.target.start()
    startup = container.wait_startup()
    if not startup.healthy or startup.first_healthy_s is None:
        raise CheckSkipped(
            f"a fresh container never became healthy ({startup.last_observation}); see start.healthy"
        )
    ready_at = container.started_at + startup.first_healthy_s
    runtime, container_id = container.runtime, container.handle.id
    before = tuple(runtime.processes(container_id))
    first_after_ready = time.monotonic() - ready_at
    code, took = container.terminate(grace)
    if code is not None:
        return Trial(grace, first_after_ready, code, took, before, ())
    after_first = tuple(runtime.processes(container_id))
    if diagnose(before, after_first).outcome in STRUCTURAL:  # a second SIGTERM would meet the same
        return Trial(grace, first_after_ready, None, took, before, after_first, log_tail=container.log_tail())
    second_after_ready = time.monotonic() - ready_at
    code2, took2 = container.terminate(grace)
    after_second = tuple(runtime.processes(container_id)) if code2 is None else ()
    return Trial(
        grace,
        first_after_ready,
        None,
        took,
        before,
        after_first,
        second_after_ready,
        code2,
        took2,
        after_second,
        container.log_tail(),
    )


def program(process: ProcessInfo) -> str:
    """The basename of the process's program (`/bin/sh -c ...` -> `sh`)."""
    try:
        words = shlex.split(process.args)
    except ValueError:
        words = process.args.split()
    return re.sub(r"^.*/", "", words[0]) if words else ""


def is_keeper(process: ProcessInfo) -> bool:
    return program(process) in KEEPERS


def diagnose(before: tuple[ProcessInfo, ...], after: tuple[ProcessInfo, ...]) -> Diagnosis:
    """Why a container was still running after SIGTERM, from its processes before and after it."""
    main = next((p for p in after if p.main), None) or next((p for p in before if p.main), None)
    pid1 = f"PID 1 (`{main.args}`)" if main is not None else "PID 1"
    live = {p.pid for p in after if not p.exited}
    servers = [p for p in before if not p.main and not p.exited and not is_keeper(p)]
    running = [p for p in servers if p.pid in live]
    gone = [p for p in servers if p.pid not in live]
    if servers and not running:
        keepers = [p for p in after if not p.main and not p.exited and is_keeper(p)]
        waiting = f", waiting on `{keepers[0].args}`," if keepers else ""
        return Diagnosis(
            PID1_LINGERS,
            f"The server ({_names(gone)}) exited after SIGTERM, but {pid1}{waiting} kept running: the "
            "container stops only when PID 1 exits.",
            LINGER_FIX,
        )
    if running and main is not None and (program(main) in SHELLS or is_keeper(main)):
        kind = "a shell" if program(main) in SHELLS else f"`{program(main)}`, which serves nothing"
        return Diagnosis(
            SHELL_NO_FORWARD,
            f"{pid1} is {kind}: it got SIGTERM and did not pass it on, so the server "
            f"({_names(running)}), its child, never saw it and still runs.",
            SHELL_FIX,
        )
    children = f" with {len(running)} child process(es) still running" if running else ""
    return Diagnosis(
        IGNORED,
        f"{pid1} is the server, and it kept running{children}: it ignores SIGTERM, or has no handler "
        "for it (the kernel drops a signal that PID 1 does not handle).",
        IGNORED_FIX,
    )


def _names(processes: list[ProcessInfo]) -> str:
    return ", ".join(f"`{p.args}`" for p in processes)


def tree(processes: tuple[ProcessInfo, ...]) -> list[str]:
    """The processes as evidence lines, children indented under their parents (pids are the host's)."""
    by_parent: dict[int, list[ProcessInfo]] = {}
    for p in processes:
        by_parent.setdefault(p.ppid, []).append(p)
    pids = {p.pid for p in processes}
    roots = [p for p in processes if p.main or p.ppid not in pids]
    lines: list[str] = []

    def add(p: ProcessInfo, depth: int) -> None:
        label = f"PID 1 (host pid {p.pid})" if p.main else f"host pid {p.pid}"
        lines.append(f"{'  ' * depth}{label} [{p.stat}] {p.args}")
        for child in by_parent.get(p.pid, []):
            if child.pid != p.pid and len(lines) < 50:
                add(child, depth + 1)

    for root in roots:
        add(root, 0)
    return lines
