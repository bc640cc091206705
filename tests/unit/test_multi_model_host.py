"""The multi-model host's pure parts: model names, which models go first (LRU, never one in use), the
artifact's source under the prefix, and the link of an extracted model into an instance's folder."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from emulator.config import ServerConfig
from emulator.hosting.multi_model.cache import InstanceModels, model_name
from emulator.hosting.multi_model.folders import COMPLETE, LinkCancelled, sweep
from emulator.hosting.multi_model.folders import complete as _complete
from emulator.hosting.multi_model.folders import link_tree as _link_tree
from emulator.hosting.multi_model.host import BUSY_OUTSTANDING, MultiModelHost


def models(tmp_path: Path) -> InstanceModels:
    return InstanceModels("ep", "v", tmp_path, memory_budget=100, disk_budget=100)


def test_model_names_are_opaque_stable_and_distinct() -> None:
    assert model_name("a.tar.gz") == model_name("a.tar.gz")
    assert model_name("a.tar.gz") != model_name("b.tar.gz")
    assert len(model_name("dir/a.tar.gz")) == 20 and "/" not in model_name("dir/a.tar.gz")


def test_unload_candidates_are_idle_loaded_models_least_recently_used_first(tmp_path: Path) -> None:
    m = models(tmp_path)
    a, b, c, d = (m.get(t) for t in ("a", "b", "c", "d"))
    for model, used in ((a, 3.0), (b, 1.0), (c, 2.0), (d, 0.5)):
        model.loaded, model.last_used, model.size = True, used, 10
    c.in_use = 1  # serving a call: never unloaded meanwhile
    d.loaded = False
    assert m.unload_candidates(keep=a) == [b]
    assert m.unload_candidates(keep=d) == [b, a]
    assert (m.loaded_bytes(), m.loaded_bytes(but=a), m.loaded_count()) == (30, 20, 3)


def test_delete_candidates_are_on_disk_and_not_loaded(tmp_path: Path) -> None:
    m = models(tmp_path)
    a, b, c = (m.get(t) for t in ("a", "b", "c"))
    for model, used in ((a, 2.0), (b, 1.0), (c, 3.0)):
        model.on_disk, model.last_used, model.size = True, used, 5
    a.loaded = True
    assert m.delete_candidates(keep=c) == [b]
    assert m.disk_bytes(but=c) == 10


def test_link_tree_links_the_files_and_marks_the_folder_complete(tmp_path: Path) -> None:
    extracted = tmp_path / "cache" / "digest"
    (extracted / "sub").mkdir(parents=True)
    (extracted / "weights.bin").write_bytes(b"w" * 1000)
    (extracted / "sub" / "vocab.txt").write_bytes(b"v" * 24)
    folder = tmp_path / "instance" / model_name("a.tar.gz")
    assert _complete(folder) is None
    assert _link_tree(extracted, folder) == 1024
    assert (folder / "model" / "sub" / "vocab.txt").read_bytes() == b"v" * 24
    assert os.stat(folder / "model" / "weights.bin").st_ino == os.stat(extracted / "weights.bin").st_ino
    assert _complete(folder) == 1024 and (folder / COMPLETE).read_text() == "1024"
    # again (a changed artifact): the folder is replaced, no leftovers
    (extracted / "sub" / "vocab.txt").unlink()
    assert _link_tree(extracted, folder) == 1000
    assert not (folder / "model" / "sub" / "vocab.txt").exists()
    assert sorted(p.name for p in folder.parent.iterdir()) == [folder.name]


def test_link_tree_stops_between_files_once_cancelled(tmp_path: Path) -> None:
    extracted = tmp_path / "cache" / "digest"
    extracted.mkdir(parents=True)
    for i in range(3):
        (extracted / f"w{i}.bin").write_bytes(b"w")
    folder = tmp_path / "instance" / model_name("a.tar.gz")
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(LinkCancelled):
        _link_tree(extracted, folder, cancel)
    assert not folder.exists() and _complete(folder) is None  # never renamed into place


def test_sweep_removes_the_folders_of_instances_that_no_longer_run(tmp_path: Path) -> None:
    """At start: an instance folder whose container is gone goes whole; in a running instance's folder,
    complete models stay and half-made ones (no marker, a .tmp of an interrupted link) go."""
    root = tmp_path / "multi-model"
    kept, gone = root / "ep" / "i-kept", root / "ep" / "i-gone"
    done = kept / "m1"
    (done / "model").mkdir(parents=True)
    (done / COMPLETE).write_text("0")
    (kept / "m2" / "model").mkdir(parents=True)  # no marker: a stop mid-link
    (kept / "m3.tmp" / "model").mkdir(parents=True)
    (gone / "m1" / "model").mkdir(parents=True)
    (root / "old" / "i-x" / "m1").mkdir(parents=True)  # an endpoint with nothing running
    removed = sweep(root, {("ep", "i-kept")})
    assert sorted(p.relative_to(root).as_posix() for p in removed) == [
        "ep/i-gone",
        "ep/i-kept/m2",
        "ep/i-kept/m3.tmp",
        "old/i-x",
    ]
    assert sorted(p.name for p in kept.iterdir()) == ["m1"] and not gone.exists()
    assert sorted(p.name for p in root.iterdir()) == ["ep"]
    assert sweep(tmp_path / "absent", set()) == []


class _Instance:
    """What `choose` reads of an instance: its identity and requests in flight."""

    def __init__(self, outstanding: int = 0) -> None:
        self.outstanding = outstanding


def test_choose_prefers_a_warm_instance_until_it_is_busy(tmp_path: Path) -> None:
    host = MultiModelHost(ServerConfig(state_dir=tmp_path), None, None, lambda: None)
    warm: Any = _Instance()
    cold: Any = _Instance()
    instances: list[Any] = [cold, warm]
    assert host.choose(instances, "a") is None  # loaded nowhere: the variant's pick
    models = host._instances[warm] = InstanceModels("ep", "v", tmp_path, 100, 100)
    models.get("a").loaded = True
    assert host.choose(instances, "a") is warm
    warm.outstanding = BUSY_OUTSTANDING - 1
    assert host.choose(instances, "a") is warm
    warm.outstanding = BUSY_OUTSTANDING  # busy, and the other instance is idle: load it there too
    assert host.choose(instances, "a") is cold
    cold.outstanding = BUSY_OUTSTANDING + 1
    assert host.choose(instances, "a") is warm
    assert models.get("b") and host.choose(instances, "b") is None
