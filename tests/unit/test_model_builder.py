"""The model builder: a tiny random Stable Diffusion folder diffusers loads offline, packed reproducibly."""

from __future__ import annotations

import gzip
import hashlib
import json
import stat
import tarfile
from pathlib import Path

import pytest

from sample_container import model_builder
from sample_container.model_builder import (
    ARCHIVE_MTIME,
    ModelFolderError,
    build_tiny_model,
    check_model_folder,
    pack_model,
)

pytest.importorskip("diffusers")
torch = pytest.importorskip("torch")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


def test_folder_layout_and_modes(tiny: Path) -> None:
    index = json.loads((tiny / "model_index.json").read_text())
    assert index["_class_name"] == "StableDiffusionPipeline"
    for part in ("unet", "vae", "text_encoder", "tokenizer", "scheduler"):
        assert (tiny / part).is_dir(), part
        assert index[part][0] is not None
    assert (tiny / "tokenizer" / "vocab.json").is_file()
    assert (tiny / "tokenizer" / "merges.txt").is_file()
    for path in tiny.rglob("*"):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o755 if path.is_dir() else 0o644), path


def test_text_encoder_keeps_the_text_model_prefix(tiny: Path) -> None:
    from safetensors import safe_open

    with safe_open(str(tiny / "text_encoder" / "model.safetensors"), "pt") as f:
        keys = list(f.keys())
    assert keys and all(k.startswith("text_model.") for k in keys)


def test_loads_offline_and_generates_64x64(tiny: Path) -> None:
    from diffusers import StableDiffusionPipeline

    pipe = StableDiffusionPipeline.from_pretrained(tiny, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    assert pipe.vae_scale_factor == 8
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tiny model gains nothing from more, and shared cores make OpenMP crawl
    try:
        image = pipe(
            "a cat",
            num_inference_steps=2,
            height=64,
            width=64,
            generator=torch.Generator("cpu").manual_seed(1),
        ).images[0]
    finally:
        torch.set_num_threads(threads)
    assert image.size == (64, 64)


def test_same_seed_same_weights_other_seed_other_weights(tiny: Path, tmp_path: Path) -> None:
    again = build_tiny_model(tmp_path / "again", seed=0)
    other = build_tiny_model(tmp_path / "other", seed=1)
    unet = "unet/diffusion_pytorch_model.safetensors"
    assert (again / unet).read_bytes() == (tiny / unet).read_bytes()
    assert (other / unet).read_bytes() != (tiny / unet).read_bytes()


def test_archive_is_reproducible(tiny: Path, tmp_path: Path) -> None:
    first = pack_model(tiny, tmp_path / "a" / "model.tar.gz")
    rebuilt = build_tiny_model(tmp_path / "rebuilt", seed=0)
    second = pack_model(rebuilt, tmp_path / "b" / "model.tar.gz")
    assert sha256(first) == sha256(second)
    assert stat.S_IMODE(first.stat().st_mode) == 0o644


def test_archive_entries_are_sorted_with_fixed_metadata(tiny: Path, tmp_path: Path) -> None:
    out = pack_model(tiny, tmp_path / "model.tar.gz")
    raw = out.read_bytes()
    assert raw[4:8] == b"\0\0\0\0"  # gzip header mtime
    assert not raw[3] & 0x08  # no file name in the gzip header
    with tarfile.open(out) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names)
    assert "model_index.json" in names and "unet/config.json" in names
    assert not any(n.startswith(("/", "./")) for n in names)
    for m in members:
        assert (m.mtime, m.uid, m.gid, m.uname, m.gname) == (ARCHIVE_MTIME, 0, 0, "root", "root")
        assert m.mode == (0o755 if m.isdir() else 0o644)
    assert gzip.decompress(raw)  # a plain, complete gzip stream


def test_pack_follows_links_and_skips_hidden(tmp_path: Path) -> None:
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    (blobs / "weights").write_bytes(b"w" * 10)
    folder = tmp_path / "snapshot"
    (folder / "unet").mkdir(parents=True)
    (folder / "model_index.json").write_text('{"_class_name": "StableDiffusionPipeline"}')
    (folder / "unet" / "w.bin").symlink_to(blobs / "weights")
    (folder / ".cache").mkdir()
    (folder / ".cache" / "x").write_text("x")
    (folder / ".gitattributes").write_text("x")
    out = pack_model(folder, tmp_path / "model.tar.gz")
    with tarfile.open(out) as tar:
        assert tar.getnames() == ["model_index.json", "unet", "unet/w.bin"]
        member = tar.getmember("unet/w.bin")
        assert member.isfile() and member.size == 10


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda p: None, "is not a directory"),
        (lambda p: p.mkdir(), "has no model_index.json"),
        (lambda p: (p.mkdir(), (p / "model_index.json").write_text("{")), "not readable JSON"),
        (lambda p: (p.mkdir(), (p / "model_index.json").write_text("{}")), "no _class_name"),
    ],
)
def test_pack_refuses_a_folder_that_is_not_a_pipeline(tmp_path: Path, setup, message: str) -> None:
    folder = tmp_path / "folder"
    setup(folder)
    with pytest.raises(ModelFolderError, match=message):
        check_model_folder(folder)
    with pytest.raises(ModelFolderError):
        pack_model(folder, tmp_path / "model.tar.gz")
    assert not list(tmp_path.glob("*.tar.gz*")) and not list(tmp_path.glob(".model*"))


def test_build_refuses_a_non_empty_destination(tmp_path: Path) -> None:
    (tmp_path / "x").write_text("x")
    with pytest.raises(FileExistsError):
        build_tiny_model(tmp_path)


def test_cli_from_folder(tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m.tar.gz"
    assert model_builder.main(["--out", str(out), "--from", str(tiny)]) == 0
    assert sha256(out) in capsys.readouterr().out
    assert model_builder.main(["--out", str(out), "--from", str(tmp_path / "missing")]) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_cli_tiny_archive_matches_the_packed_folder(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "tiny.tar.gz"
    assert model_builder.main(["--out", str(out), "--seed", "0"]) == 0
    assert sha256(out) == sha256(pack_model(tiny, tmp_path / "ref.tar.gz"))
