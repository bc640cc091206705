"""The multi-model artifact cache within its budget (issue 23: it grew 15x the instances' disk budget
after 120 models): least recently used directories evicted, never one in use; the index a journal
appended to (it was rewritten whole for every new model) that forgets evicted directories; the lock
per key dropped once unused. Real archives on the local file system, the real store."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from emulator.cli import build_parser
from emulator.model.resources import ModelDataSource
from emulator.model_data.budget import tree_bytes
from emulator.model_data.index import SLACK_LINES, ModelIndex
from emulator.model_data.store import ArtifactStore
from tests.fixtures.mme import mme_artifact

KIB = 1024
PAD = 100 * KIB  # each model: ~100 KiB extracted


def no_s3() -> Any:
    raise AssertionError("no S3 here")


def archives(tmp_path: Path, n: int) -> list[ModelDataSource]:
    return [
        ModelDataSource(str(mme_artifact(tmp_path / "src" / f"m{i}.tar.gz", f"model-{i}", pad_bytes=PAD)))
        for i in range(n)
    ]


def store(tmp_path: Path, budget: float | None) -> ArtifactStore:
    return ArtifactStore(tmp_path / "cache", no_s3, local_dirs=(tmp_path,), budget_bytes=budget)


def test_the_cache_stays_within_its_budget_least_recently_used_first(tmp_path: Path) -> None:
    sources = archives(tmp_path, 20)
    cache = store(tmp_path, budget=350 * KIB)  # room for three
    answers = [cache.materialize_into(s, lambda p: (p / "answer.txt").read_text()) for s in sources]
    assert answers == [f"model-{i}" for i in range(20)]
    assert tree_bytes(cache.models_dir) <= 350 * KIB and cache.cached_bytes == tree_bytes(cache.models_dir)
    assert len(list(cache.models_dir.iterdir())) == 3
    assert list(cache.tmp_dir.iterdir()) == []  # evicted directories deleted, nothing in progress
    # the index forgot the evicted ones: a repeat of one rebuilds it, of a kept one reuses it
    index = ModelIndex(cache.index_file, cache.tmp_dir)
    assert len(index) == 3
    extractions = cache.stats.extractions
    cache.materialize(sources[19])
    assert cache.stats.extractions == extractions
    cache.materialize(sources[0])
    assert cache.stats.extractions == extractions + 1
    assert len(list(cache.models_dir.iterdir())) == 3
    # a new server on the same folder starts within a smaller budget
    smaller = store(tmp_path, budget=150 * KIB)
    assert len(list(smaller.models_dir.iterdir())) == 1 and smaller.cached_bytes is not None


def test_a_directory_in_use_is_never_evicted(tmp_path: Path) -> None:
    sources = archives(tmp_path, 5)
    cache = store(tmp_path, budget=150 * KIB)  # room for one
    using, done = threading.Event(), threading.Event()
    seen: list[Path] = []

    def hold(path: Path) -> None:
        seen.append(path)
        using.set()
        assert done.wait(30)
        assert (path / "answer.txt").read_text() == "model-0"  # still there at the end of its use

    holder = threading.Thread(target=cache.materialize_into, args=(sources[0], hold))
    holder.start()
    assert using.wait(30)
    for source in sources[1:]:  # each over the budget with the held one
        cache.materialize(source)
    assert seen[0].is_dir()
    done.set()
    holder.join(30)
    # the others went as soon as their own use ended (the held one took the room); released, the
    # held one is the least recently used and goes for the next
    assert [p.name for p in cache.models_dir.iterdir()] == [seen[0].name]
    cache.materialize(sources[1])
    assert not seen[0].exists() and len(list(cache.models_dir.iterdir())) == 1


def test_without_a_budget_nothing_is_evicted(tmp_path: Path) -> None:
    cache = store(tmp_path, budget=None)
    for source in archives(tmp_path, 4):
        cache.materialize(source)
    assert len(list(cache.models_dir.iterdir())) == 4 and cache.cached_bytes is None


def test_locks_are_dropped_once_unused(tmp_path: Path) -> None:
    cache = store(tmp_path, budget=150 * KIB)
    for source in archives(tmp_path, 6):
        cache.materialize(source)
    assert cache._cache.lock_count == 0


def test_the_index_is_a_journal_appended_to_and_compacted(tmp_path: Path) -> None:
    path = tmp_path / "index.json"
    index = ModelIndex(path, tmp_path)
    index.put("fp-0", "d-0")
    inode = os.stat(path).st_ino
    for i in range(1, 50):
        index.put(f"fp-{i}", f"d-{i}")
    assert os.stat(path).st_ino == inode  # appended to, not rewritten per model
    assert len(path.read_text().splitlines()) == 50
    for i in range(40):
        index.drop_digest(f"d-{i}")
    lines = path.read_text().splitlines()
    assert len(lines) <= 2 * len(index) + SLACK_LINES  # compacted once it held mostly dead lines
    with open(path, "a") as f:
        f.write('["fp-torn", "d-')  # a crash mid-append
    again = ModelIndex(path, tmp_path)
    assert len(again) == 10 and again.get("fp-45") == "d-45" and again.get("fp-3") is None
    assert again.get("fp-torn") is None


def test_the_older_index_format_is_read(tmp_path: Path) -> None:
    path = tmp_path / "index.json"
    path.write_text(json.dumps({"fp-a": "d-a", "fp-b": "d-b"}, indent=0))
    index = ModelIndex(path, tmp_path)
    assert (index.get("fp-a"), index.get("fp-b"), len(index)) == ("d-a", "d-b", 2)
    index.put("fp-c", "d-c")
    assert ModelIndex(path, tmp_path).get("fp-c") == "d-c"


def test_serve_takes_the_multi_model_cache_budget() -> None:
    assert build_parser().parse_args(["serve"]).multi_model_cache_gb == 20.0
    assert build_parser().parse_args(["serve", "--multi-model-cache-gb", "1.5"]).multi_model_cache_gb == 1.5
