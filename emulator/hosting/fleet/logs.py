"""Container logs and exits, with no per-line work in the server.

While a container lives, the engine keeps its stdout/stderr (read on demand: `smlocal logs`, failure
messages). When smlocal removes a container it first archives the whole log to a file laid out as
CloudWatch names streams: logs/{endpoint}/{variant}/{instance-id}.log. logs/{endpoint}/_smlocal.log
holds what the platform itself has to say (extraction details, health-check evidence, failures).

An ExitWatcher thread per container blocks in the engine's wait call and reports the exit, so
readiness learns of an early exit at once without polling. (An earlier design followed the log
stream in-process: it cost ~70 us of server CPU per container log line; see docs/performance.md.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

PLATFORM_STREAM = "_smlocal"


def stream_path(logs_dir: Path, endpoint: str, variant: str, instance_id: str) -> Path:
    return logs_dir / endpoint / variant / f"{instance_id}.log"


def archive(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def platform_log(logs_dir: Path, endpoint: str, line: str) -> None:
    path = logs_dir / endpoint / f"{PLATFORM_STREAM}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with path.open("a", encoding="utf-8") as fh:
        fh.write(f"{stamp} {line}\n")


class ExitWatcher:
    """Calls `on_exit` once the container exits (or the engine forgets it)."""

    def __init__(self, wait: Callable[[], bool], on_exit: Callable[[], None], name: str) -> None:
        """`wait` blocks for a while and returns True once the container has exited."""
        self._wait = wait
        self._on_exit = on_exit
        self._thread = threading.Thread(target=self._run, name=f"exit-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._wait():
                pass
        except Exception:  # noqa: BLE001 - an engine error means we can no longer see it: treat as exited
            pass
        finally:
            self._on_exit()
