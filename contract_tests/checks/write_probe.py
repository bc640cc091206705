"""model-dir.read-only's write probe: a container of the image whose /opt/ml/model is writable, watched
for every write it makes there, whatever the size of the model.

The probe mounts the model dir as the read-only lower layer of an overlay (a volume of Docker's local
driver, mounted by the engine): the container sees the model as SageMaker mounts it, but writable, and
every write lands in the overlay's upper folder, which the checker owns; the model itself is never
written or copied. The upper folder IS the list of writes: a file or folder there that the model lacks
was created, a whiteout (a character device 0/0) is a removal, a file the model has was copied up by a
write (modified, its mode changed, or opened for writing and left as it was). Where the engine cannot
mount an overlay (an engine without overlay support, a model dir whose path the overlay options cannot
carry), the probe falls back to a writable copy of the model dir, up to PROBE_COPY_LIMIT_BYTES.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from contract_tests.running import GONE_STATUSES, RunningContainer
from contract_tests.target import CheckContext
from emulator.errors import EngineError

MODEL_DIR = "/opt/ml/model"
#: Without an overlay the probe copies the model dir; above this size it is not run (a warning says so).
PROBE_COPY_LIMIT_BYTES = 2 * 1024**3
#: How long the probe waits for its one invocation (at most the invocation limit): a model slower than
#: this costs no more than this here; writes made until then are still seen.
PROBE_INVOKE_TIMEOUT_S = 15.0
#: Characters the overlay's mount options cannot carry in a path (they separate its options and layers).
_OVERLAY_UNSAFE = frozenset(",:\\=")
_OPAQUE_XATTR = "trusted.overlay.opaque"

#: One entry of a snapshot: kind, permission bits, size (files), mtime in ns.
Entry = tuple[str, int, int, int]


def _entry(st: os.stat_result) -> Entry:
    kind = "dir" if stat.S_ISDIR(st.st_mode) else "link" if stat.S_ISLNK(st.st_mode) else "file"
    return kind, stat.S_IMODE(st.st_mode), st.st_size if kind == "file" else 0, st.st_mtime_ns


def _walk(root: Path) -> dict[str, os.stat_result]:
    """lstat of every entry under `root` (root itself as "."), by path relative to it."""
    found: dict[str, os.stat_result] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [".", *dirnames, *filenames] if dirpath == str(root) else [*dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            with contextlib.suppress(OSError):
                found[os.path.normpath(os.path.relpath(path, root))] = os.lstat(path)
    return found


def snapshot(root: Path) -> dict[str, Entry]:
    """Every entry under `root` (root itself as "."), by path relative to it; symlinks not followed."""
    return {rel: _entry(st) for rel, st in _walk(root).items()}


def _shown(rel: str) -> str:
    return MODEL_DIR if rel == "." else f"{MODEL_DIR}/{rel}"


def changes(before: dict[str, Entry], after: dict[str, Entry]) -> list[str]:
    """What changed between two snapshots, one line per path: created, removed, modified, mode."""
    found: list[str] = []
    touched_dirs: set[str] = set()
    for rel in sorted(after.keys() - before.keys()):
        found.append(f"created {_shown(rel)} ({after[rel][0]})")
        touched_dirs.add(os.path.dirname(rel) or ".")
    for rel in sorted(before.keys() - after.keys()):
        found.append(f"removed {_shown(rel)}")
        touched_dirs.add(os.path.dirname(rel) or ".")
    for rel in sorted(before.keys() & after.keys()):
        (kind0, mode0, size0, mtime0), (kind1, mode1, size1, mtime1) = before[rel], after[rel]
        if kind0 != kind1:
            found.append(f"replaced {_shown(rel)} ({kind0} -> {kind1})")
            continue
        if mode0 != mode1:
            found.append(f"changed the mode of {_shown(rel)} ({mode0:o} -> {mode1:o})")
        if kind0 == "dir":
            if mtime0 != mtime1 and rel not in touched_dirs:
                found.append(f"created and removed entries in {_shown(rel)}")
        elif size0 != size1 or mtime0 != mtime1:
            found.append(f"modified {_shown(rel)} ({size0} -> {size1} bytes)")
    return found


def _opaque(path: Path) -> bool:
    try:
        return os.getxattr(path, _OPAQUE_XATTR, follow_symlinks=False) == b"y"
    except OSError:  # no such attribute, or not readable (trusted.* needs root)
        return False


def overlay_changes(lower: Path, upper: Path) -> list[str]:
    """The writes an overlay's upper folder holds over `lower` (the model dir), as changes() words them;
    a file copied up but left as it was is a write too (opened for writing, or its metadata changed)."""
    before = snapshot(lower)
    after = dict(before)
    written = _walk(upper)
    parents = {os.path.dirname(rel) or "." for rel in written if rel != "."}
    untouched: list[str] = []
    for rel in sorted(written):
        st = written[rel]
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:  # a whiteout: removed
            for gone in [k for k in after if k == rel or k.startswith(rel + "/")]:
                del after[gone]
            continue
        entry = _entry(st)
        if entry[0] == "dir" and rel != "." and _opaque(upper / rel):  # replaced: lower's entries hidden
            for gone in [k for k in after if k.startswith(rel + "/")]:
                del after[gone]
        old = before.get(rel)
        if old is not None and entry[0] == "dir" == old[0] and rel in parents:
            entry = (*entry[:3], old[3])  # a child's copy-up moved its mtime, not a write of its own
        elif old is not None and entry == old and entry[0] == "file":
            untouched.append(rel)
        after[rel] = entry
    found = changes(before, after)
    found += [
        f"opened {_shown(rel)} for writing or changed its owner or times (content and mode unchanged)"
        for rel in untouched
    ]
    return found


@dataclass
class Probe:
    """What the write probe saw: a container whose /opt/ml/model was writable (`given`)."""

    healthy: bool
    observation: str
    #: the probe's invocation: "HTTP 200", an error, or "" (not sent)
    invocation: str = ""
    changes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    #: what the container was given, for messages: "a writable overlay of it" or "a writable copy of it"
    given: str = "a writable overlay of it"


def _tree_bytes(root: Path) -> int:
    return sum(p.lstat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def _overlay_folder(source: Path, work: Path) -> Path | None:
    """work/upper and work/work for an overlay over `source`, its root's mode, times and owner taken
    from `source` (the overlay's root shows the upper's); None when the paths cannot be its options."""
    if _OVERLAY_UNSAFE & set(f"{source}{work}"):
        return None
    upper = work / "upper"
    upper.mkdir()
    (work / "work").mkdir()
    st = source.stat()
    os.chmod(upper, stat.S_IMODE(st.st_mode))
    with contextlib.suppress(OSError):  # not root: the checker's own owner, as a copy would have
        os.chown(upper, st.st_uid, st.st_gid)
    os.utime(upper, ns=(st.st_atime_ns, st.st_mtime_ns))
    return upper


def write_probe(ctx: CheckContext, deadline_s: float) -> Probe | None:
    """Start a container of the image with /opt/ml/model writable (an overlay over the model dir, or a
    copy of it where no overlay can be mounted), wait until healthy (at most `deadline_s`), send the
    first payload once, remove the container and list its writes there. None (with a warning) when no
    overlay can be mounted and the model dir is too big to copy."""
    source = ctx.target.model_dir
    ctx.config.cache_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="write-probe-", dir=ctx.config.cache_dir))
    try:
        upper = _overlay_folder(source, work)
        why = "the model dir's path cannot be an overlay's layer"
        if upper is not None:
            try:
                container = ctx.target.start(model_dir=source, model_dir_overlay=work)
            except EngineError as exc:  # e.g. an engine that cannot mount an overlay of this folder
                why = f"the engine could not mount an overlay of it ({exc.message})"
            else:
                return _watch(ctx, container, deadline_s, lambda: overlay_changes(source, upper))
        size = _tree_bytes(source)
        if size > PROBE_COPY_LIMIT_BYTES:
            ctx.warn(
                f"write probe not run: {why}, and the model dir holds {size} bytes, over the "
                f"{PROBE_COPY_LIMIT_BYTES}-byte copy limit; only the logs were read for failed writes to "
                f"{MODEL_DIR}"
            )
            return None
        copy = work / "model"
        shutil.copytree(source, copy, symlinks=True)
        before = snapshot(copy)
        container = ctx.target.start(model_dir=copy, model_dir_writable=True)
        probe = _watch(ctx, container, deadline_s, lambda: changes(before, snapshot(copy)))
        probe.given = "a writable copy of it"
        return probe
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _watch(
    ctx: CheckContext, container: RunningContainer, deadline_s: float, written: Callable[[], list[str]]
) -> Probe:
    """Wait for the probe container, invoke it once, remove it, then list its writes (`written`)."""
    removed_by_others = False
    try:
        startup = container.wait_startup(deadline_s)
        invocation = ""
        if startup.healthy:
            invocation = _invoke_once(ctx, container)
        removed_by_others = container.state().status in GONE_STATUSES
    finally:
        if not removed_by_others:  # a removed one stays listed: the runner reports the cause
            ctx.target.discard(container)
    if removed_by_others:
        raise RuntimeError(f"the write probe's container {container.handle.name} disappeared")
    return Probe(
        healthy=startup.healthy,
        observation=startup.last_observation,
        invocation=invocation,
        changes=written(),
        elapsed_s=startup.elapsed_s,
    )


def _invoke_once(ctx: CheckContext, container: RunningContainer) -> str:
    payload = ctx.config.payloads[0]
    headers = {"Content-Type": payload.content_type}
    if payload.accept:
        headers["Accept"] = payload.accept
    wait = min(ctx.config.limits.invocation_timeout_s, PROBE_INVOKE_TIMEOUT_S)
    try:
        with container.client(wait) as client:
            response = client.post("/invocations", content=payload.body, headers=headers)
    except httpx.TimeoutException:
        return f"no answer within {wait:g} s"
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    return f"HTTP {response.status_code}"
