"""Model data for the Stable Diffusion sample: a tiny random pipeline, and a reproducible model.tar.gz.

`build_tiny_model` writes a real diffusers Stable Diffusion folder (model_index.json, unet, vae,
text_encoder, tokenizer, scheduler) whose weights are small and random, deterministic for a seed: it
loads with `StableDiffusionPipeline.from_pretrained(folder, local_files_only=True)` and makes a 64x64
image in tens of milliseconds on a CPU, so tests and the demo need no model hub. Its shapes follow
SD 1.x where it matters to callers: a VAE that scales by 8, a UNet whose default output is 512x512,
a 77-token CLIP tokenizer and a PNDM scheduler.

`pack_model` turns any such folder (or a real one, e.g. a downloaded runwayml/stable-diffusion-v1-5)
into the `model.tar.gz` SageMaker extracts into /opt/ml/model. The archive is reproducible: the same
folder gives the same bytes on every build (sorted entries, fixed mtime/uid/gid/owner names and modes,
gzip header without a name or time), so its hash can be compared and cached.

CLI (host side):

    python3 -m sample_container.model_builder --out model.tar.gz [--seed N]   # the tiny model
    python3 -m sample_container.model_builder --out model.tar.gz --from FOLDER  # an existing folder
    python3 -m sample_container.model_builder --folder DIR                      # tiny folder only

torch, diffusers and transformers are imported only by `build_tiny_model`; packing needs none of them.
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import json
import os
import stat
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: The file a diffusers pipeline folder has at its top; `pack_model` refuses a folder without it.
MODEL_INDEX = "model_index.json"
#: Components a Stable Diffusion folder built here holds (safety checker and feature extractor: none).
COMPONENTS = ("scheduler", "text_encoder", "tokenizer", "unet", "vae")
#: Modification time written for every archive entry (2020-01-01T00:00:00Z; 0 upsets some tools).
ARCHIVE_MTIME = 1577836800
FILE_MODE = 0o644
DIR_MODE = 0o755
#: CLIP's tokenizer length; the text encoder's position embeddings must match it.
MAX_TOKENS = 77


class ModelFolderError(ValueError):
    """The folder given to `pack_model` is not a diffusers pipeline folder."""


# ------------------------------------------------------------------------------------- tiny model


def _lib(name: str) -> Any:
    """A heavy library, imported when first needed and typed as Any (diffusers is only partly typed)."""
    return importlib.import_module(name)


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2/CLIP's byte -> printable character table (byte-level BPE's alphabet)."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def tiny_vocab() -> dict[str, int]:
    """A complete byte-level CLIP vocabulary without merges: every byte, alone or word-final, + specials."""
    chars = list(_bytes_to_unicode().values())
    vocab = {c: i for i, c in enumerate(chars)}
    for c in chars:
        vocab[c + "</w>"] = len(vocab)
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    return vocab


def _components(seed: int) -> dict[str, Any]:
    """The pipeline's parts, each initialised from `seed` (so one part's shape never shifts another's)."""
    torch, diffusers, transformers = _lib("torch"), _lib("diffusers"), _lib("transformers")

    vocab = tiny_vocab()
    torch.manual_seed(seed)
    unet = diffusers.UNet2DConditionModel(
        sample_size=64,  # latents of 64x64: 512x512 images by default, as SD 1.x
        in_channels=4,
        out_channels=4,
        block_out_channels=(8, 16),
        layers_per_block=1,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=32,
        attention_head_dim=2,
        norm_num_groups=4,
    )
    torch.manual_seed(seed + 1)
    vae = diffusers.AutoencoderKL(
        in_channels=3,
        out_channels=3,
        block_out_channels=(4, 4, 4, 4),  # four blocks: a scale factor of 8, as SD's VAE
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        latent_channels=4,
        layers_per_block=1,
        norm_num_groups=2,
        sample_size=512,
    )
    torch.manual_seed(seed + 2)
    text_encoder = transformers.CLIPTextModel(
        transformers.CLIPTextConfig(
            vocab_size=len(vocab),
            hidden_size=32,
            intermediate_size=37,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=MAX_TOKENS,
            projection_dim=32,
            bos_token_id=vocab["<|startoftext|>"],
            eos_token_id=vocab["<|endoftext|>"],
            pad_token_id=vocab["<|endoftext|>"],
        )
    )
    scheduler = diffusers.PNDMScheduler(  # SD 1.x's scheduler configuration
        num_train_timesteps=1000,
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        skip_prk_steps=True,
        set_alpha_to_one=False,
        steps_offset=1,
    )
    return {"unet": unet, "vae": vae, "text_encoder": text_encoder, "scheduler": scheduler}


