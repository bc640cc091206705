"""Container log capture: one thread per container follows its stdout/stderr into a file.

Files are laid out as CloudWatch names streams: logs/{endpoint}/{variant}/{instance-id}.log, plus
logs/{endpoint}/_smlocal.log for what the platform itself has to say (extraction details, failures).
The thread also tells its owner when the container exits: the log stream ends exactly then, so
readiness learns of an early exit without polling the engine.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

PLATFORM_STREAM = "_smlocal"


def stream_path(logs_dir: Path, endpoint: str, variant: str, instance_id: str) -> Path:
    return logs_dir / endpoint / variant / f"{instance_id}.log"


def platform_log(logs_dir: Path, endpoint: str, line: str) -> None:
    path = logs_dir / endpoint / f"{PLATFORM_STREAM}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with path.open("a", encoding="utf-8") as fh:
        fh.write(f"{stamp} {line}\n")


class LogPump:
    """Copies a container's log stream to a file, keeps the last lines, reports the exit."""

    def __init__(
        self,
        source: Callable[[], Iterator[bytes]],
        path: Path,
        on_exit: Callable[[], None],
        keep_lines: int = 50,
    ) -> None:
        self._source = source
        self._path = path
        self._on_exit = on_exit
        self._tail: collections.deque[str] = collections.deque(maxlen=keep_lines)
        self._partial = ""
        self._thread = threading.Thread(target=self._run, name=f"logs-{path.stem}", daemon=True)

    def start(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._thread.start()

    def tail(self, lines: int = 20) -> list[str]:
        items = list(self._tail)
        if self._partial:
            items.append(self._partial)
        return items[-lines:]

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        try:
            with self._path.open("ab") as fh:
                for chunk in self._source():
                    fh.write(chunk)
                    fh.flush()
                    text = self._partial + chunk.decode("utf-8", errors="replace")
                    *complete, self._partial = text.split("\n")
                    self._tail.extend(complete)
        except Exception:  # noqa: BLE001 - the engine closing the stream in any way means "exited"
            pass
        finally:
            self._on_exit()
