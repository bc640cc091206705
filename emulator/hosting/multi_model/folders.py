"""The folders of multi-model instances on the host: `{state_dir}/multi-model/{endpoint}/{instance}`,
mounted read-only at /opt/ml/models, one folder per model (`{model_name}/model`, then its COMPLETE
marker). A model is linked in from the artifact cache in a temporary folder renamed into place; a
stop interrupts the linking between files (the instance's folder then goes as a whole); at start the
folders of instances that no longer run, and half-made model folders, are swept (issue 23: a stop
during a load left its folder behind)."""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Collection
from pathlib import Path

log = logging.getLogger(__name__)

#: A model folder's marker: written once its files are all in place (its content: their bytes).
COMPLETE = ".smlocal-complete"
#: The suffix of a model folder being linked (renamed into place when complete).
LINKING = ".tmp"


class LinkCancelled(Exception):
    """The instance stopped while its model was being linked into its folder."""


def complete(folder: Path) -> int | None:
    """The bytes of a model folder whose files are all in place, else None."""
    try:
        return int((folder / COMPLETE).read_text())
    except (OSError, ValueError):
        return None


def link_tree(source: Path, folder: Path, cancel: threading.Event | None = None) -> int:
    """Put the extracted model at `folder`/model: hard links to the cache's files (a copy where the
    file system refuses links), in a temporary folder renamed into place; returns its bytes.
    LinkCancelled once `cancel` is set (checked between files)."""
    shutil.rmtree(folder, ignore_errors=True)
    tmp = folder.with_name(folder.name + LINKING)
    shutil.rmtree(tmp, ignore_errors=True)
    total = 0

    def link(src: str, dst: str) -> None:
        nonlocal total
        if cancel is not None and cancel.is_set():
            raise LinkCancelled(str(folder))
        total += os.lstat(src).st_size
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    try:
        shutil.copytree(source, tmp / "model", symlinks=True, copy_function=link)
    except shutil.Error as exc:  # copytree gathers what its copy_function raised per file
        if cancel is not None and cancel.is_set():
            raise LinkCancelled(str(folder)) from exc
        raise
    (tmp / COMPLETE).write_text(str(total))
    tmp.rename(folder)
    return total


def sweep(root: Path, running: Collection[tuple[str, str]]) -> list[Path]:
    """At start: remove the folders under `root` (`{endpoint}/{instance}`) of instances not in
    `running` ((endpoint, instance id) of the containers that still run), and in theirs every model
    folder a stop left half made (no COMPLETE marker, or a LINKING leftover). Returns what went."""
    removed: list[Path] = []
    try:
        endpoints = list(root.iterdir())
    except OSError:
        return removed
    for endpoint in endpoints:
        gone: list[Path] = []
        for instance in _children(endpoint):
            if (endpoint.name, instance.name) not in running:
                gone.append(instance)
            else:
                gone += [m for m in _children(instance) if complete(m) is None]
        for path in gone:
            shutil.rmtree(path, ignore_errors=True)
        if not _children(endpoint):
            shutil.rmtree(endpoint, ignore_errors=True)
        removed += gone
    if removed:
        log.info("swept %d multi-model folder(s) no running instance owns: %s", len(removed), removed)
    return removed


def _children(folder: Path) -> list[Path]:
    try:
        return [p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:
        return []