def _write_tokenizer(folder: Path) -> None:
    """vocab.json + merges.txt (what every CLIP tokenizer reads), then the tokenizer's own files."""
    _write_tokenizer_sources(folder)
    tokenizer = _lib("transformers").CLIPTokenizer(
        vocab=str(folder / "vocab.json"), merges=str(folder / "merges.txt"), model_max_length=MAX_TOKENS
    )
    tokenizer.save_pretrained(folder)


def _prefix_text_model_keys(weights: Path) -> None:
    """Give the text encoder's weights the `text_model.` key prefix.

    transformers 5 saves CLIPTextModel without it; transformers 4 (and other loaders of SD folders)
    expect it, and transformers 5 reads either form.
    """
    st = _lib("safetensors.torch")
    tensors = st.load_file(str(weights))
    renamed = {(k if k.startswith("text_model.") else f"text_model.{k}"): v for k, v in tensors.items()}
    if renamed.keys() != tensors.keys():
        st.save_file(renamed, str(weights), metadata={"format": "pt"})


def _normalise_modes(folder: Path) -> None:
    """0755 directories, 0644 files: safetensors writes 0600, which an unprivileged reader cannot open."""
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            os.chmod(Path(root, name), DIR_MODE)
        for name in files:
            os.chmod(Path(root, name), FILE_MODE)
    os.chmod(folder, DIR_MODE)


def build_tiny_model(dest: Path, seed: int = 0) -> Path:
    """Write a tiny random Stable Diffusion pipeline folder at `dest` (created; must be empty) and return it.

    The weights depend only on `seed` (and the installed torch); building twice with the same seed writes
    the same files byte for byte. Takes a second or two once torch and diffusers are imported.
    """
    import warnings

    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise FileExistsError(f"{dest} is not empty")
    dest.mkdir(parents=True, exist_ok=True)
    _write_tokenizer(dest / "tokenizer")
    parts = _components(seed)
    tokenizer = _lib("transformers").CLIPTokenizer.from_pretrained(dest / "tokenizer")
    pipe = _lib("diffusers").StableDiffusionPipeline(
        tokenizer=tokenizer,
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
        image_encoder=None,
        **parts,
    )
    hf_logging = _lib("transformers").utils.logging
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # "Writing model shards" for a 300 kB file
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # diffusers' notes about the missing safety checker
            pipe.save_pretrained(dest, safe_serialization=True)
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    # save_pretrained rewrote the tokenizer's files (tokenizer.json and its config): keep vocab + merges.
    _write_tokenizer_sources(dest / "tokenizer")
    _prefix_text_model_keys(dest / "text_encoder" / "model.safetensors")
    _normalise_modes(dest)
    return dest


