"""The state directory's files (state.json, autoscaling.json, alarms.json) are replaced whole, never
edited in place: a reader, or the server after a crash, sees the old file or the new one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomically(path: Path, text: str | bytes) -> None:
    """Replace `path` with `text` (or bytes) in one rename: a reader sees the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=path.suffix)
    try:
        if isinstance(text, bytes):
            with os.fdopen(fd, "wb") as out:
                out.write(text)
        else:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
