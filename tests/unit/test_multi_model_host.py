"""The multi-model host's pure parts: model names, which models go first (LRU, never one in use), the
artifact's source under the prefix, and the link of an extracted model into an instance's folder."""

from __future__ import annotations

import os
from pathlib import Path

from emulator.hosting.multi_model.cache import InstanceModels, model_name
from emulator.hosting.multi_model.host import COMPLETE, _complete, _link_tree


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