def _write_tokenizer_sources(folder: Path) -> None:
    """vocab.json + merges.txt: what every CLIP tokenizer (slow or fast, any transformers) can read."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.json").write_text(json.dumps(tiny_vocab(), ensure_ascii=False, sort_keys=True) + "\n")
    (folder / "merges.txt").write_text("#version: 0.2\n")


# ------------------------------------------------------------------------------------------ packing


def check_model_folder(folder: Path) -> None:
    """Raise ModelFolderError unless `folder` is a directory with a diffusers model_index.json."""
    if not folder.is_dir():
        raise ModelFolderError(f"{folder} is not a directory")
    index = folder / MODEL_INDEX
    if not index.is_file():
        raise ModelFolderError(
            f"{folder} has no {MODEL_INDEX}: give the folder of a diffusers pipeline (the one that holds "
            f"{MODEL_INDEX}, unet/, vae/, text_encoder/, tokenizer/, scheduler/)"
        )
    try:
        content = json.loads(index.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelFolderError(f"{index} is not readable JSON: {exc}") from exc
    if not isinstance(content, dict) or "_class_name" not in content:
        raise ModelFolderError(f"{index} has no _class_name: it is not a diffusers model index")


def _entries(folder: Path) -> Iterator[tuple[str, Path]]:
    """(archive name, path) for every directory and file under `folder`, sorted by name.

    Hidden entries (.git, .cache/huggingface, .gitattributes) are left out; symbolic links are followed
    (a Hugging Face cache snapshot is made of links to blobs), so the archive holds the files themselves.
    """
    found: list[tuple[str, Path]] = []
    for root, dirs, files in os.walk(folder, followlinks=True):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        rel_root = Path(root).relative_to(folder)
        for name in dirs:
            found.append(((rel_root / name).as_posix(), Path(root, name)))
        for name in files:
            if not name.startswith("."):
                found.append(((rel_root / name).as_posix(), Path(root, name)))
    found.sort(key=lambda entry: entry[0])
    yield from found


def _tar_info(name: str, path: Path) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    st = path.stat()  # follows links
    info.mtime = ARCHIVE_MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    if stat.S_ISDIR(st.st_mode):
        info.type = tarfile.DIRTYPE
        info.mode = DIR_MODE
    elif stat.S_ISREG(st.st_mode):
        info.type = tarfile.REGTYPE
        info.mode = FILE_MODE
        info.size = st.st_size
    else:
        raise ModelFolderError(f"{path} is neither a file nor a directory")
    return info


def pack_model(folder: Path, out: Path) -> Path:
    """Pack the diffusers folder `folder` into the gzip tarball `out` (written atomically) and return it.

    Entries are relative to the folder (model_index.json at the archive's top, as SageMaker extracts it
    into /opt/ml/model), sorted, with fixed metadata: the same folder always gives the same bytes.
    """
    folder, out = Path(folder), Path(out)
    check_model_folder(folder)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    try:
        with os.fdopen(fd, "wb") as raw:
            # filename="" and mtime=0 keep the gzip header free of the name and the time of the build
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=6, mtime=0) as gz:
                with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
                    for name, path in _entries(folder):
                        info = _tar_info(name, path)
                        if info.isdir():
                            tar.addfile(info)
                        else:
                            with path.open("rb") as f:
                                tar.addfile(info, f)
        os.chmod(tmp_name, FILE_MODE)
        os.replace(tmp_name, out)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return out


def build_tiny_archive(out: Path, seed: int = 0) -> Path:
    """The tiny model packed into `out` (the folder is built in a temporary directory and removed)."""
    with tempfile.TemporaryDirectory(prefix="sd-tiny-") as tmp:
        folder = build_tiny_model(Path(tmp) / "model", seed=seed)
        return pack_model(folder, out)


# ---------------------------------------------------------------------------------------------- CLI


def _sha256(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m sample_container.model_builder",
        description="Build the Stable Diffusion sample's model data: a tiny random pipeline, or an "
        "existing diffusers folder, packed as a reproducible model.tar.gz.",
    )
    parser.add_argument("--out", type=Path, help="the model.tar.gz to write")
    parser.add_argument(
        "--from", dest="source", type=Path, metavar="FOLDER", help="pack this diffusers folder instead"
    )
    parser.add_argument("--folder", type=Path, help="also keep (or only write) the tiny model's folder here")
    parser.add_argument("--seed", type=int, default=0, help="seed of the tiny model's weights (default 0)")
    args = parser.parse_args(argv)
    if args.out is None and args.folder is None:
        parser.error("give --out (an archive), --folder (a tiny model folder), or both")
    if args.source is not None and args.folder is not None:
        parser.error("--from packs an existing folder; --folder builds a tiny one: give one of them")
    if args.source is not None and args.out is None:
        parser.error("--from needs --out")
    started = time.monotonic()
    try:
        if args.source is not None:
            pack_model(args.source, args.out)
        elif args.folder is not None:
            build_tiny_model(args.folder, seed=args.seed)
            if args.out is not None:
                pack_model(args.folder, args.out)
        else:
            build_tiny_archive(args.out, seed=args.seed)
    except (ModelFolderError, FileExistsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    took = time.monotonic() - started
    if args.folder is not None:
        print(f"tiny model folder: {args.folder}")
    if args.out is not None:
        size = args.out.stat().st_size
        print(f"{args.out}: {size:,} bytes, sha256 {_sha256(args.out)} ({took:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
