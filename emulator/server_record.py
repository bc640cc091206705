"""STATE_DIR/server.json: which server serves a state dir, so `smlocal down --state-dir D` stops that one.

A server writes the record when it starts listening (pid, URL, owner id = the `smlocal.owner` label of
its containers) and removes it when it stops, unless another server has written its own meanwhile.
A record left by a killed server is stale: `down` asks the URL's health route for its owner before it
posts a shutdown there, so a stale record never stops another server.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from emulator.runtime.labels import owner_id

RECORD_NAME = "server.json"


@dataclass(frozen=True)
class ServerRecord:
    pid: int
    url: str
    owner: str
    state_dir: str


def record_path(state_dir: Path) -> Path:
    return state_dir / RECORD_NAME


def write_record(state_dir: Path, url: str) -> ServerRecord:
    record = ServerRecord(os.getpid(), url, owner_id(state_dir), str(state_dir.resolve()))
    state_dir.mkdir(parents=True, exist_ok=True)
    tmp = record_path(state_dir).with_suffix(".json.tmp")
    tmp.write_text(json.dumps(asdict(record), indent=1))
    tmp.replace(record_path(state_dir))
    return record


def read_record(state_dir: Path) -> ServerRecord | None:
    """The record, or None when there is none or it cannot be read."""
    try:
        raw = json.loads(record_path(state_dir).read_text())
        return ServerRecord(int(raw["pid"]), str(raw["url"]), str(raw["owner"]), str(raw["state_dir"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def remove_record(state_dir: Path, url: str) -> None:
    """Remove the record if it is this process's for this URL (not a newer server's)."""
    found = read_record(state_dir)
    if found is not None and found.pid == os.getpid() and found.url == url:
        record_path(state_dir).unlink(missing_ok=True)
